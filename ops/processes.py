"""Process-group plumbing shared by `mcpq dev`, `RedisProcess` and the test helpers.

Every supervised child is started in a new session (`start_new_session=True`), so it leads its own
process group and everything it forks (gunicorn workers, Celery prefork children) inherits that
group. Stopping a child therefore means signalling its *group*: SIGTERM, a bounded wait, then
SIGKILL. Nothing is ever signalled by name, only by the pid/pgid we started.

NOTE(linux): a pgid cannot be reused while any process (zombies included) still belongs to the
group, so `os.killpg` on a group we started is safe for as long as the group exists.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO, NamedTuple, TypeVar

T = TypeVar("T")

Output = int | IO[bytes] | None
"""What a child's stdout may be: `subprocess.PIPE`, `DEVNULL`, a binary file, or inherit (None)."""


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that was free a moment ago (callers retry if they lose the race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def wait_until(
    predicate: Callable[[], T | None],
    timeout: float = 10.0,
    interval: float = 0.05,
    message: str = "condition",
) -> T:
    """Poll `predicate` until it returns a truthy value, and return that value.

    Raises TimeoutError naming `message` when `timeout` seconds pass first.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {message}")
        time.sleep(interval)


def spawn_in_new_group(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    stdout: Output = None,
    stderr: Output = subprocess.STDOUT,
) -> subprocess.Popen[bytes]:
    """Start `argv` as the leader of a new session and process group (pgid == pid)."""
    return subprocess.Popen(
        list(argv),
        env=None if env is None else dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
    )


def signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to process group `pgid` (0: only check it exists); False when it is gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        # A group we cannot signal is not ours any more (pgid reused): treat it as gone.
        return False
    return True


def group_alive(process: subprocess.Popen[bytes]) -> bool:
    """True while the leader or any other member of `process`'s group still exists.

    Reaps the leader first (`poll()`), so a zombie leader does not count as alive.
    """
    if process.poll() is None:
        return True
    return _group_has_members(process.pid)


def stop_groups(
    processes: Iterable[subprocess.Popen[bytes]],
    timeout: float = 10.0,
    hurry: Callable[[], bool] = lambda: False,
) -> None:
    """SIGTERM every process group, wait up to `timeout` s for all of them, then SIGKILL the rest.

    `hurry` is polled while waiting; when it returns True the wait is cut short (a second Ctrl-C).
    """
    pending = list(processes)
    for process in pending:
        signal_group(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline and not hurry():
        pending = [process for process in pending if group_alive(process)]
        time.sleep(0.05)
    for process in pending:
        signal_group(process.pid, signal.SIGKILL)
    for process in pending:
        _reap(process, timeout=5.0)


def _group_has_members(pgid: int) -> bool:
    """Whether a non-zombie process still has `pgid` (the leader itself is already reaped)."""
    if not signal_group(pgid, 0):
        return False
    return any(stat.pgid == pgid and stat.state != "Z" for stat in all_proc_stats())


def _reap(process: subprocess.Popen[bytes], timeout: float) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=timeout)
    deadline = time.monotonic() + timeout
    while _group_has_members(process.pid) and time.monotonic() < deadline:
        time.sleep(0.05)


class ProcStat(NamedTuple):
    """The few fields of `/proc/<pid>/stat` the launchers need."""

    pid: int
    state: str
    """One letter: R, S, D, Z (zombie), T, ..."""
    ppid: int
    pgid: int


def read_proc_stat(pid: int) -> ProcStat | None:
    """Parse `/proc/<pid>/stat`; None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            raw = handle.read()
    except OSError:
        return None
    # The command name is in parentheses and may itself contain spaces or parentheses.
    fields = raw[raw.rindex(")") + 2 :].split()
    return ProcStat(pid, fields[0], int(fields[1]), int(fields[2]))


def all_proc_stats() -> list[ProcStat]:
    """A snapshot of every process visible in /proc."""
    stats = (read_proc_stat(int(entry)) for entry in os.listdir("/proc") if entry.isdigit())
    return [stat for stat in stats if stat is not None]


def descendant_pids(root: int) -> set[int]:
    """Every live descendant of `root` (children, grandchildren, ...), from one /proc snapshot."""
    children: dict[int, list[int]] = {}
    for stat in all_proc_stats():
        children.setdefault(stat.ppid, []).append(stat.pid)
    found: set[int] = set()
    frontier = [root]
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found


def pid_alive(pid: int) -> bool:
    """True when `pid` exists and is not a zombie."""
    stat = read_proc_stat(pid)
    return stat is not None and stat.state != "Z"
