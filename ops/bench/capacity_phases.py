"""How the capacity benchmark times a worker process, whichever it is (mcpq's or bare Celery's):
a drain of a backlog queued before it started, its idle CPU, a steady arrival of tasks. Each
reads the CPU time of the worker's process tree (``/proc``, user + system, prefork children
included) and a count of its completed tasks (a callable: mcpq's store counters, or bare
Celery's queue and unacked hash)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from mcpq.ops.bench.capacity_report import Rate
from mcpq.ops.bench.capacity_versus import WorkerCost
from mcpq.ops.bench.cpu import tree_cpu_seconds
from mcpq.ops.harness.children import Child

#: The shortest window between the 10 % and 90 % marks that is measured as such.
MIN_WINDOW_S = 0.5
#: How often completions are polled while a phase waits for them.
POLL_S = 0.02
#: How long an idle measurement waits first, for the tail of the work before it to end.
SETTLE_S = 1.0

Count = Callable[[], int]


def _reached(completed: Count, count: int) -> bool:
    return completed() >= count


def _wait(child: Child, completed: Count, count: int, timeout: float = 600) -> None:
    """Until ``count`` completions, or the worker exits (``StackError``)."""
    child.wait_for(
        partial(_reached, completed, count), f"{count} completions", timeout, interval=POLL_S
    )


@dataclass(frozen=True)
class Drained:
    """A backlog drained by a worker started after it was queued."""

    total: int
    window_tasks: int  #: completed between the 10 % and 90 % marks (or the whole drain)
    window_s: float
    window_cpu_s: float
    whole_s: float  #: from the worker's spawn to the last completion
    whole_cpu_s: float  #: all its process tree's CPU by then (start-up included)

    @property
    def ms_per_task(self) -> float:
        """CPU per task in the window (ms)."""
        return 1000 * self.window_cpu_s / max(1, self.window_tasks)

    def rate(self, kind: str) -> Rate:
        done = max(1, self.window_tasks)
        return Rate(
            kind,
            self.window_tasks,
            done / self.window_s,
            1000 * self.window_cpu_s / done,
            self.window_cpu_s / self.window_s,
        )


def time_drain(child: Child, total: int, completed: Count, spawned: float) -> Drained:
    """The drain of ``total`` tasks by ``child``, spawned at ``spawned`` (``time.monotonic``)
    with the backlog already queued: its CPU between 10 % and 90 % of the backlog (start-up
    and tail left out), and from its start to the last completion."""
    pid = child.popen.pid
    low, high = max(1, total // 10), max(2, total * 9 // 10)
    marks: list[tuple[float, float, int]] = []
    for mark in (low, high):
        _wait(child, completed, mark)
        marks.append((time.monotonic(), tree_cpu_seconds(pid), completed()))
    _wait(child, completed, total)
    end = (time.monotonic(), tree_cpu_seconds(pid), completed())
    (t0, cpu0, n0), (t1, cpu1, n1) = marks
    missed = n1 - n0 < max(1, (high - low) // 2)
    # Too short to measure: the completion counters move in steps (a worker's counts are
    # written in batches), so both marks can land on one step; a window of a few ms reads
    # 0 CPU at the kernel's tick. Seen: 66 completions "in 8 ms", 0.0 ms of CPU.
    too_short = t1 - t0 < MIN_WINDOW_S or cpu1 - cpu0 <= 0
    if missed or too_short:
        # NOTE: the polls missed the window (a loaded host read the counters late, and the
        # worker drained most of the backlog in between), or it was too short to measure:
        # the whole drain instead, from the worker's spawn (its start-up counted: a lower
        # rate, never a made-up one).
        (t0, cpu0, n0), (t1, cpu1, n1) = (spawned, 0.0, 0), end
    return Drained(total, n1 - n0, t1 - t0, cpu1 - cpu0, end[0] - spawned, end[1])


def idle_ms_per_s(child: Child, seconds: float) -> float:
    """The worker's CPU per second (ms) with nothing to do, after `SETTLE_S`."""
    time.sleep(SETTLE_S)
    pid = child.popen.pid
    before = tree_cpu_seconds(pid)
    time.sleep(seconds)
    if not child.alive:
        raise RuntimeError(f"{child.name} exited while idle:\n{child.tail()}")
    return 1000 * (tree_cpu_seconds(pid) - before) / seconds


@dataclass(frozen=True)
class Steadied:
    """A steady arrival of tasks at a running worker."""

    tasks: int  #: completed
    per_s: float  #: the arrival rate achieved
    cpu_s: float  #: the worker's, from the first arrival to the last completion
    wall_s: float


def time_steady(
    child: Child, completed: Count, produce: Callable[[], tuple[int, float]]
) -> Steadied:
    """``produce()`` sends tasks at a steady rate (and returns how many, and over how many
    seconds) to the running worker ``child``; its CPU until the last of them completed."""
    pid = child.popen.pid
    n0, cpu0, t0 = completed(), tree_cpu_seconds(pid), time.monotonic()
    sent, sent_s = produce()
    _wait(child, completed, n0 + sent, timeout=120)
    t1, cpu1, n1 = time.monotonic(), tree_cpu_seconds(pid), completed()
    return Steadied(n1 - n0, sent / sent_s if sent_s > 0 else 0.0, cpu1 - cpu0, t1 - t0)


def median_drain(rounds: Sequence[Drained]) -> Drained:
    """The round of median CPU per task (of an even number, the lower of the middle two): the
    one a single figure quotes."""
    ordered = sorted(rounds, key=lambda drained: drained.ms_per_task)
    return ordered[(len(ordered) - 1) // 2]


def worker_cost(rounds: Sequence[Drained], idle: float, steady: Steadied) -> WorkerCost:
    """One worker's cost from its drains (``rounds``, in order), idle and steady runs."""
    drained = median_drain(rounds)
    done, steady_done = max(1, drained.window_tasks), max(1, steady.tasks)
    return WorkerCost(
        drain_tasks=drained.total,
        drain_ms=drained.ms_per_task,
        drain_per_s=done / drained.window_s,
        drain_whole_ms=statistics.median(
            1000 * one.whole_cpu_s / max(1, one.total) for one in rounds
        ),
        drain_whole_s=statistics.median(one.whole_s for one in rounds),
        drain_rounds_ms=[round(one.ms_per_task, 4) for one in rounds],
        idle_ms_per_s=idle,
        steady_tasks=steady.tasks,
        steady_per_s=steady.per_s,
        steady_ms=1000 * steady.cpu_s / steady_done,
        steady_busy=steady.cpu_s / steady.wall_s if steady.wall_s > 0 else 0.0,
    )
