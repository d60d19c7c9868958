"""Chaos soak: mixed traffic at a steady load while processes die, stall and restart; then a
drain and the checks that nothing was lost, stuck, wrong, asked twice or done twice.

``python -m mcpq.ops.bench.soak --seconds 120`` (from the repository root) starts a private
deployment (`mcpq.ops.bench.soak_faults.Deployment`: Redis with AOF, two web replicas, two io
workers and one cpu worker, ``MCPQ_LEASE_S=2``, ``MCPQ_SWEEP_INTERVAL_S=0.5``,
``MCPQ_INPUT_HOLD_S=2``), drives it with eight client threads (`mcpq.ops.bench.soak_clients`: tasks
of ``soak_job`` with steps, questions and cancels, synchronous calls, push subscriptions; two
of the threads on the 2025-11-25 wire), every request to a random replica and retried on a 5xx
or a connection error, and injects one fault every 4-8 s (`mcpq.ops.bench.soak_faults`: worker
SIGKILL, worker SIGSTOP/SIGCONT, web SIGKILL, graceful Redis restart; with ``--sentinel``,
Redis behind three sentinels and a failover instead of the restart). Then it stops the
faults, lets every client follow its last task to the end, reads every acknowledged task until
it has ended (bounded) and checks (`mcpq.ops.bench.soak_checks`):

- every acknowledged task ended as expected, with the exact expected result (a cancelled one
  ``cancelled``, or ``completed`` only if the cancel raced the end), none stuck or failed;
- no status went backwards, as polled or pushed; every watched task's end was pushed;
- no question was asked again after the client's answer to it was acknowledged;
- synchronous calls returned the exact expected result;
- each step's function ran once per task, a second call allowed only when the first caller
  was SIGKILLed after its call and before its save.

It prints the counts, the availability (requests that needed a retry, latency overall and
during faults: from a fault until 5 s after its repair) and each violation with its evidence,
and exits 1 on any violation (or a process left behind), else 0. ``--json`` adds the numbers as
one JSON object on the last line (the smoke test reads it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpq.ops.bench.bench_tools import MODULE, SOAK_LOG
from mcpq.ops.bench.soak_checks import StepFindings, StepRecord, check_push, check_steps, outcomes
from mcpq.ops.bench.soak_clients import LEGACY, MODERN, Client, Plan
from mcpq.ops.bench.soak_faults import BY_NAME, KINDS, SENTINEL_KINDS, Deployment, Faults
from mcpq.ops.bench.soak_ledger import Job, Ledger, percentile
from mcpq.ops.bench.soak_readers import FinalReads, Listener
from mcpq.ops.bench.soak_wire import Replicas
from mcpq.ops.harness.redis_sentinel import SentinelGroup
from mcpq.ops.harness.stack import Stack
from mcpq.shared.settings import DEFAULT_TOOLS
from mcpq.shared.store import task_ref

TOOLS = f"{DEFAULT_TOOLS},{MODULE}"
#: Durable like production: every acknowledged write survives a crash after ~1 s, and a
#: graceful shutdown fsyncs the rest.
AOF_ARGS = ("--appendonly", "yes", "--appendfsync", "everysec", "--save", "")
KNOBS = {
    "MCPQ_LEASE_S": "2",
    "MCPQ_SWEEP_INTERVAL_S": "0.5",
    "MCPQ_INPUT_HOLD_S": "2",
    # The drain is bounded: a message a killed worker had taken but not started is sent again
    # after this (300 s by default), a resume whose web process died before sending it after
    # MCPQ_UNCLAIMED_AFTER_S (30 s by default).
    "MCPQ_REQUEUE_UNSTARTED_S": "5",
    "MCPQ_UNCLAIMED_AFTER_S": "3",
    # Streams (push, sync calls) hear from a replica at least this often.
    "MCPQ_SSE_KEEPALIVE_S": "5",
}
CLIENTS, LEGACY_CLIENTS, LISTENERS = 8, 2, 2


@dataclass
class Options:
    seconds: float
    every: tuple[float, float] = (4.0, 8.0)
    stopped_s: tuple[float, float] = (3.0, 6.0)
    drain_s: float = 90.0
    seed: int = 0
    knobs: dict[str, str] = field(default_factory=dict)
    #: Go on past ``seconds`` (at most as long again) until every kind of fault happened once.
    every_kind: bool = False
    #: Redis through Sentinel (a primary, a replica, three sentinels), with failovers.
    sentinel: bool = False
    #: Only these fault kinds (``soak_faults.BY_NAME``'s values); empty: every kind.
    only: tuple[str, ...] = ()


@dataclass
class Soak:
    """One soak's parts, for the report."""

    ledger: Ledger
    faults: Faults
    record: StepRecord
    steps: StepFindings
    outcomes: Counter[str]
    watched: int
    left: dict[str, list[int]]
    drained: bool
    #: When the traffic began (wall clock): the fault timeline counts from there.
    started: float


def run(options: Options, workdir: Path) -> Soak:
    log_dir = workdir / "steps"
    log_dir.mkdir(parents=True, exist_ok=True)
    sentinel = SentinelGroup(workdir / "sentinel", AOF_ARGS) if options.sentinel else None
    # Through Sentinel, the writes a client is told about are replicated before it is told.
    knobs = {**KNOBS, **({"MCPQ_REDIS_MIN_REPLICAS": "1"} if sentinel else {}), **options.knobs}
    print("knobs: " + ", ".join(f"{k}={v}" for k, v in sorted(knobs.items())), flush=True)
    store_url = ""
    if sentinel is not None:
        try:
            store_url = sentinel.start().url
        except BaseException:
            sentinel.close()
            raise
    stack = Stack(
        "soak", workdir / "stack", tools=TOOLS, env=knobs, redis_args=AOF_ARGS, store_url=store_url
    )
    replicas, ledger = Replicas([]), Ledger()
    deployment = Deployment(stack, replicas.add, sentinel)
    stop, done = threading.Event(), threading.Event()
    deadline = [float("inf")]
    watch: deque[Job] = deque()
    faults = Faults(
        deployment,
        replicas.remove,
        stop,
        every=options.every,
        stopped_s=options.stopped_s,
        seed=options.seed,
        only=options.only,
    )
    began = time.monotonic()
    try:
        deployment.start()
        print(
            f"stack up in {time.monotonic() - began:.1f}s: {len(stack.webs)} web, "
            f"{len(stack.workers)} workers",
            flush=True,
        )
        plan = Plan(str(log_dir), task_wait_s=min(60.0, options.drain_s))
        clients = [
            Client(options.seed * 100 + i, LEGACY if i < LEGACY_CLIENTS else MODERN,
                   replicas, ledger, plan, stop, watch)
            for i in range(CLIENTS)
        ]  # fmt: skip
        listeners = [
            Listener(i + 1, replicas, ledger, watch, done, deadline) for i in range(LISTENERS)
        ]
        started = time.time()
        for thread in [*clients, *listeners, faults]:
            thread.start()
        time.sleep(options.seconds)
        if options.every_kind:
            until = time.monotonic() + options.seconds
            while (
                len({f.kind for f in faults.faults}) < len(faults.kinds)
                and time.monotonic() < until
            ):
                time.sleep(0.1)
        stop.set()
        faults.join()
        print(f"soaked {time.time() - started:.1f}s; draining", flush=True)
        drain_began = time.monotonic()
        drain_until = drain_began + options.drain_s
        deadline[0] = drain_until
        for client in clients:
            client.join(max(0.0, drain_until - time.monotonic()))
        final = FinalReads(replicas, ledger)
        final.until_ended(list(ledger.jobs), drain_until)
        done.set()
        for listener in listeners:
            # A stream checks the deadline at each keep-alive (MCPQ_SSE_KEEPALIVE_S).
            listener.join(max(0.0, drain_until - time.monotonic()) + 10)
        final.close()
        drained = not any(t.is_alive() for t in [*clients, *listeners])
        _read_stored(stack, ledger.jobs)
        print(f"drained in {time.monotonic() - drain_began:.1f}s", flush=True)
    finally:
        stop.set()
        done.set()
        deadline[0] = 0.0
        left = stack.close()
        if sentinel is not None:
            sentinel.close()
    record = StepRecord.read(log_dir / SOAK_LOG)
    steps = check_steps(record, faults.signalled, ledger)
    jobs = list(ledger.jobs)
    found = outcomes(jobs, record, ledger)
    watched = check_push(jobs, ledger)
    return Soak(ledger, faults, record, steps, found, watched, left, drained, started)


def _read_stored(stack: Stack, jobs: list[Job]) -> None:
    """For each task that has not ended well, its record in the store (evidence; the ref's
    first 12 digits are the ``task`` of the stack's log lines)."""
    for job in jobs:
        if job.final in {"completed", "cancelled"}:
            continue
        ref = task_ref(job.task_id)
        try:
            record = stack.store().record(ref)
        except Exception as exc:  # evidence only
            job.stored = f"task {ref[:12]}: store read failed: {exc!r}"
            continue
        job.stored = f"task {ref[:12]}: " + (
            "no record"
            if record is None
            else f"stored {record.status.value}, gen {record.gen}, runs {record.runs}, "
            f"message {record.message!r}"
        )


# -- the report ---------------------------------------------------------------------------------
def numbers(soak: Soak) -> dict[str, Any]:
    ledger, faults = soak.ledger, soak.faults
    quick = [s for s in ledger.sent if s.kind != "sync call"]
    during = [s for s in quick if faults.in_fault(s.started)]
    sync = [s for s in ledger.sent if s.kind == "sync call"]
    return {
        "tasks": len(ledger.jobs),
        "tasks_by_era": dict(Counter(j.era for j in ledger.jobs)),
        "outcomes": dict(sorted(soak.outcomes.items())),
        "sync_calls": len(ledger.syncs),
        "sync_calls_by_era": dict(Counter(c.era for c in ledger.syncs)),
        "requests": len(ledger.sent),
        "requests_retried": sum(1 for s in ledger.sent if s.attempts > 1),
        "requests_given_up": sum(1 for s in ledger.sent if not s.ok),
        "p50_ms": 1000 * percentile([s.took_s for s in quick], 0.5),
        "p99_ms": 1000 * percentile([s.took_s for s in quick], 0.99),
        "requests_during_faults": len(during),
        "p50_during_faults_ms": 1000 * percentile([s.took_s for s in during], 0.5),
        "p99_during_faults_ms": 1000 * percentile([s.took_s for s in during], 0.99),
        "sync_p50_ms": 1000 * percentile([s.took_s for s in sync], 0.5),
        "sync_p99_ms": 1000 * percentile([s.took_s for s in sync], 0.99),
        "faults": dict(Counter(f.kind for f in faults.faults)),
        "fault_errors": faults.errors,
        "step_calls": soak.steps.calls,
        "steps": soak.steps.steps,
        "allowed_doubles": soak.steps.allowed_doubles,
        "step_keys_differing": soak.steps.keys_differing,
        "watched": soak.watched,
        "counts": dict(sorted(ledger.counts.items())),
        "violations": dict(Counter(v.kind for v in ledger.violations)),
        "processes_left": soak.left,
        "drained": soak.drained,
    }


def render(result: dict[str, Any]) -> str:
    rows = [
        ("tasks acknowledged", f"{result['tasks']}  {_pairs(result['tasks_by_era'])}"),
        *[(f"  {name}", str(n)) for name, n in result["outcomes"].items()],
        ("sync calls", f"{result['sync_calls']}  {_pairs(result['sync_calls_by_era'])}"),
        ("requests", str(result["requests"])),
        ("  needing a retry", str(result["requests_retried"])),
        ("  given up", str(result["requests_given_up"])),
        ("latency p50 / p99", f"{result['p50_ms']:.1f} / {result['p99_ms']:.1f} ms"),
        (
            "  during faults",
            f"{result['p50_during_faults_ms']:.1f} / {result['p99_during_faults_ms']:.1f} ms "
            f"({result['requests_during_faults']} requests)",
        ),
        ("sync call p50 / p99", f"{result['sync_p50_ms']:.0f} / {result['sync_p99_ms']:.0f} ms"),
        ("faults", f"{sum(result['faults'].values())}  {_pairs(result['faults'])}"),
        ("step calls", f"{result['step_calls']} for {result['steps']} steps"),
        ("  allowed doubles", str(result["allowed_doubles"])),
        ("  idempotency keys differing", str(result["step_keys_differing"])),
        ("tasks watched by push", str(result["watched"])),
        ("client counts", _pairs(result["counts"]) or "-"),
        ("violations", f"{sum(result['violations'].values())}  {_pairs(result['violations'])}"),
    ]
    if result["fault_errors"]:
        rows.append(("fault errors", "; ".join(result["fault_errors"])))
    if result["processes_left"]:
        rows.append(("processes left", str(result["processes_left"])))
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def timeline(faults: Faults, started: float) -> str:
    """One line per fault: when (seconds since the soak's start), what, how long its repair
    took."""
    lines = ["faults:"]
    for f in faults.faults:
        took = (
            "not repaired" if f.recovered is None else f"repaired in {f.recovered - f.started:.1f}s"
        )
        lines.append(
            f"  +{f.started - started:6.1f}s (at {f.started:.3f})  {f.kind:<15} {f.target}  "
            f"pids {f.pids}  {took}"
        )
    return "\n".join(lines)


def _pairs(counts: dict[str, Any]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in counts.items())


def _violations(ledger: Ledger, shown: int = 40) -> str:
    lines = []
    for v in ledger.violations[:shown]:
        lines.append(f"- {v.kind}: {v.evidence}")
    if len(ledger.violations) > shown:
        lines.append(f"... and {len(ledger.violations) - shown} more")
    return "\n".join(lines)


def _range(text: str) -> tuple[float, float]:
    low, _, high = text.partition("-")
    first = float(low)
    second = float(high) if high else first
    if not 0 < first <= second:
        raise argparse.ArgumentTypeError(f"not a range of seconds: {text!r}")
    return first, second


def _kinds(text: str) -> tuple[str, ...]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in BY_NAME]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"fault kinds are {', '.join(BY_NAME)}: not {text!r}")
    return tuple(BY_NAME[name] for name in names)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mcpq.ops.bench.soak", description=__doc__)
    parser.add_argument("--seconds", type=float, default=120.0, help="how long to soak")
    parser.add_argument("--fault-every", type=_range, default=(4.0, 8.0), metavar="MIN-MAX",
                        help="seconds between faults (default 4-8)")  # fmt: skip
    parser.add_argument("--stopped", type=_range, default=(3.0, 6.0), metavar="MIN-MAX",
                        help="how long a worker stays SIGSTOPped (default 3-6)")  # fmt: skip
    parser.add_argument("--drain-s", type=float, default=90.0, help="bound of the drain")
    parser.add_argument("--seed", type=int, default=0, help="the faults' and clients' seed")
    parser.add_argument("--knob", action="append", default=[], metavar="MCPQ_X=V",
                        help="a setting for every process (repeatable)")  # fmt: skip
    parser.add_argument("--sentinel", action="store_true",
                        help="Redis through Sentinel, with failovers among the faults")  # fmt: skip
    parser.add_argument("--every-kind", action="store_true",
                        help="go on (at most twice as long) until every fault came")  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    parser.add_argument("--json", action="store_true", help="the numbers as JSON, last line")
    parser.add_argument("--only", type=_kinds, default=(), metavar="KIND,...",
                        help=f"inject only these fault kinds ({', '.join(BY_NAME)})")  # fmt: skip
    args = parser.parse_args(argv)
    if args.only and not set(args.only) & set(SENTINEL_KINDS if args.sentinel else KINDS):
        parser.error("--only names no fault kind of this deployment (failover: with --sentinel)")
    knobs = dict(k.split("=", 1) for k in args.knob)
    options = Options(
        args.seconds,
        args.fault_every,
        args.stopped,
        args.drain_s,
        args.seed,
        knobs,
        args.every_kind,
        args.sentinel,
        args.only,
    )
    workdir = Path(tempfile.mkdtemp(prefix="mcpq-bench-soak-"))
    try:
        soak = run(options, workdir)
    finally:
        if args.keep:
            print(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    result = numbers(soak)
    print(timeline(soak.faults, soak.started))
    print(render(result))
    failed = bool(soak.ledger.violations) or bool(soak.left)
    if soak.ledger.violations:
        print("\nviolations:\n" + _violations(soak.ledger))
    print(f"\nsoak: {'FAILED' if failed else 'passed'}")
    if args.json:
        print(json.dumps(result))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
