"""Checks before a server starts: a configuration that cannot be right stops it with one line
that names the setting, instead of a traceback from every process later (or, worse, a server
that runs open on the internet).

``mcpq web`` / ``mcpq worker`` call these before they exec; ``mcpq.ops.runtime.gunicorn_conf`` calls
:func:`web_problem` again for a plain ``gunicorn -c python:mcpq.ops.runtime.gunicorn_conf`` start.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from mcpq.frontend.auth import AuthConfigError, check_settings
from mcpq.ops.runtime.tool_check import tool_modules_problem
from mcpq.shared import redis_tls
from mcpq.shared.request_state import WeakSecret, parse_secrets
from mcpq.shared.sealing import PLAINTEXT, DataKeyError, parse_data_keys
from mcpq.shared.settings import Settings

NO_TOOLS = (
    "MCPQ_TOOLS is not set: name the modules whose @tool functions to serve "
    "(e.g. MCPQ_TOOLS=myapp.tools; the bundled demo is mcpq.demo)"
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
    if problem := tool_modules_problem(settings.tools):
        return problem
    if tls_problem := redis_tls.problem(settings):
        return tls_problem
    if cluster := cluster_problem(settings):
        return cluster
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
    return data_keys_problem(settings)


def worker_problem(settings: Settings) -> str | None:
    if not settings.tools:
        return NO_TOOLS
    if problem := tool_modules_problem(settings.tools):
        return problem
    return redis_tls.problem(settings) or cluster_problem(settings) or data_keys_problem(settings)


def check_worker(settings: Settings, *, refuse: Callable[[str], object], reach: bool) -> None:
    """``mcpq worker``'s start: a configuration problem goes to ``refuse`` (argparse's error:
    one line, exit 2); then, with ``reach``, the broker (and store) must answer within
    ``MCPQ_BROKER_WAIT_S``, else one line and exit 3 (``ops.runtime.broker_wait``, which imports
    Celery: loaded for a worker only)."""
    if problem := worker_problem(settings):
        refuse(problem)
        return
    if reach:
        from mcpq.ops.runtime.broker_wait import wait_for_services

        if status := wait_for_services(settings):
            raise SystemExit(status)


def cluster_problem(settings: Settings) -> str | None:
    """A Redis Cluster store (``MCPQ_REDIS_CLUSTER``) needs a broker of its own: kombu has no
    cluster transport, and a create cannot push a message onto a list of another slot."""
    if not settings.redis_cluster:
        return None
    if settings.broker_url and settings.broker_url != settings.redis_url:
        return None
    return (
        "MCPQ_REDIS_CLUSTER=true needs CELERY_BROKER_URL: Celery's broker cannot be the Redis "
        "Cluster; name a separate Redis or RabbitMQ"
    )


#: The step that gives a local ``.env`` (``honcho start -f Procfile.dev``) its data key
#: (docs/operations.md, "Local formation"): the refusal of an unset key names it.
DOTENV_DATA_KEY_STEP = 'echo "MCPQ_DATA_KEYS=$(mcpq keys new-data-key)" >> .env'


def data_keys_problem(settings: Settings) -> str | None:
    """``MCPQ_DATA_KEYS`` unset or malformed (encryption at rest is off only when asked)."""
    try:
        parse_data_keys(settings.data_keys)
    except DataKeyError as exc:
        if settings.data_keys.strip():
            return str(exc)
        return f"{exc}; in a .env file (honcho): {DOTENV_DATA_KEY_STEP}"
    return None


def data_keys_warning(settings: Settings) -> str | None:
    """The one start-up warning of the explicit opt-out."""
    if settings.data_keys.strip().lower() != PLAINTEXT:
        return None
    return f"MCPQ_DATA_KEYS={PLAINTEXT}: task payloads are stored unencrypted in Redis"


def bind_host(bind: str) -> str:
    """The host of a gunicorn bind (``0.0.0.0:8000``, ``[::1]:80``, ``unix:/run/x.sock``)."""
    if bind.startswith("unix:"):
        return bind
    host, _, _ = bind.rpartition(":")
    return host or bind


def flower_problem(settings: Settings, address: str) -> str | None:
    """Why ``mcpq flower`` must not listen on ``address``, or ``None``. Flower has no login of
    its own unless one is configured, and it shows every node, queue and run, and can revoke
    runs and restart pools: off loopback it needs basic auth or its OAuth login."""
    pairs = [pair for pair in settings.flower_basic_auth.split(",") if pair]
    if any(not user or not password for user, _, password in (p.partition(":") for p in pairs)):
        # Never echo the value: it holds passwords.
        return "FLOWER_BASIC_AUTH must be user:password pairs, comma-separated"
    if is_loopback(address) or pairs or settings.flower_auth:
        return None
    return (
        f"refusing to run Flower on {address or 'every interface'} without a login: set "
        "FLOWER_BASIC_AUTH=user:password (or FLOWER_AUTH with Flower's OAuth settings), or keep "
        "MCPQ_FLOWER_ADDRESS on loopback (127.0.0.1)"
    )
