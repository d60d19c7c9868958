"""A bare Celery worker, the floor under mcpq's: ``python -m mcpq.ops.bench.capacity``'s bare phase.

A minimal Celery app with one no-op task (``bare.noop``, no argument, returns ``None``), set up as
mcpq's worker is where it changes the work per message: JSON only (``task_serializer``,
``accept_content``), ``task_acks_late``, ``task_ignore_result`` and no result backend,
``worker_prefetch_multiplier`` 1 (one message reserved per pool slot: mcpq's,
``mcpq.shared.celery_config``), task events off (Celery's default, and mcpq's unless Flower asks),
logging at WARNING (the capacity benchmark runs mcpq's workers at ``MCPQ_LOG_LEVEL=WARNING``).
Gossip, mingle and the worker heartbeat are Celery's defaults, as in ``mcpq worker``.

Its pools are those mcpq's pool kinds stand for (``mcpq.ops.runtime.commands.CELERY_POOLS``):

- ``io``: Celery's ``threads`` pool with mcpq's io concurrency (``MCPQ_IO_CONCURRENCY``, 100):
  mcpq's io pool (``mcpq.workers.io_pool``) is a pool of threads of its own, run on the same
  worker;
- ``cpu``: ``prefork`` with mcpq's cpu concurrency (``MCPQ_WORKER_CONCURRENCY``, 4).

**The broker.** A Redis URL (``redis://``, the capacity benchmark's private redis-server, the
same one mcpq's phase uses, on a queue of its own: ``bare``), through **kombu's standard Redis
transport**. mcpq's workers, where the broker is the task store's Redis (the default and this
benchmark's case), use a transport of their own (``mcpq.workers.redis_transport``): kombu's, less
its Redis-side ack emulation. The standard transport writes every message it takes to the
``unacked`` hash and its index (``MULTI ZADD HSET EXEC``) and deletes it on ack (``MULTI ZREM
HDEL EXEC``), and scans that index for messages to restore now and then: about eight commands
in two round trips per message that mcpq's workers do not send (mcpq's run makes its own round
trips instead: its claim and finish scripts). The bare worker has the standard transport's
costs, as any plain Celery app on Redis would.

**Counting completions** costs the bare worker nothing: a message leaves the queue's list when a
worker takes it and the ``unacked`` hash when it is acked (after its run: ``acks_late``), so
``sent - LLEN(queue) - HLEN(unacked)`` runs were done (:func:`completed`; a message between the
two for a moment counts as done early, one at most).

It runs as a real ``celery worker`` process, Celery's own ``worker`` command run without its
umbrella program, as ``mcpq worker`` runs it (``mcpq.workers.main``): :func:`worker_command`.
The file is run by path with ``python -P`` (not ``-m``): importing ``mcpq`` would load mcpq's
public API (pydantic and the rest) into the bare worker; this module imports only Celery and
the standard library. The app reads its broker URL from ``BARE_CELERY_BROKER``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from celery import Celery

QUEUE = "bare"
TASK = "bare.noop"
BROKER_ENV = "BARE_CELERY_BROKER"
#: kombu's Redis transport: the hash of the messages taken and not acked yet (its default name).
UNACKED = "unacked"
#: Celery's pool for each of mcpq's pool kinds.
POOLS = {"io": "threads", "cpu": "prefork"}


def make_app(broker_url: str) -> Celery:
    """The bare app on ``broker_url`` (the producer's and the worker's alike)."""
    app = Celery("bare", broker=broker_url, set_as_current=False)
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        event_serializer="json",
        accept_content=["json"],
        result_backend=None,
        task_ignore_result=True,
        task_acks_late=True,
        worker_prefetch_multiplier=1,
        worker_send_task_events=False,
        task_default_queue=QUEUE,
        broker_connection_retry_on_startup=True,
    )

    @app.task(name=TASK, shared=False)
    def noop() -> None:
        return None

    return app


def worker_command(pool_kind: str, concurrency: int, node: str) -> list[str]:
    """The bare worker of mcpq's pool kind ``pool_kind`` as a command line (the broker comes
    from ``BARE_CELERY_BROKER`` in its environment)."""
    return [
        sys.executable, "-P", str(Path(__file__).resolve()), "--quiet",
        "--pool", POOLS[pool_kind], "-c", str(concurrency), "-Q", QUEUE,
        "--loglevel", "WARNING", "-n", f"{node}@%h",
    ]  # fmt: skip


def send(app: Celery, count: int = 1) -> None:
    """``count`` no-op messages, as ``send_task`` sends them."""
    for _ in range(count):
        app.send_task(TASK, queue=QUEUE)


def completed(client: Any, sent: int) -> int:
    """Runs done of the ``sent`` messages of this queue, read from the broker's Redis (a
    redis-py client): those neither waiting nor taken and not acked."""
    pipe = client.pipeline(transaction=False)
    pipe.llen(QUEUE)
    pipe.hlen(UNACKED)
    waiting, taken = pipe.execute()
    return sent - int(waiting) - int(taken)


def main(argv: Sequence[str] | None = None) -> None:
    """``celery worker`` of the bare app (as ``mcpq.workers.main`` runs mcpq's)."""
    args = list(sys.argv[1:] if argv is None else argv)
    quiet = bool(args) and args[0] in {"--quiet", "-q"}
    if quiet:
        args = args[1:]
    from celery.bin.base import CLIContext
    from celery.bin.worker import worker

    app = make_app(os.environ[BROKER_ENV])
    context = CLIContext(app=app, no_color=True, workdir=None, quiet=quiet)
    worker.main(
        args=args, prog_name="celery worker", obj=context, auto_envvar_prefix="CELERY_WORKER"
    )


if __name__ == "__main__":
    main()
