"""One child process of a stack (`ops.harness.stack`): the leader of its own process group, its
output in a log file, and the waits and log reads that tests and benchmarks make on it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from mcpq.ops.runtime.processes import (
    descendant_pids,
    group_alive,
    read_proc_stat,
    spawn_in_new_group,
    wait_until,
)

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


class StackError(RuntimeError):
    """A process of the stack failed to start or died."""


class Child:
    """One child process: the leader of its own process group, output in a log file."""

    def __init__(self, name: str, argv: Sequence[str], env: Mapping[str, str], log: Path) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log
        with open(log, "wb") as out:  # the child keeps its own copy of the descriptor
            self.popen = spawn_in_new_group(self.argv, env=env, cwd=str(REPO), stdout=out)
        self.pgid = self.popen.pid
        self.pids: set[int] = {self.popen.pid}

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def remember_descendants(self) -> None:
        """Record every process the child forked so far (checked again after it stopped)."""
        self.pids |= descendant_pids(self.popen.pid)

    def leftovers(self) -> list[int]:
        """Processes of this child's group still alive (zombies aside)."""
        left = set()
        for pid in self.pids:
            stat = read_proc_stat(pid)
            if stat is not None and stat.state != "Z" and stat.pgid == self.pgid:
                left.add(pid)
        if group_alive(self.popen):
            left.add(self.pgid)
        return sorted(left)

    def wait_for(
        self, probe: Callable[[], T | None], what: str, timeout: float, interval: float = 0.05
    ) -> T:
        """Poll ``probe`` until it returns a truthy value; `StackError` as soon as the child
        exits, `TimeoutError` (with the log's tail) when ``timeout`` passes first."""

        def check() -> T | None:
            if not self.alive:
                raise StackError(f"{self.name} exited ({self.popen.returncode}):\n{self.tail()}")
            return probe()

        try:
            return wait_until(check, timeout=timeout, interval=interval, message=what)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; log tail of {self.name}:\n{self.tail()}") from None

    def wait_for_log(self, needle: str, timeout: float = 10.0) -> str:
        """The first log line containing ``needle``."""
        return self.wait_for(
            lambda: next((ln for ln in self.log().splitlines() if needle in ln), None),
            f"{needle!r} in {self.name}",
            timeout,
        )

    def run_endings(self, ref: str) -> list[str]:
        """How each run of task ``ref`` in this worker ended so far (``completed``, ``parked``,
        ``cancelled``, ``busy``, ``terminal``...), from its ``run ended`` log lines."""
        found = []
        for line in self.log().splitlines():
            if "run ended" not in line or ref[:12] not in line:
                continue
            if line.startswith("{"):
                found.append(str(json.loads(line).get("transition")))
            elif match := re.search(r"transition=(\S+)", line):
                found.append(match.group(1))
        return found

    def wait_for_run_end(self, ref: str, timeout: float = 10.0, after: int = 0) -> str:
        """How the ``after``-th next run of task ``ref`` ended."""
        runs = wait_until(
            lambda: (found := self.run_endings(ref))[after:] and found,
            timeout=timeout,
            message=f"run {after + 1} of {ref[:12]} to end in {self.name}",
        )
        return runs[after]
