"""Redis reached through Sentinel: the URL form of ``REDIS_URL`` (and ``CELERY_BROKER_URL``).

::

    redis+sentinel://[[user]:password@]host1[:26379][,host2[:26379]...]/<service>[/<db>]
    rediss+sentinel://...   (TLS to the sentinels and to the Redis servers)

The form is the one of the ``redis-sentinel-url`` convention (Django/Dramatiq-era tooling):
the hosts are the sentinels (port 26379 unless told), the first path segment is the service
(Sentinel's ``master name``), the second the database (0 unless told). The credentials are the
Redis servers' (the primary and its replicas), not the sentinels': a sentinel with its own
``requirepass`` gets ``MCPQ_REDIS_SENTINEL_PASSWORD``. Query parameters are refused but for
``ssl_cert_reqs`` (``mcpq.shared.redis_tls`` reads it, as for ``rediss://``).

Every client builds on this parse: the store's redis-py clients (``mcpq.shared.store.clients``:
``Sentinel.master_for``, which asks the sentinels for the primary on each new connection and
drops connections to a primary that was demoted), and Celery's broker (kombu's Sentinel
transport, whose URL is ``sentinel://host:port;sentinel://host2:port`` with the service in the
``master_name`` transport option: :func:`kombu_url`, :func:`kombu_options`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

#: Sentinel URL schemes and whether they mean TLS.
SENTINEL_SCHEMES = {"redis+sentinel": False, "rediss+sentinel": True}
DEFAULT_SENTINEL_PORT = 26379


class RedisUrlError(ValueError):
    """A URL that cannot be used; the message is one line naming the setting."""


@dataclass(frozen=True)
class SentinelUrl:
    """A parsed ``redis+sentinel://`` URL. ``password``/``username``: the Redis servers'."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    tls: bool = False

    def __repr__(self) -> str:  # never the password
        hosts = ",".join(f"{host}:{port}" for host, port in self.sentinels)
        return f"SentinelUrl({hosts}/{self.service}/{self.db}, tls={self.tls})"


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***``, for messages and logs (no secrets in
    them): ``redis://``, ``rediss://``, ``redis+sentinel://`` and ``amqp://`` alike."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # not a URL urlsplit can read: show nothing of it but its scheme
        return f"{url.partition('://')[0][:16]}://(unreadable URL)"
    if password is None:
        return url
    # Rebuilt from the last "@": the password may also occur elsewhere in the URL.
    userinfo, _, hosts = parts.netloc.rpartition("@")
    user = userinfo.partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{hosts}"))


def is_sentinel(url: str) -> bool:
    return url.split("://", 1)[0].lower() in SENTINEL_SCHEMES


def _host_port(item: str, setting: str) -> tuple[str, int]:
    if item.startswith("["):  # [IPv6]:port
        host, sep, rest = item[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise RedisUrlError(f"{setting}: bad sentinel address {item!r}")
        port_text = rest[1:]
    else:
        host, _, port_text = item.partition(":")
    if not host:
        raise RedisUrlError(f"{setting}: a sentinel address without a host in {item!r}")
    try:
        port = int(port_text) if port_text else DEFAULT_SENTINEL_PORT
    except ValueError:
        raise RedisUrlError(f"{setting}: bad sentinel port in {item!r}") from None
    if not 0 < port < 65536:
        raise RedisUrlError(f"{setting}: bad sentinel port in {item!r}")
    return host, port


def parse_sentinel(url: str, setting: str = "REDIS_URL", *, tls: bool = True) -> SentinelUrl:
    """Parse a ``redis+sentinel://`` URL; raises :class:`RedisUrlError` naming ``setting``.
    The URL must have lost its ``ssl_cert_reqs`` already (``mcpq.shared.redis_tls``). ``tls``:
    whether ``rediss+sentinel://`` may be used here (only where ``mcpq.shared.redis_tls``'s policy
    applies: ``REDIS_URL``)."""
    form = "redis+sentinel://[:password@]host1:26379,host2:26379/<service>[/<db>]"
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SENTINEL_SCHEMES:
        raise RedisUrlError(f"{setting}: not a Sentinel URL ({form})")
    if SENTINEL_SCHEMES[scheme] and not tls:
        raise RedisUrlError(
            f"{setting}: rediss+sentinel:// is supported for REDIS_URL only (where "
            "MCPQ_REDIS_TLS_* apply); give the broker the store's URL, or redis+sentinel://"
        )
    if parts.query or parts.fragment:
        raise RedisUrlError(
            f"{setting}: a Sentinel URL takes no query parameters but ssl_cert_reqs ({form})"
        )
    userinfo, _, hosts = parts.netloc.rpartition("@")
    username = password = None
    if userinfo:
        user, has_password, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if has_password else None
    sentinels = tuple(_host_port(item.strip(), setting) for item in hosts.split(","))
    path = [segment for segment in parts.path.split("/") if segment]
    if not path or len(path) > 2:
        raise RedisUrlError(
            f"{setting}: name the Sentinel service, and only a db after it ({form})"
        )
    try:
        db = int(path[1]) if len(path) == 2 else 0
    except ValueError:
        raise RedisUrlError(f"{setting}: the database must be a number ({form})") from None
    if db < 0:
        raise RedisUrlError(f"{setting}: the database must be 0 or more ({form})")
    return SentinelUrl(
        sentinels, unquote(path[0]), db, username, password, SENTINEL_SCHEMES[scheme]
    )


def kombu_url(target: SentinelUrl) -> str:
    """kombu's form: one ``sentinel://`` URL per sentinel, joined by ``;`` (kombu reads the
    credentials and the database of the first; each carries them, so any may come first)."""
    credentials = ""
    if target.username or target.password is not None:
        user = quote(target.username or "", safe="")
        credentials = f"{user}:{quote(target.password or '', safe='')}@"
    urls = []
    for host, port in target.sentinels:
        where = f"[{host}]" if ":" in host else host
        urls.append(f"sentinel://{credentials}{where}:{port}/{target.db}")
    return ";".join(urls)


def sentinel_kwargs(
    target: SentinelUrl, sentinel_password: str, timeout_s: float, tls: dict[str, Any]
) -> dict[str, Any]:
    """Connection options of the sentinels themselves (redis-py's ``sentinel_kwargs``, kombu's
    ``sentinel_kwargs`` transport option): timeouts always (a sentinel that does not answer
    must not stall the search for the primary), their password when they have one, and TLS
    with the same policy as the Redis servers'."""
    options: dict[str, Any] = {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s}
    if sentinel_password:
        options["password"] = sentinel_password
    if target.tls:
        options.update(tls)
        options["ssl"] = True
    return options


def kombu_options(
    target: SentinelUrl, sentinel_password: str, timeout_s: float, tls: dict[str, Any]
) -> dict[str, Any]:
    """What kombu's Sentinel transport needs besides :func:`kombu_url` (transport options)."""
    return {
        "master_name": target.service,
        "sentinel_kwargs": sentinel_kwargs(target, sentinel_password, timeout_s, tls),
    }
