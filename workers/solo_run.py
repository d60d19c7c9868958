"""The child side of a run of its own (``workers.solo``): ``python -m mcpq.workers.solo_run TOOL REF
QUEUE REQUEST_ID`` runs one run of the task, alone in this process, and exits.

Its lease keeper says the run has peers (``min_peers=1``): this process is in its worker's
process group, and a stop of the whole group says nothing about the tool. Its parent tells the
store when this process died alone (``lost_alone``).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from mcpq.shared import logs
from mcpq.shared.jobs import Run
from mcpq.shared.registry import Registry
from mcpq.shared.settings import Settings
from mcpq.workers.celery_app import build_run_deps
from mcpq.workers.runner import RunControl, run_task


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    # SystemExit in the tool's thread (the main one): the runner hands the run back on its way out.
    raise SystemExit(0)


def main(argv: Sequence[str] | None = None) -> int:
    """One run, in this process alone; exits 0 however the run ended (the store has that)."""
    tool, ref, queue, request_id = list(sys.argv[1:] if argv is None else argv)
    settings = Settings.from_env()
    logs.configure(settings.log_format, settings.log_level)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    deps = build_run_deps(settings, Registry.from_modules(settings.tools), min_peers=1)
    control = RunControl(terminate=lambda: os._exit(70), on_state=lambda state: None)
    # A run of its own is its own job: nothing else will run in this process.
    run_task(deps, Run(tool, ref, queue, request_id=request_id), control, alone=True)
    deps.leases.hand_back_all()  # nothing is held after the run; stops nothing
    return 0


if __name__ == "__main__":
    sys.exit(main())
