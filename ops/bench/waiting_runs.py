"""Many runs waiting at once on one io worker process: ``python -m mcpq.ops.bench.waiting_runs
--runs N [--run-loop] [--wait-on mix|sleep|answer|http|sync] [--kill]``.

Starts a private stack (``ops.harness.stack.Stack``: redis-server on a free loopback port,
``mcpq web``, one ``mcpq worker`` of the io pool) and creates ``--runs`` tasks of tools that wait
(``mcpq.ops.bench.bench_tools``), by 16 clients on keep-alive connections (the load generator's
own, ``ops.bench.rawhttp``: an httpx client would be what limits the rate). ``--wait-on`` says on
what (``mix``, the default: a third of each of the first three):

- ``sleep``: ``async def``, ``await ctx.sleep(seconds)`` (``bench_async_sleep``);
- ``answer``: ``async def``, ``await ctx.elicit(...)``, which nobody answers while the runs are
  measured (``bench_async_answer``); the stack's ``MCPQ_INPUT_HOLD_S`` is an hour, so the runs
  hold their places on the worker instead of parking after 30 s;
- ``http``: ``async def``, ``await`` a GET to a local slow server (``mcpq.ops.bench.slow_http``,
  started as a child of the stack) that holds each request ``seconds`` (``bench_async_http``);
- ``sync``: a sync tool in ``ctx.sleep`` (``slow_compute``), a pool thread each.

The sleeps and HTTP calls end ``--seconds`` (120) after the first create (a run replayed after
the kill waits only what is left; ``slow_compute`` waits them from each run's start), the
questions once answered. ``--run-loop``: async runs await on the worker's run loop
(``MCPQ_ASYNC_RUNS`` = runs + 100; one event loop thread), else each on a pool thread
(``MCPQ_ASYNC_RUNS=0``, ``MCPQ_IO_CONCURRENCY`` = runs + 100). ``--broker rabbitmq``: Celery's
messages go through a vhost of the run's own on the machine's RabbitMQ (deleted after) instead of
the task store's Redis. Measured, in order:

- **all created after**: seconds from the first create until the last create was answered (the
  web's pace, and on RabbitMQ its publisher confirms');
- **all running after**: seconds from the first create until every task is held by a run (its
  task hash's ``lease`` set by a claim); the worker's threads then, and the requests the slow
  server holds;
- **a 0.3 s tool alongside** (``bench_async_sleep``, or ``slow_compute`` for ``sync``): created
  then, seconds until seen completed;
- **lease renewals** (``--window`` s, 5; 0: skipped), while all are held: the keeper's round
  trips per renewal, runs per renewal, renewals per period, their cost to Redis
  (``mcpq.ops.bench.renewals``: ``INFO commandstats``, then ``MONITOR``);
- **cancel → run ended** of 20 of them (the kinds in turn), the worst; the worker's PSS and
  Redis's clients after;
- ``--kill``: the worker's whole process group SIGKILLed; a second io worker (the same
  settings) started at once; seconds until every task still open at the kill was claimed again
  (its ``gen`` past the one it had), the new worker's PSS and the runs it holds then, until all
  ended (the runs waiting on an answer are answered with ``tasks/update`` once handed over), and
  counts: completed, cancelled, failed, lost (never ended), how many ran once, twice or more
  (the task's ``runs``). The sweeper sends a run again once its lease lapsed
  (``MCPQ_LEASE_S``, 5 s), up to 100 per sweep (every ``MCPQ_SWEEP_INTERVAL_S``, 2 s).

The stack runs mcpq's defaults but for ``MCPQ_INPUT_HOLD_S``, ``MCPQ_ASYNC_RUNS`` and ``--knob
NAME=VALUE``; the settings are printed. Prints a table; ``--json`` prints one JSON object. Exit
status 1 when a task was lost or failed, a request failed, or not every run started.
``python -m mcpq.ops.bench.throughput --waiting N --waiting-async N`` runs the ``sync`` and
``sleep`` phases through here (without renewals or a kill).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import shutil
import signal
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import redis

from mcpq.ops.bench import bench_tools
from mcpq.ops.bench.bench_tools import ASYNC_ANSWER, ASYNC_HTTP, ASYNC_SLEEP
from mcpq.ops.bench.load import TOOL, Load
from mcpq.ops.bench.memory import process_tree, pss_mib
from mcpq.ops.bench.renewals import Renewals
from mcpq.ops.bench.renewals import measure as measure_renewals
from mcpq.ops.bench.waiting_kill import (
    Handover,
    hand_over,
    renewal_period,
    shown_settings,
    start_worker,
    thread_count,
)
from mcpq.ops.bench.waiting_load import (
    KINDS,
    cancel_some,
    in_turn,
    requests_held,
    short_tool,
    specs_of,
    start_slow_server,
    wait_many,
)
from mcpq.ops.harness import rabbitmq
from mcpq.ops.harness.stack import Stack
from mcpq.shared.settings import DEFAULT_TOOLS

_KIND_OF = {tool: kind for kind, tool in KINDS.items()}
MIX = ("sleep", "answer", "http")
WAIT_ON = ("mix", *KINDS)
_SAID = {
    "sleep": "await ctx.sleep",
    "answer": "await ctx.elicit",
    "http": "await an HTTP GET",
    "sync": "ctx.sleep",
}
CANCELS = 20
#: A run waiting for an answer holds its place on the worker for ``MCPQ_INPUT_HOLD_S`` (30 s by
#: default), then parks: it lets go, and the task waits in Redis alone. The runs measured here
#: wait while held, so the hold outlasts the benchmark; on the run loop a held run costs a
#: coroutine, not a thread, which is what an operator holding many would weigh too.
KNOBS = {"MCPQ_INPUT_HOLD_S": "3600"}


@dataclass
class Waiting:
    runs: int
    running_after_s: float
    short_tool_s: float
    cancel_max_s: float
    worker_pss_mib: float
    redis_clients: int
    #: The tool that waits: ``slow_compute`` (a sync tool), an async one, or for ``mix`` each
    #: async one, comma-separated.
    tool: str = TOOL
    #: The worker process's threads while they all wait (``/proc/<pid>/status``).
    worker_threads: int = 0
    #: The runs waited on the worker's run loop (``MCPQ_ASYNC_RUNS``), not a thread each.
    run_loop: bool = False
    #: What they waited on (``--wait-on``), and how many runs of each kind were created.
    wait_on: str = "sync"
    waited_on: dict[str, int] = dataclasses.field(default_factory=dict)
    #: Seconds from the first create until the sleeps and HTTP calls end (``slow_compute``'s:
    #: from each run's start).
    seconds: float = 120.0
    #: Runs held when the wait for all of them ended (``runs`` unless it timed out).
    held: int = 0
    #: Requests the slow server held once all ran (``None``: no run waits on HTTP).
    http_held: int | None = None
    #: The stack's settings that bear on the measurement.
    settings: dict[str, str] = dataclasses.field(default_factory=dict)
    renewals: Renewals | None = None
    handover: Handover | None = None
    #: The worst cancel of each kind of wait.
    cancel_max_by_kind: dict[str, float] = dataclasses.field(default_factory=dict)
    #: Requests that failed (creates, cancels, answers).
    failures: int = 0
    #: Seconds from the first create until the last was answered (the web's and the broker's
    #: pace: what "all running" cannot beat).
    created_after_s: float = 0.0
    #: Celery's broker: the task store's Redis (``redis``), or a RabbitMQ vhost of the run's own.
    broker: str = "redis"
    #: The RabbitMQ vhost the run made and deleted (``None`` with Redis as broker).
    vhost: str | None = None

    def render(self) -> str:
        if self.wait_on == "sync":
            kind = "ctx.sleep"
        else:
            kinds = [f"{n} {_SAID[k]}" for k, n in self.waited_on.items()]
            kind = "async def, " + ", ".join(kinds)
        kind += ", on the run loop" if self.run_loop else ""
        settings = " ".join(f"{k}={v}" for k, v in self.settings.items())
        by_kind = ""
        if len(self.cancel_max_by_kind) > 1:
            worst = (f"{kind} {s:.2f}" for kind, s in self.cancel_max_by_kind.items())
            by_kind = "; " + ", ".join(worst)
        lines = [
            f"{self.runs} waiting runs ({kind}) on one io worker process, {self.broker} as broker",
            f"  settings: {settings}; the waits end after {self.seconds:g} s",
            f"  all created after         {self.created_after_s:9.2f} s",
            f"  all running after         {self.running_after_s:9.2f} s"
            + ("" if self.held == self.runs else f" (only {self.held} of {self.runs})"),
        ]
        if self.http_held is not None:
            lines.append(f"  HTTP requests held        {self.http_held:9d} (by the slow server)")
        lines += [
            f"  a 0.3 s tool alongside    {self.short_tool_s:9.2f} s",
            f"  cancel -> run ended, max  {self.cancel_max_s:9.2f} s (of {CANCELS}{by_kind})",
            f"  worker PSS                {self.worker_pss_mib:9.1f} MiB",
            f"  worker threads            {self.worker_threads:9d}",
            f"  Redis clients             {self.redis_clients:9d}",
        ]
        if self.failures:
            lines.append(f"  failed requests           {self.failures:9d}")
        for part in (self.renewals, self.handover):
            if part is not None:
                lines.append(part.render())
        return "\n".join(lines)

    @property
    def ok(self) -> bool:
        """Every run started, no request failed, and after a kill every open run was handed
        over and none was lost or failed."""
        if (handover := self.handover) is not None and (
            handover.lost or handover.failed or handover.handed_over < handover.open_at_kill
        ):
            return False
        return self.held == self.runs and not self.failures


def kinds_of(wait_on: str) -> tuple[str, ...]:
    return MIX if wait_on == "mix" else (wait_on,)


def waiting(
    runs: int,
    workdir: Path,
    wait_on: str = "sync",
    *,
    run_loop: bool = False,
    seconds: float = 120.0,
    window_s: float = 0.0,
    kill: bool = False,
    knobs: Mapping[str, str] | None = None,
    broker: str = "redis",
) -> Waiting:
    """``runs`` tools waiting at once in one io worker process (see the module's doc);
    ``window_s``: each window of the renewals' measurement (0: not measured); ``broker``:
    ``rabbitmq`` for a vhost of its own on the machine's RabbitMQ (deleted after)."""
    kinds = kinds_of(wait_on)
    vhost = rabbitmq.create_vhost(rabbitmq.BENCH_PREFIX) if broker == "rabbitmq" else None
    stack = Stack(
        "waiting",
        workdir,
        tools=f"{DEFAULT_TOOLS},{bench_tools.MODULE}",
        broker_url=vhost.url if vhost is not None else "",
    )
    stack.knobs.update({**KNOBS, **(knobs or {})})
    pool = _pool_env(runs, run_loop)
    admin: redis.Redis | None = None
    try:
        stack.start_redis()
        stack.start_web()
        server = start_slow_server(stack) if "http" in kinds else None
        worker = start_worker(stack, "waiting", pool)
        # A tool that asks may be created only by a client that can answer (elicitation).
        load = Load(stack.url(), capabilities={"elicitation": {"form": {}}})
        specs = specs_of(kinds, runs, seconds, server)
        admin = redis.Redis.from_url(stack.redis_url, decode_responses=True)
        created, created_s, started_s, held = asyncio.run(wait_many(load, specs, admin))
        ids = [task_id for task_id, _ in created]
        threads = thread_count(process_tree(worker.popen.pid))
        http_runs = sum(1 for _, tool in created if tool == ASYNC_HTTP)
        http_held = requests_held(server, http_runs) if server is not None else None
        short = TOOL if kinds == ("sync",) else ASYNC_SLEEP
        short_s = asyncio.run(short_tool(load, short))
        renewals = None
        if window_s > 0:
            period = renewal_period(stack)
            renewals = measure_renewals(stack.redis_url, period, window_s)
        cancelled = in_turn(created, CANCELS)
        cancels = asyncio.run(cancel_some(load, cancelled, worker))
        tool_of = dict(created)
        cancel_by_kind: dict[str, float] = {}
        for task_id, took in zip(cancelled, cancels, strict=True):
            kind = _KIND_OF[tool_of[task_id]]
            cancel_by_kind[kind] = max(cancel_by_kind.get(kind, 0.0), took)
        pss = pss_mib(process_tree(worker.popen.pid))
        clients = int(admin.info("clients")["connected_clients"])
        handover = None
        if kill:
            answer_ids = [i for i, tool in created if tool == ASYNC_ANSWER]
            handover = hand_over(stack, worker, pool, admin, load, ids, answer_ids, seconds)
    finally:
        if admin is not None:
            admin.close()
        stack.close()
        if vhost is not None:
            rabbitmq.delete_vhost(vhost)
    return Waiting(
        runs=runs,
        running_after_s=started_s,
        created_after_s=created_s,
        short_tool_s=short_s,
        cancel_max_s=max(cancels, default=0.0),
        cancel_max_by_kind=cancel_by_kind,
        worker_pss_mib=pss,
        redis_clients=clients,
        tool=",".join(KINDS[k] for k in kinds),
        worker_threads=threads,
        run_loop=run_loop,
        wait_on=wait_on,
        waited_on=dict(Counter(_KIND_OF[tool] for _, tool in created)),
        seconds=seconds,
        held=held,
        http_held=http_held,
        settings=shown_settings(stack.knobs, pool),
        renewals=renewals,
        handover=handover,
        failures=load.failures,
        broker=broker,
        vhost=vhost.name if vhost is not None else None,
    )


# -- the stack ------------------------------------------------------------------------------------
def _pool_env(runs: int, run_loop: bool) -> dict[str, str]:
    """The worker's own settings: a place on the run loop for every run, else no run loop and
    a pool thread for every run."""
    places = str(runs + 100)
    if run_loop:
        return {"MCPQ_ASYNC_RUNS": places}
    return {"MCPQ_ASYNC_RUNS": "0", "MCPQ_IO_CONCURRENCY": places}


# -- the command ----------------------------------------------------------------------------------
def _knob(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"not NAME=VALUE: {text!r}")
    return name, value


def _terminated(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcpq.ops.bench.waiting_runs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=1000, help="waiting runs (1000)")
    parser.add_argument("--wait-on", choices=WAIT_ON, default="mix", help="what on (mix)")
    parser.add_argument(
        "--run-loop",
        action="store_true",
        help="async runs on the worker's run loop (MCPQ_ASYNC_RUNS), not a thread each",
    )
    parser.add_argument("--seconds", type=float, default=120.0, help="each run's wait (120)")
    parser.add_argument(
        "--window", type=float, default=5.0, help="renewals: each window, s (5; 0: skip)"
    )
    parser.add_argument("--kill", action="store_true", help="then SIGKILL the worker")
    parser.add_argument(
        "--broker",
        choices=("redis", "rabbitmq"),
        default="redis",
        help="Celery's broker: the task store's Redis (redis), or a RabbitMQ vhost of the "
        "run's own on the machine's RabbitMQ (rabbitmq, deleted after)",
    )
    parser.add_argument(
        "--knob",
        type=_knob,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting of the stack (repeatable), e.g. MCPQ_LEASE_S=2",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object")
    args = parser.parse_args(argv)
    if args.broker == "rabbitmq" and (why := rabbitmq.unavailable()):
        parser.error(f"--broker rabbitmq: {why}")
    if args.wait_on == "sync" and args.run_loop:
        parser.error("--run-loop holds async runs only (--wait-on sync runs a sync tool)")
    # A SIGTERM (a `timeout`, a CI job stopped) unwinds like an exception: the stack's `close`
    # stops its processes, which would otherwise outlive this one.
    signal.signal(signal.SIGTERM, _terminated)
    workdir = Path(tempfile.mkdtemp(prefix="mcpq-bench-waiting-"))
    try:
        result = waiting(
            args.runs,
            workdir,
            args.wait_on,
            run_loop=args.run_loop,
            seconds=args.seconds,
            window_s=args.window,
            kill=args.kill,
            knobs=dict(args.knob),
            broker=args.broker,
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        print(json.dumps(as_json(result)))
    else:
        print(result.render())
    return 0 if result.ok else 1


def as_json(result: Waiting) -> dict[str, Any]:
    """``asdict``, and the counts derived from the handover's."""
    out = asdict(result)
    if (handover := result.handover) is not None:
        out["handover"].update(ran_twice=handover.ran_twice, ran_more=handover.ran_more)
    return out


if __name__ == "__main__":
    sys.exit(main())
