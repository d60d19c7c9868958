"""``mcpq worker`` runs Celery's ``worker`` command through ``mcpq.workers.main``, without Celery's
umbrella program: the same command and options, without the plugins that program loads (Flower
with tornado, click-repl with prompt_toolkit), which every worker process used to hold. The app
it runs comes from the workers' composition root, ``mcpq.workers.celery_app.create_worker_app``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from celery import Celery

from mcpq.shared.registry import Registry
from mcpq.workers.broker_watch import Configured
from mcpq.workers.celery_app import create_worker_app
from mcpq.workers.io_pool import HandsBackRuns
from tests.unit.fakes import SETTINGS, registry

PROBE = """
import sys
from mcpq.workers.main import main
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
        "    celery.main(['-A', 'mcpq.workers.entry', 'worker', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('click_repl' in sys.modules or 'flower' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip().endswith("True"), (done.stdout[-400:], done.stderr[-400:])


# The composition root (workers.celery_app): importing it builds nothing; the factory builds the
# app, one Celery task per tool; mcpq.workers.entry builds it from the environment for `celery -A`.

NOTHING_BUILT = """
import celery._state
import mcpq.workers.celery_app
import mcpq.workers.io_pool, mcpq.workers.broker_watch, mcpq.workers.main
print("apps", len(celery._state._apps), "tools", "mcpq.demo" in sys.modules)
"""


def _probe(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MCPQ_")}
    return subprocess.run(
        [sys.executable, "-c", "import sys\n" + code],
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_importing_the_worker_modules_builds_nothing() -> None:
    # Tool modules that cannot load: only building the app would notice.
    done = _probe(NOTHING_BUILT, MCPQ_TOOLS="no_such_tool_module")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("apps 0 tools False"), done.stdout


#: The tasks of the app ``mcpq.workers.entry`` built (Celery's own are named ``celery.*``).
BUILT = """
import mcpq.workers.entry
print(sorted(name for name in mcpq.workers.entry.app.tasks if not name.startswith("celery.")))
"""


def test_the_entry_module_builds_the_app_from_the_environment() -> None:
    done = _probe(BUILT, MCPQ_TOOLS="mcpq.demo", MCPQ_DATA_KEYS="plaintext")
    assert done.returncode == 0, done.stderr[-2000:]
    demo = sorted(Registry.from_modules(["mcpq.demo"]).tools)
    assert done.stdout.strip() == str(demo), done.stdout
    failed = _probe(BUILT, MCPQ_TOOLS="no_such_tool_module")
    assert failed.returncode != 0 and "no_such_tool_module" in failed.stderr


def test_the_factory_registers_one_celery_task_per_tool_named_after_it() -> None:
    app = create_worker_app(SETTINGS, registry)
    ours = {name: task for name, task in app.tasks.items() if not name.startswith("celery.")}
    assert sorted(ours) == sorted(registry.tools)
    for task in ours.values():
        assert (task.acks_late, task.ignore_result) == (True, True)
    assert app.conf.worker_consumer == "mcpq.workers.broker_watch:BoundedConsumer"
    # Another app of the same process gets none of them (not Celery's shared tasks).
    other = create_worker_app(SETTINGS, Registry())
    assert [name for name in other.tasks if not name.startswith("celery.")] == []


def test_the_pool_and_the_consumer_find_what_they_need_on_the_app() -> None:
    app = create_worker_app(SETTINGS, registry)
    assert isinstance(app, HandsBackRuns) and isinstance(app, Configured)
    assert app.settings is SETTINGS
    assert not isinstance(Celery("plain"), HandsBackRuns)


def test_run_dependencies_are_built_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    app = create_worker_app(SETTINGS, registry)
    app.hand_back_runs()  # nothing built yet: nothing to hand back
    first = app.run_deps()
    assert app.run_deps() is first and first.registry is registry
    monkeypatch.setattr(os, "getpid", lambda: -1)  # as in a child forked after the first run
    assert app.run_deps() is not first
