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
from pathlib import Path
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


def listening(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on `host`:`port` now."""
    with contextlib.suppress(OSError), socket.create_connection((host, port), 0.5):
        return True
    return False


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
    death_signal: signal.Signals | None = None,
) -> subprocess.Popen[bytes]:
    """Start `argv` as the leader of a new session and process group (pgid == pid).

    ``death_signal``: the kernel sends it to the child when this process dies, even by SIGKILL
    (``ops.runtime.parent_death``; Linux only). A child in a session of its own gets no SIGHUP from
    a dying terminal or launcher, so without this it outlives a killed `mcpq dev`.
    """
    if death_signal is not None:
        from mcpq.ops.runtime.parent_death import guarded

        argv = guarded(argv, death_signal)
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
    await_groups(pending, timeout, hurry)


def await_groups(
    processes: Iterable[subprocess.Popen[bytes]],
    timeout: float = 10.0,
    hurry: Callable[[], bool] = lambda: False,
) -> None:
    """Wait up to `timeout` s for process groups already told to stop, then SIGKILL the rest
    (a caller that stops several together signals all first, then awaits each in turn)."""
    pending = list(processes)
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


LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's `st` column


def _proc_net_address(hexaddr: str) -> str:
    """An address of /proc/net/tcp{,6}: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(hexaddr)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    return socket.inet_ntop(family, words)


def socket_inodes(pid: int) -> set[str]:
    """The inodes of the sockets process ``pid`` holds (empty when it is gone)."""
    inodes: set[str] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def listening_addresses(pids: Iterable[int]) -> set[tuple[str, int]] | None:
    """The (address, port) pairs the processes ``pids`` listen on, from the kernel's socket
    table; ``None`` where there is no such table (not Linux)."""
    tables = [Path("/proc/net/tcp"), Path("/proc/net/tcp6")]
    if not tables[0].exists():
        return None
    inodes = set().union(*(socket_inodes(pid) for pid in pids))
    found = set()
    for table in tables:
        try:
            lines = table.read_text().splitlines()[1:]
        except OSError:
            continue  # no IPv6
        for line in lines:
            cols = line.split()
            local, state, inode = cols[1], cols[3], cols[9]
            if state == LISTEN and inode in inodes:
                hexaddr, hexport = local.split(":")
                found.add((_proc_net_address(hexaddr), int(hexport, 16)))
    return found
