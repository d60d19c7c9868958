"""Helpers of the fault layer: a stack that can lose its parts on purpose, and a task watcher.

``FaultStack`` is the end-to-end ``Stack`` (own redis-server on a free loopback port, web and
Celery worker process groups, leftovers asserted on close) plus what fault tests need:

- Redis with AOF (``appendonly yes``, ``appendfsync everysec``) in a data dir under the test's
  ``tmp_path``, stopped and started again on the same port and directory;
- web and worker processes with their own environment overrides (a fault hook, a long input
  hold, ``REMAP_SIGTERM``);
- white-box reads of the task store (task hashes by ``ref``, the stats hash, the indexes).

``TaskWatch`` polls ``tasks/get`` for many tasks and remembers every status and every
``inputRequests`` key each task ever showed, so "the client was asked exactly once" is checked on
what the client saw, not on server internals.
"""

from __future__ import annotations

import signal
import statistics
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ops.processes import read_proc_stat, signal_group, wait_until
from ops.redis_binary import IN_MEMORY_ARGS, RedisProcess
from shared.keys import Keys
from shared.settings import DEFAULT_TOOLS
from tests.e2e.harness import FAST_KNOBS, TERMINAL, Child, McpClient, Stack, ref_of

FAULT_TOOLS = f"{DEFAULT_TOOLS},tests.faults.tools_faults"
AOF_ARGS: tuple[str, ...] = ("--save", "", "--appendonly", "yes", "--appendfsync", "everysec")

# The e2e knobs (3 s lease and input hold, 1 s sweeps), and a 2 s bound for a persisted task that
# was never enqueued (the production default is 30 s).
FAULT_KNOBS = {**FAST_KNOBS, "MCPQ_UNCLAIMED_AFTER_S": "2"}

KEYS = Keys()
GAUGES = ("state:working", "state:input_required", "parked", "inputs")
ACCEPT = {"action": "accept", "content": {"ok": True}}


class FaultStack(Stack):
    def __init__(
        self,
        name: str,
        workdir: Path,
        *,
        env: dict[str, str] | None = None,
        aof: bool = False,
    ) -> None:
        super().__init__(name, workdir, tools=FAULT_TOOLS, env={**FAULT_KNOBS, **(env or {})})
        self.aof = aof
        self.redis_pids: list[int] = []

    # -- Redis ----------------------------------------------------------------------------------
    def start_redis(self) -> RedisProcess:
        self._redis_log = open(self.workdir / "redis.log", "ab")  # noqa: SIM115 (closed by close())
        data_dir = self.workdir / "redis-data"
        data_dir.mkdir(exist_ok=True)
        args = AOF_ARGS if self.aof else IN_MEMORY_ARGS
        self.redis = RedisProcess(extra_args=args, data_dir=data_dir, output=self._redis_log)
        self.redis.start()
        self.redis_pids.append(self.redis.pid)
        return self.redis

    def stop_redis(self) -> None:
        """SIGTERM redis-server by pid and reap it (with AOF on, it fsyncs before exiting)."""
        assert self.redis is not None
        self.redis.stop()

    def start_redis_again(self) -> None:
        """Start redis-server again on the same port, directory and arguments."""
        assert self.redis is not None
        self.redis.start()
        self.redis_pids.append(self.redis.pid)

    # -- processes with their own environment ---------------------------------------------------
    def start_web_with(self, **env: str) -> str:
        saved = dict(self.extra_env)
        self.extra_env.update(env)
        try:
            return self.start_web()
        finally:
            self.extra_env = saved

    def start_worker_with(self, *, queues: str = "mcpq", concurrency: int = 2, **env: str) -> Child:
        saved = dict(self.extra_env)
        self.extra_env.update(env)
        try:
            return self.start_worker(queues=queues, concurrency=concurrency)
        finally:
            self.extra_env = saved

    def kill_group(self, child: Child, sig: int = signal.SIGKILL) -> float:
        """Signal every process of ``child``'s group at once (main process and pool children);
        returns the ``time.monotonic()`` of the signal. The child stays in ``workers``/``webs``
        until :meth:`reap` (or ``stop_child``) takes it out."""
        child.remember_descendants()
        at = time.monotonic()
        assert signal_group(child.pgid, sig), f"{child.name} is already gone"
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

    def worker_that_received(self, tool: str, ref: str) -> list[Child]:
        """Live workers whose log shows Celery received a message for this task."""
        needle = f"Task {tool}[{ref}] received"
        return [w for w in self.workers if needle in w.log()]

    # -- white-box reads ------------------------------------------------------------------------
    def hash_of(self, ref: str) -> dict[str, str]:
        with self.redis_client() as client:
            return client.hgetall(KEYS.task(ref))  # type: ignore[return-value]

    def stats(self) -> dict[str, str]:
        with self.redis_client() as client:
            return client.hgetall(KEYS.stats)  # type: ignore[return-value]

    def open_gauges(self) -> dict[str, int]:
        """The stats gauges of non-terminal tasks (all zero once every task has ended)."""
        stats = self.stats()
        return {name: int(stats.get(name, 0)) for name in GAUGES}

    def close(self, *, check: bool = True) -> None:
        super().close(check=check)
        if check:
            alive = [p for p in self.redis_pids if (s := read_proc_stat(p)) and s.state != "Z"]
            assert not alive, f"redis-server processes left: {alive}"


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def wait_runs(stack: FaultStack, ref: str, runs: int, timeout: float) -> float:
    """Poll the task hash until ``runs`` (bumped by every successful claim) reaches ``runs``;
    returns the ``time.monotonic()`` at which it was seen."""
    with stack.redis_client() as client:
        key = KEYS.task(ref)

        def reached() -> float | None:
            value = client.hget(key, "runs")
            return time.monotonic() if value is not None and int(str(value)) >= runs else None

        return wait_until(reached, timeout=timeout, interval=0.01, message=f"runs >= {runs}")


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[int(q) - 1]


MakeStack = Callable[..., FaultStack]
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
    "AOF_ARGS",
    "FAULT_KNOBS",
    "FAULT_TOOLS",
    "GAUGES",
    "KEYS",
    "FaultStack",
    "MakeStack",
    "TaskWatch",
    "lines",
    "percentile",
    "ref_of",
    "wait_runs",
]
