"""The child processes one stack owns, together: named, logged, stopped, crashed, reaped and
accounted for.

Each child (`ops.harness.children.Child`) leads its own process group and writes its output to a log
file named after it in the owner's directory (a second child of a name gets ``<name>-2.log``).
It is stopped by signalling its group (SIGTERM, then SIGKILL), never by name; a child stopped,
crashed or reaped stays listed in ``stopped``, so that every process it was seen to fork is
checked again at the end (`ChildProcesses._left_behind`). The prometheus-client directories of
``mcpq web|worker`` children are noted while they run and removed at the end
(`mcpq.ops.harness.metric_dirs`).

`mcpq.ops.harness.stack.Stack` builds on this: what each child runs is the stack's business, not
this module's.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from mcpq.ops.harness.children import Child
from mcpq.ops.harness.metric_dirs import MetricDirs
from mcpq.ops.runtime.processes import signal_group, stop_groups, wait_until

START_TIMEOUT_S = 45.0
STOP_TIMEOUT_S = 10.0


class ChildProcesses:
    """The running children by kind (``webs`` with their ``web_urls``, ``workers``, ``extras``)
    and the ``stopped`` ones, in the directory ``workdir`` that holds their logs."""

    def __init__(self, name: str, workdir: Path) -> None:
        self.name = name
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.webs: list[Child] = []
        self.web_urls: list[str] = []
        self.workers: list[Child] = []
        self.extras: list[Child] = []
        self.stopped: list[Child] = []
        self._metric_dirs = MetricDirs()
        self._names: Counter[str] = Counter()
        self._numbers: Counter[str] = Counter()

    # -- starting -------------------------------------------------------------------------------
    def _spawn(self, name: str, argv: Sequence[str], env: Mapping[str, str]) -> Child:
        self._names[name] += 1
        if self._names[name] > 1:  # a second child of that name: a log file of its own
            name = f"{name}-{self._names[name]}"
        return Child(f"{self.name}/{name}", argv, env, self.workdir / f"{name}.log")

    def _numbered(self, kind: str) -> str:
        """``web0``, ``web1``...: one name per child of that kind ever started."""
        self._numbers[kind] += 1
        return f"{kind}{self._numbers[kind] - 1}"

    def _ready(self, child: Child, probe: Callable[[], object], what: str) -> Child:
        child.wait_for(probe, f"{what} of {child.name}", START_TIMEOUT_S, interval=0.05)
        child.remember_descendants()
        self._metric_dirs.note(child.popen.pid)
        return child

    def dead(self) -> list[str]:
        """Names of the running children that exited by themselves (none should)."""
        return [c.name for c in self.webs + self.workers + self.extras if not c.alive]

    # -- stopping and crashing ------------------------------------------------------------------
    def _stop(self, children: list[Child]) -> None:
        self.remember_metric_dirs()
        for child in children:
            child.remember_descendants()
        stop_groups([c.popen for c in children], timeout=STOP_TIMEOUT_S)
        self.stopped.extend(children)

    def _stop_running(self) -> None:
        """Stop every running child; none is listed as running afterwards."""
        self._stop(self.webs + self.workers + self.extras)
        self.webs, self.web_urls, self.workers, self.extras = [], [], [], []

    def stop_child(self, child: Child) -> None:
        """Stop one child's process group now (its leftovers are still checked at close)."""
        self._stop([child])
        if child in self.webs:
            self.web_urls.pop(self.webs.index(child))
            self.webs.remove(child)
        for group in (self.workers, self.extras):
            if child in group:
                group.remove(child)

    def kill_group(self, child: Child, sig: int = signal.SIGKILL) -> float:
        """Signal every process of ``child``'s group at once (main process and pool children);
        returns the ``time.monotonic()`` of the signal. The child stays listed until `reap` or
        `stop_child` takes it out."""
        child.remember_descendants()
        at = time.monotonic()
        assert signal_group(child.pgid, sig), f"{child.name} is already gone"
        return at

    def kill_child(self, child: Child) -> float:
        """SIGKILL the child's whole group (a crash), then reap it; returns when it was killed."""
        at = self.kill_group(child)
        self.stop_child(child)
        return at

    def reap(self, child: Child, timeout: float = 30.0) -> None:
        """Wait until the group of ``child`` has exited by itself, then file it as stopped."""
        wait_until(
            lambda: not child.leftovers(),
            timeout=timeout,
            interval=0.05,
            message=f"{child.name} to exit",
        )
        self.stop_child(child)

    def _left_behind(self) -> dict[str, list[int]]:
        """Once every child is stopped: remove their metric directories; return the pids still
        alive by child name (every process a child was seen to fork), which should be none."""
        self._metric_dirs.remove()
        return {c.name: pids for c in self.stopped if (pids := c.leftovers())}

    # -- logs -----------------------------------------------------------------------------------
    def tails(self, lines: int = 40) -> str:
        parts = []
        for child in self.webs + self.workers + self.extras + self.stopped:
            parts.append(f"----- {child.name} ({child.log_path}) -----\n{child.tail(lines)}")
        return "\n".join(parts)

    def all_logs(self) -> dict[str, str]:
        """Every log file of the stack (web, workers, Flower, redis...), by file name."""
        return {
            path.name: path.read_text(encoding="utf-8", errors="replace")
            for path in sorted(self.workdir.glob("*.log"))
        }

    # -- prometheus-client directories ----------------------------------------------------------
    def remember_metric_dirs(self) -> None:
        """Note the ``PROMETHEUS_MULTIPROC_DIR`` of each running child: `_left_behind` removes
        those that ``mcpq web|worker`` made in the temporary directory (they never remove
        them)."""
        for child in self.webs + self.workers + self.extras:
            self._metric_dirs.note(child.popen.pid)
