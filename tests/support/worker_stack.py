"""A running Celery worker's main thread (its consumer's event loop), as Celery's SIGUSR1 handler
prints every thread's stack into the worker's log: for a failure message that says where a
worker is stuck."""

from __future__ import annotations

import os
import signal
import time

from mcpq.ops.harness.children import Child


def main_thread_stack(worker: Child, frames_kept: int = 24) -> str:
    """The innermost ``frames_kept`` lines of the worker's main-thread stack (where its event loop
    is), or ``"(no stack dump)"``."""
    before = len(worker.log())
    os.kill(worker.popen.pid, signal.SIGUSR1)
    time.sleep(1.0)
    dump = worker.log()[before:]
    start = dump.find("MainThread\n")
    if start < 0:
        return "(no stack dump)"
    frames: list[str] = []
    for line in dump[start:].splitlines()[2:]:  # past the thread's name and its underline
        if line.startswith("=") or "in cry_handler" in line:  # its locals, or the dump itself
            break
        frames.append(line)
    return "\n".join(frames[-frames_kept:])
