"""The results of the capacity benchmark's comparison with bare Celery and of its profile: what
one worker process of each pool kind spends per no-op task, mcpq's against a bare Celery app's
(``mcpq.ops.bench.bare_celery``) in the same run, in a drain and at a steady arrival rate, with
each one's idle CPU; and where mcpq's worker's CPU went over a steady run (``--profile``)."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class WorkerCost:
    """CPU of one worker process tree (prefork children included; ``/proc``, user + system)."""

    drain_tasks: int  #: the backlog, queued while the worker was stopped
    drain_ms: float  #: CPU per task between 10 % and 90 % of the backlog: the median round's
    drain_per_s: float  #: tasks/s in that window, the same round's
    drain_whole_ms: float  #: CPU per task from the process's start to the last completion
    drain_whole_s: float  #: wall seconds from its start to the last completion (both medians)
    idle_ms_per_s: float  #: CPU per second, up and idle (no task for a while)
    steady_tasks: int  #: tasks completed of the steady arrival
    steady_per_s: float  #: the arrival rate achieved
    steady_ms: float  #: CPU from the first arrival to the last completion, per task
    steady_busy: float  #: CPU seconds per second over that
    #: each drain's CPU per task (10-90 %), in the order run (a round: mcpq's, then bare's)
    drain_rounds_ms: list[float] = field(default_factory=list)

    @property
    def idle_share_ms(self) -> float:
        """What the idle CPU alone adds to each task at the steady rate (derived: idle ms/s ÷
        tasks/s)."""
        return self.idle_ms_per_s / self.steady_per_s if self.steady_per_s else 0.0


def _ratio(mcpq: float, bare: float) -> float | None:
    """``None`` where bare Celery's figure is 0 (an idle rate below ``/proc``'s tick)."""
    return round(mcpq / bare, 3) if bare > 0 else None


def _times(ratio: float | None) -> str:
    return f"{ratio:9.2f}x" if ratio is not None else f"{'-':>10}"


@dataclass
class Versus:
    """mcpq's worker of pool kind ``kind`` and bare Celery's of pool ``bare_pool``, both with
    ``concurrency`` slots and a prefetch of one message per slot, on the same private Redis."""

    kind: str
    bare_pool: str
    concurrency: int
    mcpq: WorkerCost
    bare: WorkerCost

    def round_ratios(self) -> list[float | None]:
        """Each round's drain ratio: mcpq's drain over the bare drain run right after it."""
        pairs = zip(self.mcpq.drain_rounds_ms, self.bare.drain_rounds_ms, strict=True)
        return [_ratio(mine, theirs) for mine, theirs in pairs]

    def ratios(self) -> dict[str, float | None]:
        """mcpq's CPU per task over bare Celery's, by measurement; the drain's is the median of
        the rounds' ratios (each round's two drains ran minutes apart at most, so the host's
        drift between rounds cancels)."""
        m, b = self.mcpq, self.bare
        rounds = [ratio for ratio in self.round_ratios() if ratio is not None]
        return {
            "drain": round(statistics.median(rounds), 3) if rounds else None,
            "drain_whole": _ratio(m.drain_whole_ms, b.drain_whole_ms),
            "steady": _ratio(m.steady_ms, b.steady_ms),
            "idle": _ratio(m.idle_ms_per_s, b.idle_ms_per_s),
        }

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        for side in ("mcpq", "bare"):
            out[side]["idle_share_ms"] = round(getattr(self, side).idle_share_ms, 4)
        out["ratios"] = self.ratios()
        out["drain_round_ratios"] = self.round_ratios()
        return out


def render_versus(rows: list[Versus]) -> list[str]:
    """The table: by pool kind, drain and steady, mcpq, bare and their ratio; the idle rates."""
    if not rows:
        return []
    lines = [
        "worker CPU per no-op task against bare Celery (same Redis, same run), ms per task",
        "  pool kind (bare pool, slots)  measured                            mcpq      bare"
        "   mcpq/bare",
    ]
    for row in rows:
        m, b, ratio = row.mcpq, row.bare, row.ratios()
        head = f"{row.kind} ({row.bare_pool}, {row.concurrency})"
        rounds = len(m.drain_rounds_ms)
        measured = [
            (f"drain, 10-90 % of {m.drain_tasks}, x{rounds}", m.drain_ms, b.drain_ms,
             ratio["drain"]),
            ("drain, from the worker's start", m.drain_whole_ms, b.drain_whole_ms,
             ratio["drain_whole"]),
            (f"steady, {m.steady_per_s:.0f}/s ({b.steady_per_s:.0f}/s bare)", m.steady_ms,
             b.steady_ms, ratio["steady"]),
        ]  # fmt: skip
        for i, (what, mine, theirs, times) in enumerate(measured):
            lines.append(
                f"  {head if i == 0 else '':<30}{what:<34}{mine:8.3f}{theirs:10.3f}{_times(times)}"
            )
            if i == 0 and rounds > 1:
                each = ", ".join(
                    f"{mine:.3f}/{theirs:.3f}={_times(times).strip()}"
                    for mine, theirs, times in zip(
                        m.drain_rounds_ms, b.drain_rounds_ms, row.round_ratios(), strict=True
                    )
                )
                lines.append(f"  {'':<30}(medians; by round, mcpq/bare: {each})")
        lines.append(
            f"  {'':<30}{'idle, CPU ms per second':<34}{m.idle_ms_per_s:8.1f}"
            f"{b.idle_ms_per_s:10.1f}{_times(ratio['idle'])}"
        )
        lines.append(
            f"  {'':<30}(at the steady rate the idle CPU alone is {m.idle_share_ms:.3f} ms "
            f"a task for mcpq, {b.idle_share_ms:.3f} for bare Celery)"
        )
    return lines


@dataclass
class Profiled:
    """A profile of mcpq's worker over a steady run (``mcpq.ops.bench.thread_profile``): a
    worker of its own, started with the profiler, measured like the unprofiled one."""

    kind: str
    path: str  #: the merged ``pstats`` file
    processes: int  #: processes profiled (a prefork pool: its main process and its children)
    tasks: int
    cpu_ms: float  #: the profiled worker's CPU per task over the run
    unprofiled_ms: float  #: the same run's unprofiled steady CPU per task
    accounted_ms: float  #: per task, what the profile accounts for (own times summed)
    top_own: list[dict[str, Any]] = field(default_factory=list)
    top_cumulative: list[dict[str, Any]] = field(default_factory=list)

    @property
    def overhead(self) -> float:
        """The profiler's cost: profiled CPU per task over unprofiled."""
        return self.cpu_ms / self.unprofiled_ms if self.unprofiled_ms else 0.0

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "overhead": round(self.overhead, 2)}

    def render(self) -> list[str]:
        lines = [
            f"profile of mcpq's {self.kind} worker over a steady run ({self.tasks} tasks, "
            f"{self.processes} process(es), every thread, each on its own CPU clock): "
            f"{self.path}",
            f"  CPU per task {self.cpu_ms:.3f} ms profiled, {self.unprofiled_ms:.3f} ms "
            f"without: the profiler's overhead is {self.overhead:.1f}x, so read shares, not "
            "times; the profile accounts for "
            f"{self.accounted_ms:.3f} ms a task (calls still running at either end, such as "
            "the threads' outer loops, are not in it)",
            "  top 25 by own CPU           µs/task  cum µs/task  calls/task  function",
        ]
        lines += [_entry(e) for e in self.top_own]
        lines.append("  top 15 by cumulative CPU")
        lines += [_entry(e) for e in self.top_cumulative]
        return lines


def _entry(entry: dict[str, Any]) -> str:
    return (
        f"  {'':<22}{entry['own_us']:12.1f}{entry['cumulative_us']:13.1f}"
        f"{entry['calls']:12.2f}  {entry['function']}"
    )
