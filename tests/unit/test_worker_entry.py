"""``mcpq worker`` runs Celery's ``worker`` command through ``workers.main``, without Celery's
umbrella program: the same command and options, without the plugins that program loads (Flower
with tornado, click-repl with prompt_toolkit), which every worker process used to hold."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from workers.main import main
try:
    main(["--help"])
except SystemExit as exc:
    code = exc.code
plugins = ("flower", "tornado", "click_repl", "prompt_toolkit")
loaded = sorted(m for m in plugins if m in sys.modules)
print("exit", code, "loaded", loaded)
"""


def test_the_worker_command_runs_without_celerys_umbrella_program() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    # Celery's own worker command answered (its options, ours among them: --pool custom)
    assert "--pool" in done.stdout and "--concurrency" in done.stdout, done.stdout
    assert done.stdout.strip().endswith("exit 0 loaded []"), done.stdout[-400:]


def test_the_umbrella_program_is_what_loaded_them() -> None:
    # The probe above would pass for a reason other than the entry point if nothing loaded
    # these anyway: through `celery`'s own main they are there.
    probe = (
        "import sys\n"
        "from celery.bin.celery import celery\n"
        "try:\n"
        "    celery.main(['-A', 'workers.celery_app', 'worker', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('click_repl' in sys.modules or 'flower' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip().endswith("True"), (done.stdout[-400:], done.stderr[-400:])
