"""Process groups as `mcpq dev` uses them: whatever a child forked is stopped with it, even when
it ignores SIGTERM or outlives its parent. Only `sh` and `sleep` children; no servers.
"""

from __future__ import annotations

import io
import signal
import subprocess

import pytest

from mcpq.ops.dev.supervisor import Supervisor
from mcpq.ops.runtime.processes import descendant_pids, group_alive, stop_groups, wait_until
from tests.support.procs import pid_alive, start_process_group


def start_sh(script: str) -> subprocess.Popen[bytes]:
    return start_process_group(["sh", "-c", script], capture=False)


def wait_for_children(process: subprocess.Popen[bytes], count: int) -> set[int]:
    def enough() -> set[int] | None:
        pids = descendant_pids(process.pid)
        return pids if len(pids) >= count else None

    return wait_until(enough, timeout=5, message=f"{count} children of {process.pid}")


def test_a_group_that_ignores_sigterm_is_killed_after_the_timeout() -> None:
    # Given a leader and two grandchildren that all ignore SIGTERM
    leader = start_sh('trap "" TERM; sleep 60 & sleep 60 & wait')
    children = wait_for_children(leader, 2)

    # When the group is stopped with a short grace period
    stop_groups([leader], timeout=0.3)

    # Then nothing of it is left
    assert leader.returncode == -signal.SIGKILL
    assert not any(pid_alive(pid) for pid in children)
    assert not group_alive(leader)


def test_orphans_of_a_dead_leader_are_still_stopped_through_their_group() -> None:
    # Given a group whose leader was SIGKILLed, leaving its children behind
    leader = start_sh("sleep 60 & sleep 60 & wait")
    children = wait_for_children(leader, 2)
    leader.kill()
    leader.wait(timeout=5)
    assert group_alive(leader), "the orphans keep the group alive"

    # When the group is stopped, then the orphans are gone too
    stop_groups([leader], timeout=2)
    assert not any(pid_alive(pid) for pid in children)
    assert not group_alive(leader)


def test_supervisor_prefixes_each_line_and_notices_an_exit() -> None:
    out = io.StringIO()
    supervisor = Supervisor(out)
    child = supervisor.spawn("job", ["sh", "-c", "echo hello; echo oops >&2; exit 3"], env={})
    wait_until(supervisor.first_exited, timeout=5, message="the child to exit")
    supervisor.stop(supervisor.children)
    assert child.exit_code == 3
    assert "job | hello\n" in out.getvalue()
    assert "job | oops\n" in out.getvalue()


def test_wait_until_returns_the_truthy_value_or_names_what_it_waited_for() -> None:
    assert wait_until(lambda: "done", timeout=0.1) == "done"
    with pytest.raises(TimeoutError, match="the moon"):
        wait_until(lambda: None, timeout=0.05, interval=0.01, message="the moon")
