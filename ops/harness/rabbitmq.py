"""A private RabbitMQ virtual host per test run or benchmark, on the shared RabbitMQ of this
machine; and the CPU time that RabbitMQ has used.

RabbitMQ is not started by the tests or the benchmarks (unlike Redis): a run that uses it
creates its own vhost, ``<purpose>-<hex>`` (``mcpq-test-…`` for the tests, ``mcpq-bench-…`` for
the benchmarks), with ``rabbitmqctl`` (``add_vhost``, then ``set_permissions`` for ``guest``),
and deletes it at the end, queues, exchanges and messages with it. The default vhost ``/`` is
never used nor touched: :func:`delete_vhost` deletes only names with one of those prefixes.
Where RabbitMQ is not reachable on ``MCPQ_TEST_AMQP_HOST:MCPQ_TEST_AMQP_PORT``
(127.0.0.1:5672), or ``rabbitmqctl`` cannot manage it, :func:`unavailable` says why (the
RabbitMQ parametrizations skip, the benchmarks leave that measurement out).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache

HOST = os.environ.get("MCPQ_TEST_AMQP_HOST", "127.0.0.1")
PORT = int(os.environ.get("MCPQ_TEST_AMQP_PORT", "5672"))
USER = "guest"
PASSWORD = "guest"  # noqa: S105 (RabbitMQ's built-in account: it logs in over loopback only)
_CTL_TIMEOUT_S = 60.0
#: The prefixes of the vhosts this module makes: tests, benchmarks. Nothing else is deleted.
TEST_PREFIX = "mcpq-test"
BENCH_PREFIX = "mcpq-bench"
_PREFIXES = (TEST_PREFIX, BENCH_PREFIX)


def _ctl(*args: str) -> str:
    """``rabbitmqctl <args>``; raises with its output when it fails."""
    done = subprocess.run(
        ["rabbitmqctl", *args], capture_output=True, text=True, timeout=_CTL_TIMEOUT_S, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"rabbitmqctl {' '.join(args)}: {done.stderr.strip() or done.stdout}")
    return done.stdout


@cache
def unavailable() -> str | None:
    """Why RabbitMQ cannot be used here, or ``None`` when it can."""
    try:
        with socket.create_connection((HOST, PORT), timeout=2.0):
            pass
    except OSError as exc:
        return f"RabbitMQ is not reachable on {HOST}:{PORT} ({exc.__class__.__name__})"
    if shutil.which("rabbitmqctl") is None:
        return "rabbitmqctl is not on PATH (it makes each test run's own vhost)"
    try:
        _ctl("-q", "list_vhosts")
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        return f"rabbitmqctl cannot manage the RabbitMQ on {HOST}:{PORT}: {exc}"
    return None


@dataclass(frozen=True)
class Vhost:
    """A vhost of the shared RabbitMQ that this run made (and deletes)."""

    name: str

    @property
    def url(self) -> str:
        """The broker URL of the vhost (``CELERY_BROKER_URL``)."""
        return f"amqp://{USER}:{PASSWORD}@{HOST}:{PORT}/{self.name}"

    def queues(self) -> dict[str, str]:
        """Every queue of the vhost and its type (``classic``, ``quorum``)."""
        out = _ctl("-q", "list_queues", "-p", self.name, "name", "type", "--no-table-headers")
        return dict(line.split("\t")[:2] for line in out.splitlines() if "\t" in line)

    def depths(self) -> dict[str, int]:
        """Every queue of the vhost and the messages ready in it."""
        out = _ctl(
            "-q", "list_queues", "-p", self.name, "name", "messages_ready", "--no-table-headers"
        )
        rows = (line.split("\t")[:2] for line in out.splitlines() if "\t" in line)
        return {name: int(ready) for name, ready in rows}


def create_vhost(prefix: str = TEST_PREFIX) -> Vhost:
    """A new vhost ``<prefix>-<hex>`` that ``guest`` may use fully."""
    assert prefix in _PREFIXES, prefix
    vhost = Vhost(f"{prefix}-{secrets.token_hex(6)}")
    _ctl("add_vhost", vhost.name)
    try:
        _ctl("set_permissions", "-p", vhost.name, USER, ".*", ".*", ".*")
    except BaseException:
        delete_vhost(vhost)
        raise
    return vhost


def delete_vhost(vhost: Vhost) -> None:
    """Delete the vhost (never ``/``: only names this module made)."""
    assert vhost.name.startswith(tuple(f"{p}-" for p in _PREFIXES)), vhost.name
    _ctl("delete_vhost", vhost.name)


def vhost_names() -> set[str]:
    """The names of every vhost on the machine's RabbitMQ."""
    return set(_ctl("-q", "list_vhosts", "--no-table-headers").split())


@contextmanager
def rabbitmq_vhost(prefix: str = TEST_PREFIX) -> Iterator[Vhost]:
    """A vhost of its own for the duration of the block, deleted after."""
    vhost = create_vhost(prefix)
    try:
        yield vhost
    finally:
        delete_vhost(vhost)


def server_pid() -> int | None:
    """The pid of the RabbitMQ node on this machine (its Erlang VM, ``beam.smp``), or ``None``
    where it is not visible (another host, a container)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"beam.smp") and b"rabbit" in argv:
            return int(entry)
    return None
