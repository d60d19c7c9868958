"""Checks before a server starts: a configuration that cannot be right stops it with one line
that names the setting, instead of a traceback from every process later (or, worse, a server
that runs open on the internet).

``mcpq web`` / ``mcpq worker`` call these before they exec; ``ops.gunicorn_conf`` calls
:func:`web_problem` again for a plain ``gunicorn -c python:ops.gunicorn_conf`` start.
"""

from __future__ import annotations

import ipaddress

from frontend.auth import AuthConfigError, check_settings
from shared.request_state import WeakSecret, parse_secrets
from shared.settings import Settings

NO_TOOLS = (
    "MCPQ_TOOLS is not set: name the modules whose @tool functions to serve "
    "(e.g. MCPQ_TOOLS=myapp.tools; the bundled demo is tools.demo)"
)


def is_loopback(host: str) -> bool:
    """A bind address only this machine can reach (a unix socket counts)."""
    if host.startswith("unix:") or host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def web_problem(settings: Settings, hosts: list[str]) -> str | None:
    """Why ``mcpq web`` must not start with ``settings`` bound to ``hosts``, or ``None``."""
    if not settings.tools:
        return NO_TOOLS
    if settings.secret:
        try:
            parse_secrets(settings.secret)
        except WeakSecret as exc:
            return str(exc)
    try:
        check_settings(settings)
    except AuthConfigError as exc:
        return str(exc)
    public = [host for host in hosts if not is_loopback(host)]
    if public and not settings.auth:
        return (
            f"refusing to serve {public[0]} without authentication: set MCPQ_AUTH "
            "(oauth, apikey), or MCPQ_AUTH=none behind an authenticating proxy or on a "
            "private network"
        )
    return None


def worker_problem(settings: Settings) -> str | None:
    return NO_TOOLS if not settings.tools else None


def bind_host(bind: str) -> str:
    """The host of a gunicorn bind (``0.0.0.0:8000``, ``[::1]:80``, ``unix:/run/x.sock``)."""
    if bind.startswith("unix:"):
        return bind
    host, _, _ = bind.rpartition(":")
    return host or bind
