"""Helpers of the fault layer: its knobs and tools, and a task watcher.

Fault stacks are :class:`tests.support.stacks.LiveStack` (``ops.harness.stack.Stack``: own
redis-server on a free loopback port, web and Celery worker process groups, leftovers asserted on
close), built by the ``make_stack`` fixture with :data:`FAULT_TOOLS`, :data:`FAULT_KNOBS` and, when
a test stops and restarts Redis, AOF (``appendonly yes``, ``appendfsync everysec``) in a data dir
under the test's ``tmp_path``.

``TaskWatch`` polls ``tasks/get`` for many tasks and remembers every status and every
``inputRequests`` key each task ever showed, so "the client was asked exactly once" is checked on
what the client saw, not on server internals.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from mcpq.ops.harness.mcp_client import McpClient
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.settings import DEFAULT_TOOLS
from mcpq.shared.store import TERMINAL, Keys
from tests.support.stacks import FAST_KNOBS

FAULT_TOOLS = f"{DEFAULT_TOOLS},tests.faults.tools_faults"

# The e2e knobs (3 s lease and input hold, 1 s sweeps), and a 2 s bound for a persisted task that
# was never enqueued (the production default is 30 s).
FAULT_KNOBS = {**FAST_KNOBS, "MCPQ_UNCLAIMED_AFTER_S": "2"}

KEYS = Keys()
GAUGES = ("state:working", "state:input_required", "parked", "inputs")
ACCEPT = {"action": "accept", "content": {"ok": True}}


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def open_gauges(stack: Stack) -> dict[str, int]:
    """The stats gauges of non-terminal tasks (all zero once every task has ended), read raw:
    ``StatsSnapshot`` shows a gauge that drifted below zero as 0, and that would be a bug here."""
    with stack.redis_client() as client:
        stats = client.hgetall(KEYS.stats)
    return {name: int(stats.get(name, 0)) for name in GAUGES}


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[int(q) - 1]


MakeStack = Callable[..., Stack]
"""The ``make_stack`` fixture: ``make_stack(webs=1, workers=2, env={...}, aof=False)``."""


class TaskWatch:
    """Polls ``tasks/get`` for a set of tasks; records statuses and every input key seen."""

    def __init__(self, client: McpClient) -> None:
        self.client = client
        self.last: dict[str, dict[str, Any]] = {}
        self.keys: dict[str, set[str]] = {}
        self.key_log: dict[str, list[tuple[float, frozenset[str]]]] = {}

    def add(self, task_ids: Iterable[str]) -> None:
        for task_id in task_ids:
            self.keys.setdefault(task_id, set())
            self.key_log.setdefault(task_id, [])

    def poll(self, task_ids: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
        for task_id in list(self.keys if task_ids is None else task_ids):
            task = self.client.task(task_id)
            self.last[task_id] = task
            requests = task.get("inputRequests") or {}
            if requests:
                seen = frozenset(requests)
                self.keys[task_id] |= seen
                self.key_log[task_id].append((time.monotonic(), seen))
        return self.last

    def statuses(self) -> dict[str, str]:
        return {task_id: task["status"] for task_id, task in self.last.items()}

    def count(self, *statuses: str) -> int:
        return sum(1 for s in self.statuses().values() if s in statuses)

    def open_tasks(self) -> list[str]:
        return [t for t in self.keys if self.last.get(t, {}).get("status") not in TERMINAL]

    def wait_all(
        self,
        *statuses: str,
        timeout: float,
        task_ids: list[str] | None = None,
        interval: float = 0.1,
    ) -> None:
        wanted = list(self.keys if task_ids is None else task_ids)

        def done() -> bool:
            pending = [t for t in wanted if self.last.get(t, {}).get("status") not in statuses]
            if pending:
                self.poll(pending)
            return all(self.last[t]["status"] in statuses for t in wanted)

        try:
            wait_until(done, timeout=timeout, interval=interval, message=f"all in {statuses}")
        except TimeoutError as exc:
            left = {t[:8]: self.last[t]["status"] for t in wanted if t in self.last}
            left = {k: v for k, v in left.items() if v not in statuses}
            raise TimeoutError(f"{exc}; {len(left)} not there: {left}") from None


__all__ = [
    "ACCEPT",
    "FAULT_KNOBS",
    "FAULT_TOOLS",
    "GAUGES",
    "KEYS",
    "MakeStack",
    "TaskWatch",
    "lines",
    "open_gauges",
    "percentile",
]
