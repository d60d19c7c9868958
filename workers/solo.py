"""A run of its own: how an io pool runs a task that must run alone.

Poison protection (``MCPQ_MAX_RUNS``) counts a lapsed lease against a task's tool only when the
run was alone in its process (``judge_loss`` in ``shared/store/lua/_prelude.lua``): an io pool
process holds many runs, and when it dies (killed from outside, its host lost, or one tool among
them calling ``os._exit``) nothing says which run, if any, was the cause. Such a loss is not
counted; at a task's second one it is marked ``solo``, and its next run is alone: ``claim``
answers ``SOLO`` to an io pool, whose job then runs the task here, in a child process holding
nothing else (a prefork pool process is alone already; ``MCPQ_SOLO_CONCURRENCY`` at once), and
waits for it.

The child is in its worker's process group, so whatever stops the worker (a platform's stop, a
group kill) stops it too; its renewals therefore say it has peers, and such a loss is again not
counted. Only when the child dies while its parent lives on (its tool took its own process
down) does the parent tell the store (``lost_alone``), and that lapse counts.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
from collections.abc import Callable

from mcpq.shared.jobs import Run
from mcpq.shared.logs import task_hash

log = logging.getLogger("mcpq.worker")

_children: set[subprocess.Popen[bytes]] = set()
_children_lock = threading.Lock()
#: ``MCPQ_SOLO_CONCURRENCY`` children at once per process (a host that died may leave many
#: tasks to run alone; each child is a Python process). More wait here, on their job's thread.
_slots: threading.BoundedSemaphore | None = None


def run_alone(lost_alone: Callable[[str], object], run: Run, concurrency: int) -> int:
    """Run ``run`` in a child process of its own and wait for it; returns its exit status.
    ``lost_alone``: the store's (called when the child died abnormally)."""
    global _slots
    with _children_lock:
        if _slots is None:
            _slots = threading.BoundedSemaphore(concurrency)
        slots = _slots
    with slots:
        code = _run_child(run)
    if code != 0:
        # The child died (a signal, os._exit) and this process did not: the loss was its own.
        log.warning(
            "a run of its own ended abnormally (exit status %s)",
            code,
            extra={"task": task_hash(run.ref), "tool": run.tool},
        )
        try:
            lost_alone(run.ref)
        except Exception:  # the store is down: the lapse is then excused, and judged again
            log.warning("could not record the run's loss", exc_info=True)
    return code


def _run_child(run: Run) -> int:
    argv = [
        sys.executable,
        "-m",
        "mcpq.workers.solo_run",
        run.tool,
        run.ref,
        run.queue,
        run.request_id,
    ]
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    with _children_lock:
        _children.add(child)
    try:
        return child.wait()
    finally:
        with _children_lock:
            _children.discard(child)


def stop_children() -> int:
    """The worker stops: each run of its own hands its run back (SIGTERM, as Heroku sends)."""
    with _children_lock:
        children = list(_children)
    for child in children:
        child.send_signal(signal.SIGTERM)
    return len(children)
