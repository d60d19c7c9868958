"""The exact command lines behind `mcpq web|worker|flower` and the children of `mcpq dev`.

Pure functions from options to argv, so the unit tests can assert what would be exec'd without
starting anything. Every server is run as `sys.executable -m <tool>`: the same interpreter and
virtualenv as `mcpq` itself, whatever PATH says.
"""

from __future__ import annotations

import sys

GUNICORN_CONFIG = "python:mcpq.ops.runtime.gunicorn_conf"
ASGI_APP = "mcpq.frontend.entry:app"
CELERY_APP = "mcpq.workers.entry"
#: A Celery worker of that app: its ``worker`` command without Celery's umbrella program and
#: its plugins (``mcpq.workers.main``: about 10 MiB less per worker process).
WORKER = [sys.executable, "-m", "mcpq.workers.main"]
DEFAULT_FLOWER_PORT = 5555


def bind_address(host: str, port: int) -> str:
    """gunicorn's `--bind` value; IPv6 literals need brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def web_command(
    *,
    port: int,
    workers: int,
    host: str = "0.0.0.0",  # noqa: S104
    app: str = ASGI_APP,
) -> list[str]:
    """gunicorn serving the Falcon ASGI app (``app``: another one, e.g. a test's); worker class
    and timeouts live in mcpq.ops.runtime.gunicorn_conf."""
    return [
        sys.executable, "-m", "gunicorn",
        "-c", GUNICORN_CONFIG,
        "--bind", bind_address(host, port),
        "--workers", str(workers),
        app,
    ]  # fmt: skip


def default_worker_hostname(queues: str, instance: str = "") -> str:
    """`mcpq-<queues>@%h`, or `mcpq-<queues>.<instance>@%h` when the platform names the
    instance (`worker_bulk.2`): one node name per process, so Flower tells pools and instances
    apart."""
    name = f"mcpq-{queues.replace(',', '-')}"
    return f"{name}.{instance}@%h" if instance else f"{name}@%h"


#: mcpq's pool kinds and the Celery pool each runs (see ``mcpq.workers.execution``): ``io`` runs
#: each tool in a thread (tools that wait hold a thread, not a process; ``async def`` tools get
#: an event loop of their own), ``cpu`` in a process of its own (prefork).
CELERY_POOLS = {"io": "custom", "cpu": "prefork"}
#: The io pool's class (Celery's threads pool that survives a cold shutdown), named through
#: Celery's ``CELERY_CUSTOM_WORKER_POOL`` for ``--pool custom``.
IO_POOL_ENV = {"CELERY_CUSTOM_WORKER_POOL": "mcpq.workers.io_pool:IoPool"}


def worker_command(
    *,
    queues: str,
    concurrency: int,
    hostname: str | None = None,
    instance: str = "",
    pool: str = "io",
    loglevel: str = "INFO",
) -> list[str]:
    """A Celery worker of pool kind ``pool`` consuming `queues`. It sends task events when
    Flower asks for them (or with ``MCPQ_TASK_EVENTS``): each is a Redis command per run.
    Logging at WARNING or above (``MCPQ_LOG_LEVEL``) also drops Celery's start-up banner."""
    quiet = ["--quiet"] if loglevel.upper() in {"WARNING", "ERROR", "CRITICAL"} else []
    return [
        *WORKER, *quiet,
        "--pool", CELERY_POOLS[pool],
        "--loglevel", loglevel.upper(),
        "-Q", queues,
        "-c", str(concurrency),
        "-n", hostname or default_worker_hostname(queues, instance),
    ]  # fmt: skip


def flower_command(*, port: int, address: str = "127.0.0.1") -> list[str]:
    """Flower, the Celery dashboard, reading the broker configured by the Celery app. The
    address is always explicit: Flower's own default ('') listens on every interface, IPv4 and
    IPv6, while its banner says 127.0.0.1."""
    return [
        sys.executable, "-m", "celery", "-A", CELERY_APP, "flower",
        f"--port={port}", f"--address={address}",
    ]  # fmt: skip


#: Wildcard binds, named for people (Flower's sockets are IPv6-only on ``::``: tornado sets it).
_EVERY = {"0.0.0.0": "every IPv4 interface", "::": "every IPv6 interface"}  # noqa: S104


def flower_banner(address: str, port: int, login: str) -> str:
    """The line ``mcpq flower`` prints before it execs: where it really listens, and who may
    look (``login``: what guards it)."""
    where = _EVERY.get(address, address)
    return f"mcpq flower: listening on {bind_address(address, port)} ({where}); {login}"


def _mcpq(*args: str) -> list[str]:
    return [sys.executable, "-m", "mcpq", *args]


def dev_web_command(port: int) -> list[str]:
    """`mcpq dev`'s web child: loopback only."""
    return _mcpq("web", "--port", str(port), "--host", "127.0.0.1")


def dev_worker_command() -> list[str]:
    """`mcpq dev`'s worker child: the default queues and concurrency from the environment."""
    return _mcpq("worker")


def dev_bulk_worker_command() -> list[str]:
    """`mcpq dev`'s second pool: the `bulk` queue (tools declared with `queue="bulk"`), a cpu
    (prefork) pool."""
    return _mcpq("worker", "--queues", "bulk", "--pool", "cpu", "--concurrency", "1")


def redis_command(executable: str, *, port: int, host: str = "127.0.0.1") -> list[str]:
    """A throw-away local Redis (no persistence) for `honcho start -f Procfile.dev`."""
    return [executable, "--port", str(port), "--bind", host, "--save", "", "--appendonly", "no"]


def dev_flower_command(port: int) -> list[str]:
    """`mcpq dev --flower`'s dashboard child: loopback only, like the web child."""
    return _mcpq("flower", "--port", str(port), "--address", "127.0.0.1")
