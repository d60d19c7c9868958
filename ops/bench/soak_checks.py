"""The soak's checks after the drain: each acknowledged task's end, and the step record.

The step record is the file the soak's job appends to (``mcpq.ops.bench.bench_tools.SOAK_LOG``):
a ``call`` line each time a step's function runs (tag, step, the run's generation, pid, time,
the step's idempotency key) and a ``saved`` line once ``ctx.step`` returned. A step's function
must run once per task. A second call of the same (tag, step) is allowed only when every
earlier call's process was SIGKILLed after that call and no ``saved`` line exists for that
call's (tag, step, generation): its caller died between the call and the save. Anything else
(the first caller alive, merely stopped, or its save done) is a violation, reported with every
line of that step and what the soak did to the processes involved.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from mcpq.ops.bench.bench_tools import SOAK_STEPS
from mcpq.ops.bench.soak_clients import CANCEL_SLACK_S, LEGACY, expected
from mcpq.ops.bench.soak_faults import Signalled
from mcpq.ops.bench.soak_ledger import Job, Ledger
from mcpq.shared.store import TERMINAL


@dataclass(frozen=True)
class Call:
    tag: str
    step: str
    gen: str
    pid: int
    at: float
    key: str

    def __str__(self) -> str:
        return f"call  gen={self.gen} pid={self.pid} at={self.at:.3f} key={self.key or '-'}"


@dataclass
class StepRecord:
    """The record parsed: calls and saves by (tag, step)."""

    calls: dict[tuple[str, str], list[Call]] = field(default_factory=lambda: defaultdict(list))
    saved: dict[tuple[str, str], list[tuple[str, int, float, bool]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    malformed: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> StepRecord:
        record = cls()
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        for line in text.splitlines():
            fields = line.split("\t")
            try:
                if fields[0] == "call" and len(fields) == 7:
                    _, tag, step, gen, pid, at, key = fields
                    record.calls[tag, step].append(Call(tag, step, gen, int(pid), float(at), key))
                elif fields[0] == "saved" and len(fields) == 7:
                    _, tag, step, gen, pid, at, called = fields
                    entry = (gen, int(pid), float(at), called == "1")
                    record.saved[tag, step].append(entry)
                else:
                    record.malformed.append(line)
            except ValueError:
                record.malformed.append(line)
        return record

    def saved_gens(self, tag: str, step: str) -> set[str]:
        return {gen for gen, _pid, _at, _called in self.saved.get((tag, step), [])}


@dataclass
class StepFindings:
    calls: int = 0
    steps: int = 0
    allowed_doubles: int = 0
    keys_differing: int = 0


def check_steps(record: StepRecord, signalled: list[Signalled], ledger: Ledger) -> StepFindings:
    found = StepFindings()
    kills: dict[int, list[float]] = defaultdict(list)
    for s in signalled:
        if s.how == "SIGKILL":
            kills[s.pid].append(s.at)
    for (tag, step), calls in sorted(record.calls.items()):
        found.steps += 1
        found.calls += len(calls)
        if len(calls) < 2:
            continue
        calls = sorted(calls, key=lambda c: c.at)
        saved = record.saved_gens(tag, step)
        allowed = all(
            c.gen not in saved and any(at > c.at for at in kills.get(c.pid, [])) for c in calls[:-1]
        )
        if len({c.key for c in calls}) > 1:
            found.keys_differing += 1
        if allowed:
            found.allowed_doubles += len(calls) - 1
        else:
            ledger.violation("step called twice", _evidence(record, tag, step, calls, signalled))
    for line in record.malformed:
        ledger.violation("step record", f"malformed line {line!r}")
    return found


def _evidence(
    record: StepRecord, tag: str, step: str, calls: list[Call], signalled: list[Signalled]
) -> str:
    pids = {c.pid for c in calls} | {pid for _g, pid, _a, _c in record.saved.get((tag, step), [])}
    lines = [f"{tag} step {step}:"]
    lines += [f"    {c}" for c in calls]
    lines += [
        f"    saved gen={gen} pid={pid} at={at:.3f} called_here={called}"
        for gen, pid, at, called in record.saved.get((tag, step), [])
    ]
    lines += [
        f"    soak {s.how} pid={s.pid} ({s.target}) at={s.at:.3f}"
        for s in signalled
        if s.pid in pids
    ]
    return "\n".join(lines)


def judge(job: Job, record: StepRecord, ledger: Ledger) -> str:
    """The outcome of one acknowledged task, its violations filed in the ledger."""
    where = f"{job.era} {job.tool} {job.tag}"
    if job.final not in TERMINAL:
        seen = " -> ".join(job.polled) or "never read"
        ledger.violation("stuck", f"{where}: {seen}, not ended after the drain; {job.stored}")
        return "stuck"
    if job.final == "failed":
        ledger.violation("lost", f"{where}: failed: {job.message!r}; {job.stored}")
        return "failed"
    if job.final == "cancelled":
        return _cancelled(job, where, ledger)
    if job.result != expected(job) or job.is_error:
        ledger.violation(
            "wrong result",
            f"{where}: {job.result!r} (isError={job.is_error}), expected {expected(job)!r}",
        )
        return "wrong result"
    missing = [s for s in SOAK_STEPS if not record.calls.get((job.tag, s))]
    if missing:
        ledger.violation("step never called", f"{where}: completed, no call of {missing}")
    if not job.cancel:
        return "completed"
    return _completed_after_cancel(job, where, ledger)


def _cancelled(job: Job, where: str, ledger: Ledger) -> str:
    if not job.cancel:
        ledger.violation("cancelled unasked", f"{where}: cancelled, no cancel was sent")
        return "cancelled unasked"
    if job.cancel == "terminal" and job.cancel_attempts < 2:
        ledger.violation("cancel answer", f"{where}: answered 'already ended', then cancelled")
    return "cancelled"


def _completed_after_cancel(job: Job, where: str, ledger: Ledger) -> str:
    """A cancelled task may end completed only if the cancel raced the end: the server said so
    (2025-11-25: -32602, the task had ended), or (2026-07-28, whose cancel is acknowledged
    either way) the task's last update is not later than the acknowledgement."""
    if job.era == LEGACY:
        if job.cancel == "cancelled":
            ledger.violation("cancel not honoured", f"{where}: answered cancelled, then completed")
            return "cancel not honoured"
        return "completed (cancel answered: already ended)"
    acked_at, ended_at = job.cancel_at, job.ended_at
    if (
        job.cancel == "acked"
        and acked_at is not None
        and ended_at is not None
        and ended_at > acked_at + CANCEL_SLACK_S
    ):
        ledger.violation(
            "cancel not honoured",
            f"{where}: cancel acknowledged at {acked_at:.3f}, completed at {ended_at:.3f}",
        )
        return "cancel not honoured"
    return "completed (cancel raced the end)"


def check_push(jobs: list[Job], ledger: Ledger) -> int:
    """Every watched task that ended: its stream showed that end. Returns how many watched."""
    watched = [j for j in jobs if j.watched]
    for job in watched:
        if job.final in TERMINAL and (not job.pushed or job.pushed[-1] != job.final):
            ended = "?" if job.ended_at is None else f"{job.ended_at:.3f}"
            ledger.violation(
                "push missed the end",
                f"{job.tag}: ended {job.final} at {ended}, pushed "
                f"{' -> '.join(job.pushed) or 'nothing'}; its streams: " + "; ".join(job.push_log),
            )
    return len(watched)


def outcomes(jobs: list[Job], record: StepRecord, ledger: Ledger) -> Counter[str]:
    return Counter(f"{job.era} {judge(job, record, ledger)}" for job in jobs)
