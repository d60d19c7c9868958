"""What the soak's clients saw, kept for the checks after the drain: every logical request
(`Sent`), every acknowledged task (`Job`: what was asked, every status read, the answer and the
cancel as the server acknowledged them), every sync call, and each violation with its evidence.
Shared by the client threads, so every change goes through the ledger's lock."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

from mcpq.shared.store import TERMINAL


@dataclass
class Sent:
    """One logical request: its kind, wall-clock start, duration with its retries, attempts,
    and whether it got an answer at all."""

    kind: str
    started: float
    took_s: float
    attempts: int
    ok: bool


@dataclass
class Job:
    """One task the soak created: its arguments (``tag`` of the attempt the server
    acknowledged), its era, and what was seen of it."""

    base: str
    era: str
    tool: str
    seconds: float
    ask: bool
    cancel_after: float | None
    tag: str = ""
    task_id: str = ""
    acked_at: float = 0.0
    #: Distinct consecutive statuses, as polled (``tasks/get``) by its client and the final read.
    polled: list[str] = field(default_factory=list)
    #: Input keys the client answered, and when the last answer was acknowledged (wall clock).
    answered: set[str] = field(default_factory=set)
    answered_at: float | None = None
    reasked: bool = False
    #: What the server answered the cancel: ``acked`` (2026-07-28 acknowledges either way),
    #: ``cancelled`` or ``terminal`` (2025-11-25), ``none`` (no answer within the budget).
    cancel: str = ""
    cancel_at: float | None = None
    cancel_attempts: int = 0
    final: str = ""
    result: str | None = None
    is_error: bool = False
    message: str = ""
    ended_at: float | None = None
    #: Pushed statuses (``subscriptions/listen``), when watched.
    watched: bool = False
    pushed: list[str] = field(default_factory=list)
    push_log: list[str] = field(default_factory=list)
    #: The task's record as the store holds it, read for a task that did not end well.
    stored: str = ""


@dataclass
class SyncCall:
    era: str
    tag: str
    seconds: float
    text: str | None
    is_error: bool
    attempts: int


@dataclass
class Violation:
    kind: str
    evidence: str


class Ledger:
    """Everything the clients record, behind one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent: list[Sent] = []
        self.jobs: list[Job] = []
        self.syncs: list[SyncCall] = []
        self.violations: list[Violation] = []
        self.counts: Counter[str] = Counter()

    def request(self, kind: str, started: float, took_s: float, attempts: int, ok: bool) -> None:
        with self.lock:
            self.sent.append(Sent(kind, started, took_s, attempts, ok))

    def acked(self, job: Job) -> None:
        with self.lock:
            self.jobs.append(job)

    def sync(self, call: SyncCall) -> None:
        with self.lock:
            self.syncs.append(call)

    def violation(self, kind: str, evidence: str) -> None:
        with self.lock:
            self.violations.append(Violation(kind, evidence))

    def count(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.counts[what] += n

    def seen(self, job: Job, status: str, pushed: bool = False) -> None:
        """One status read of ``job`` (polled, or pushed): a terminal status never changes, so
        any other status after one is a task going backwards."""
        with self.lock:
            seq = job.pushed if pushed else job.polled
            if seq and seq[-1] in TERMINAL and status != seq[-1]:
                how = "pushed" if pushed else "polled"
                self.violations.append(
                    Violation(
                        "state went backwards",
                        f"{job.era} task {job.tag} {how} {' -> '.join([*seq, status])}",
                    )
                )
            if not seq or seq[-1] != status:
                seq.append(status)


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]
