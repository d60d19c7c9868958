"""`mcpq dev` says ready only when it is, and says at once when it cannot be:

- a ``REDIS_URL`` nothing answers is one line naming ``REDIS_URL`` within 5 s, exit 1, and no
  ``ready`` (before: a minute of silence, then ``ready``, then the workers' broker errors);
- ``ready`` waits for both workers' first heartbeat: a worker late past the launcher's wait is
  named, the block does not say ``ready``, and ``ready`` follows once it has reported.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcpq.ops.dev.state import running_dev
from mcpq.shared.settings import Settings
from mcpq.shared.store import open_store
from tests.integration.test_dev_launcher import _kill_leftovers
from tests.integration.test_dev_quiet import dev_env
from tests.support.host_load import scaled_s
from tests.support.procs import OutputLines, free_port, start_process_group

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def test_an_unreachable_redis_url_is_one_line_within_5_s_and_never_ready(tmp_path: Path) -> None:
    closed = free_port()  # nothing listens there
    (tmp_path / "run").mkdir()
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "mcpq", "dev", "--port", str(free_port())],
        cwd=tmp_path,
        env=dev_env(tmp_path, REDIS_URL=f"redis://127.0.0.1:{closed}/0"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    took = time.monotonic() - started
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert lines == [
        f"mcpq | cannot reach Redis at redis://127.0.0.1:{closed}/0 (REDIS_URL): Connection "
        "refused; start it, or unset REDIS_URL and mcpq dev starts one of its own"
    ], lines
    assert done.returncode == 1
    bound = scaled_s(5)  # 5 s on an idle host (tests.support.host_load)
    assert took < bound, f"{took:.1f} s (bound {bound:.1f} s)"


# The bulk worker (its command line names the queue `bulk`) reports only after 30 s.
LATE_BULK = '''
import sys
import time

from mcpq import ToolContext, tool

if "bulk" in sys.argv:
    time.sleep(30)


@tool(task="required")
def nap(ctx: ToolContext) -> str:
    """Does nothing."""
    return "rested"
'''

# `mcpq dev`, waiting 12 s (not a minute) for its children before it names the late ones.
SHORT_WAIT = (
    "import sys; import mcpq.ops.dev.launcher as launcher; launcher.READY_TIMEOUT_S = 12; "
    "from mcpq.ops.cli.main import main; sys.exit(main(sys.argv[1:]))"
)


def reported(env: dict[str, str]) -> set[str]:
    """The node-name prefixes (``mcpq-bulk@``) of the workers with a heartbeat in the store of
    the running `mcpq dev`."""
    dev = running_dev(env)
    assert dev is not None and dev.redis_url is not None
    store = open_store(Settings.from_env({"REDIS_URL": dev.redis_url}))
    try:
        return {node.partition("@")[0] + "@" for node in store.stats([]).workers}
    finally:
        store.close()


def test_ready_waits_for_both_workers_and_names_a_late_one(tmp_path: Path) -> None:
    (tmp_path / "latebulk.py").write_text(LATE_BULK)
    (tmp_path / "run").mkdir()
    env = dev_env(tmp_path, MCPQ_TOOLS="latebulk")
    launcher = start_process_group(
        [sys.executable, "-c", SHORT_WAIT, "dev", "--port", str(free_port())],
        env=env,
        cwd=str(tmp_path),
    )
    output = OutputLines(launcher)
    try:
        # Given a bulk worker that has not reported when the launcher stops waiting
        output.wait_for("not ready: waiting for bulk", timeout=60)
        assert reported(env) == {"mcpq-mcpq@"}, "the bulk worker reported already"
        block = [line.rstrip() for line in output.lines]
        # Then the block names it, and does not say ready
        assert "mcpq | bulk has not reported yet: its tools wait until it does" in block, block
        assert not any("ready (" in line or "Ctrl-C stops" in line for line in block), block

        # When it reports, then `ready` follows, and only now
        line = output.wait_for("mcpq | ready", timeout=60)
        assert line.rstrip() == "mcpq | ready: bulk reported; Ctrl-C stops", line
        assert reported(env) == {"mcpq-mcpq@", "mcpq-bulk@"}
    finally:
        _kill_leftovers(launcher, set())
