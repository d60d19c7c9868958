"""Run a command that dies with the process that started it, even when that one is SIGKILLed.

`mcpq dev` starts each child in a session of its own (so stopping a child's process group reaches
everything it forked), and a child in another session gets no SIGHUP when its launcher or terminal
goes away: a killed launcher used to leave its Celery workers retrying a Redis that was gone.

Linux's ``PR_SET_PDEATHSIG`` asks the kernel to signal a process when its parent dies. It must be
set in the child, between fork and exec, and it survives ``execve`` (except of set-uid programs),
so :func:`guarded` runs the command through this module: set the signal, check the parent is still
the launcher (it may have died before the signal was armed), then *exec* the command, which keeps
this pid. Setting it in a ``preexec_fn`` instead would run Python in a child forked from a
launcher with relay threads, which the subprocess documentation warns can deadlock.

The launcher picks the signal per child: SIGTERM stops gunicorn gracefully and Redis at once,
and an mcpq worker (``REMAP_SIGTERM=SIGQUIT``) cold-shuts down, handing its runs back. But when
the Redis that dies with the launcher is the workers' broker, that hand-back cannot happen and the
cold shutdown waits on the broker for good: those workers get SIGKILL (their prefork children
follow: Celery arms the same signal in each).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Sequence

_PR_SET_PDEATHSIG = 1


def guarded(argv: Sequence[str], sig: signal.Signals = signal.SIGTERM) -> list[str]:
    """``argv`` run so that it gets ``sig`` when this process dies (unchanged off Linux)."""
    if not sys.platform.startswith("linux"):
        return list(argv)
    return [
        sys.executable,
        "-m",
        "mcpq.ops.runtime.parent_death",
        str(os.getpid()),
        str(int(sig)),
        *argv,
    ]


def main(args: Sequence[str]) -> int:
    parent, sig, argv = int(args[0]), int(args[1]), list(args[2:])
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        print(f"mcpq: cannot arm the parent-death signal: {os.strerror(errno)}", file=sys.stderr)
        return 1
    if os.getppid() != parent:
        return 1  # the launcher died before the signal was armed: nothing to run for
    os.execvp(argv[0], argv)  # noqa: S606  # the launcher's own command line, not user input
    return 1  # not reached: execvp replaces this process or raises


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
