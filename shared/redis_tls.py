"""How every Redis client of mcpq speaks TLS: one policy, derived once from the settings.

redis-py (the task store's clients, sync and asyncio: web, workers, the sweeper, ``mcpq
status``), kombu (Celery's broker: workers, the web tier's producer, ``mcpq status``'s ping) and
Flower's broker view each take TLS options in a shape of their own. They are all built here from
``REDIS_URL``, ``MCPQ_REDIS_TLS_VERIFY`` and ``MCPQ_REDIS_TLS_CA``, so no client can be left
behind: kombu, told nothing, does not verify a ``rediss://`` URL at all, and redis-py before 6
checks the certificate but not the host name it was issued for.

A ``rediss://`` URL is verified by default: the certificate must chain to the system's CA bundle
(plus ``MCPQ_REDIS_TLS_CA``'s, for providers with a private CA) and name the URL's host. Turning
that off is explicit (``MCPQ_REDIS_TLS_VERIFY=false``, or ``ssl_cert_reqs=none`` in the URL,
which many providers' instructions add) and every server process says so once at startup
(:func:`startup_warning`). Any other ``ssl_*`` URL parameter is refused: kombu lets the URL's
``ssl_*`` parameters replace its whole TLS configuration, so honouring some would silently drop
the CA or the host-name check.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from mcpq.shared import redis_urls
from mcpq.shared.settings import Settings

#: ``ssl_cert_reqs`` values honoured in a ``rediss://`` URL (redis-py's and kombu's spellings).
_URL_CERT_REQS = {"required": True, "cert_required": True, "none": False, "cert_none": False}


class RedisTlsError(ValueError):
    """A TLS configuration that cannot be right; the message is one line naming the setting."""


@dataclass(frozen=True)
class RedisTls:
    """The TLS policy of every Redis connection. ``url`` is ``REDIS_URL`` without its
    ``ssl_cert_reqs`` (already read into ``verify``): give clients this one, not the setting."""

    url: str
    enabled: bool
    verify: bool
    ca_file: str = ""
    #: What turned verification off (for the startup warning); empty while it is on.
    opted_out_by: str = ""

    def redis_py(self) -> dict[str, Any]:
        """Keyword arguments for redis-py's ``from_url`` (sync and asyncio)."""
        if not self.enabled:
            return {}
        if not self.verify:
            return {"ssl_cert_reqs": "none", "ssl_check_hostname": False}
        # Explicit, not redis-py's defaults: before redis-py 6 the host name was not checked.
        return {
            "ssl_cert_reqs": "required",
            "ssl_check_hostname": True,
            "ssl_ca_certs": self.ca_file or None,
        }

    def kombu(self) -> dict[str, Any] | None:
        """Celery's ``broker_use_ssl`` (kombu's Redis transport, Flower's broker view).
        ``None`` for a plain ``redis://`` URL: a dict there would turn TLS on."""
        if not self.enabled:
            return None
        if not self.verify:
            return {"ssl_cert_reqs": ssl.CERT_NONE}
        options: dict[str, Any] = {"ssl_cert_reqs": ssl.CERT_REQUIRED, "ssl_check_hostname": True}
        if self.ca_file:
            options["ssl_ca_certs"] = self.ca_file
        return options


def redis_tls(settings: Settings) -> RedisTls:
    """The policy for ``settings``; raises :class:`RedisTlsError` on a contradiction."""
    parts = urlsplit(settings.redis_url)
    enabled = parts.scheme in ("rediss", "rediss+sentinel")  # mcpq.shared.redis_urls
    query = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(name, value) for name, value in query if not name.startswith("ssl_")]
    from_url = [(name, value) for name, value in query if name.startswith("ssl_")]
    # Rebuilt only when something was taken out: a round trip through urlunsplit is not exact
    # (``unix:///path`` loses its slashes).
    url = urlunsplit(parts._replace(query=urlencode(kept))) if from_url else settings.redis_url
    url_verify: bool | None = None
    for name, value in from_url:
        if name != "ssl_cert_reqs":
            raise RedisTlsError(
                f"REDIS_URL: the parameter {name} is not supported; TLS is configured with "
                "MCPQ_REDIS_TLS_VERIFY and MCPQ_REDIS_TLS_CA"
            )
        if value.lower() not in _URL_CERT_REQS:
            raise RedisTlsError(
                f"REDIS_URL: ssl_cert_reqs={value} is not supported (required, the default, "
                "or none; MCPQ_REDIS_TLS_VERIFY=false is the same as none)"
            )
        url_verify = _URL_CERT_REQS[value.lower()]
    if not enabled:
        if from_url:
            raise RedisTlsError("REDIS_URL: ssl_cert_reqs needs a rediss:// (TLS) URL")
        if settings.redis_tls_ca:
            raise RedisTlsError("MCPQ_REDIS_TLS_CA is set but REDIS_URL is not rediss:// (TLS)")
        return RedisTls(url=url, enabled=False, verify=False)
    if url_verify is True and not settings.redis_tls_verify:
        raise RedisTlsError(
            "REDIS_URL says ssl_cert_reqs=required but MCPQ_REDIS_TLS_VERIFY=false: choose one"
        )
    verify = settings.redis_tls_verify and url_verify is not False
    if not verify:
        if settings.redis_tls_ca:
            raise RedisTlsError(
                "MCPQ_REDIS_TLS_CA is set but certificate checks are off "
                "(MCPQ_REDIS_TLS_VERIFY=false or ssl_cert_reqs=none): choose one"
            )
        by = (
            "ssl_cert_reqs=none in REDIS_URL"
            if settings.redis_tls_verify
            else "MCPQ_REDIS_TLS_VERIFY=false"
        )
        return RedisTls(url=url, enabled=True, verify=False, opted_out_by=by)
    ca = settings.redis_tls_ca
    if ca and not (os.path.isfile(ca) and os.access(ca, os.R_OK)):
        raise RedisTlsError(f"MCPQ_REDIS_TLS_CA: {ca} is not a readable file")
    return RedisTls(url=url, enabled=True, verify=True, ca_file=ca)


def problem(settings: Settings) -> str | None:
    """Why no Redis client can be built with ``settings`` (one line), or ``None``."""
    try:
        tls = redis_tls(settings)
        if redis_urls.is_sentinel(tls.url):
            redis_urls.parse_sentinel(tls.url)
        if (
            redis_urls.is_sentinel(settings.broker_url)
            and settings.broker_url != settings.redis_url
        ):
            redis_urls.parse_sentinel(settings.broker_url, "CELERY_BROKER_URL", tls=False)
    except (RedisTlsError, redis_urls.RedisUrlError) as exc:
        return str(exc)
    return None


def startup_warning(settings: Settings) -> str | None:
    """The one line each server process kind logs at startup while certificate checks are
    off, naming what turned them off."""
    try:
        tls = redis_tls(settings)
    except RedisTlsError:
        return None  # refused at startup with its own line (``problem``)
    if not tls.opted_out_by:
        return None
    return (
        f"Redis TLS certificate checks are OFF ({tls.opted_out_by}): the connection is "
        "encrypted but anyone on the path can impersonate Redis; set MCPQ_REDIS_TLS_CA to "
        "your provider's CA bundle instead"
    )
