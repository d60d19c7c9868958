"""When `mcpq dev` is ready, and the short block it prints then.

Ready means *its own* children serve: the web child's process group holds the socket listening on
the port and answers HTTP there (another server on the port, e.g. a second `mcpq dev`, does not
count), and each worker child has sent its first heartbeat to the store.
"""

from __future__ import annotations

import http.client
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mcpq.ops.runtime.processes import descendant_pids, listening_addresses
from mcpq.shared.store import TaskStore


@dataclass(frozen=True)
class DevWorker:
    """A worker child as the launcher started it (node names as Celery expands ``%h``)."""

    child: str  #: the supervisor's name for it (``worker``, ``bulk``)
    node_prefix: str  #: its Celery node name up to and including ``@``
    pool: str
    concurrency: int
    queues: str

    def describe(self) -> str:
        slots = f"{self.concurrency} thread{'s' * (self.concurrency != 1)}"
        if self.pool == "cpu":
            slots = f"{self.concurrency} process{'es' * (self.concurrency != 1)}"
        return f"{self.node_prefix[:-1]} ({self.pool} pool, {slots}, queue {self.queues})"


def web_answers(port: int) -> bool:
    """True once anything answers HTTP on the port (GET /healthz; any status counts)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2.0)
    try:
        conn.request("GET", "/healthz")
        conn.getresponse().read()
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()
    return True


def own_web_answers(web_pid: int, port: int) -> bool:
    """The web child's process group listens on 127.0.0.1:``port`` and it answers there.

    The listener is read from the kernel's socket table; without one (not Linux) an answer on
    the port counts, which the launcher's free-port check before start makes nearly as good."""
    listening = listening_addresses({web_pid, *descendant_pids(web_pid)})
    if listening is not None and ("127.0.0.1", port) not in listening:
        return False
    return web_answers(port)


def heartbeats(store: TaskStore) -> Mapping[str, float]:
    """Worker node name → its last heartbeat (ms); empty while the store does not answer."""
    try:
        return store.stats([]).workers
    except Exception:  # not ready yet (or gone): the caller waits or gives up
        return {}


def unready_workers(workers: Sequence[DevWorker], store: TaskStore) -> list[DevWorker]:
    """The workers that have not sent a heartbeat yet."""
    nodes = list(heartbeats(store))
    return [w for w in workers if not any(n.startswith(w.node_prefix) for n in nodes)]


def ready_block(
    *,
    redis: str,
    tools: Sequence[str],
    modules: str,
    workers: Sequence[DevWorker],
    late: Sequence[DevWorker],
    endpoint: str,
    flower: str | None,
    logs: str | None,
    warnings: Sequence[str] = (),
    served: Mapping[str, Sequence[object]] | None = None,
) -> list[str]:
    """The lines `mcpq dev` prints once it is ready (at most 7, and a warning per tool module
    that declares nothing); with ``late`` workers, once
    it gave up waiting for them: then it does not say ready, and ``; Ctrl-C stops`` (which ends
    the line that does) is left for :func:`ready_later`."""
    shown = ", ".join(tools[:6]) + (f", … ({len(tools)} in all)" if len(tools) > 6 else "")
    lines = [f"redis: {redis}", f"tools from {modules}: {shown or 'none'}{_also(served or {})}"]
    lines += [f"warning: {warning}" for warning in warnings]  # a module that declares nothing
    if workers:
        lines.append("workers: " + "; ".join(w.describe() for w in workers))
    for worker in late:
        lines.append(f"{worker.child} has not reported yet: its tools wait until it does")
    lines.append(f"MCP endpoint: {endpoint}")
    if flower:
        lines.append(f"Flower: {flower}")
    where = f"warnings and errors below, all logs in {logs}" if logs else "all logs below"
    if late:
        lines.append(f"not ready: waiting for {_names(late)} ({where})")
    else:
        lines.append(f"ready ({where}); Ctrl-C stops")
    return lines


def _also(served: Mapping[str, Sequence[object]]) -> str:
    """``; also 1 resource, 2 prompts (mcpq tools lists them)``, or nothing."""
    kinds = (("resources", "resource"), ("templates", "resource template"), ("prompts", "prompt"))
    counts = [(len(served.get(key) or ()), noun) for key, noun in kinds]
    said = [f"{n} {noun}{'' if n == 1 else 's'}" for n, noun in counts if n]
    return f"; also {', '.join(said)} (mcpq tools lists them)" if said else ""


def ready_later(late: Sequence[DevWorker]) -> str:
    """The line `mcpq dev` prints when the workers it gave up waiting for have reported."""
    return f"ready: {_names(late)} reported; Ctrl-C stops"


def _names(workers: Sequence[DevWorker]) -> str:
    return " and ".join(worker.child for worker in workers)
