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
(``MCPQ_ASYNC_RUNS=0``, ``MCPQ_IO_CONCURRENCY`` = runs + 100). Measured, in order:

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
import contextlib
import dataclasses
import itertools
import json
import re
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import redis

from mcpq.ops.bench import bench_tools
from mcpq.ops.bench.bench_tools import ASYNC_ANSWER, ASYNC_HTTP, ASYNC_SLEEP
from mcpq.ops.bench.load import TOOL, Load
from mcpq.ops.bench.memory import process_tree, pss_mib
from mcpq.ops.bench.rawhttp import RawClient
from mcpq.ops.bench.renewals import Renewals
from mcpq.ops.bench.renewals import measure as measure_renewals
from mcpq.ops.harness.children import Child
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.logs import task_hash
from mcpq.shared.settings import DEFAULT_TOOLS, Settings
from mcpq.shared.store import Keys, task_ref

#: The tool each kind of wait runs.
KINDS = {"sleep": ASYNC_SLEEP, "answer": ASYNC_ANSWER, "http": ASYNC_HTTP, "sync": TOOL}
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
CLIENTS = 16
ENDED = frozenset({"completed", "failed", "cancelled"})
#: A run waiting for an answer holds its place on the worker for ``MCPQ_INPUT_HOLD_S`` (30 s by
#: default), then parks: it lets go, and the task waits in Redis alone. The runs measured here
#: wait while held, so the hold outlasts the benchmark; on the run loop a held run costs a
#: coroutine, not a thread, which is what an operator holding many would weigh too.
KNOBS = {"MCPQ_INPUT_HOLD_S": "3600"}
#: The settings printed with the result (the stack's, else mcpq's defaults).
SHOWN = (
    "MCPQ_ASYNC_RUNS",
    "MCPQ_LEASE_S",
    "MCPQ_SWEEP_INTERVAL_S",
    "MCPQ_INPUT_HOLD_S",
    "MCPQ_MAX_RUNS",
    "MCPQ_CANCEL_GRACE_S",
    "MCPQ_LOOP_STALL_S",
)
_ACCEPT = {"action": "accept", "content": {"ok": True}}


@dataclass
class Handover:
    """``--kill``: the worker's process group SIGKILLed once all ran, and what became of them."""

    #: Processes of the worker's group killed (the Celery main process, any children).
    killed_processes: int
    #: Tasks still open at the kill (the cancelled ones had ended, and any whose wait was over).
    open_at_kill: int
    ended_before_kill: int
    #: Seconds from the kill: the new worker beating, its first claim of a task of the dead one,
    #: every open task claimed again (``None``: not all within the time allowed), all ended.
    worker_up_s: float
    first_claim_s: float | None
    handed_over_s: float | None
    handed_over: int
    ended_s: float | None
    #: Runs of the answer kind answered (tasks/update) after the handover.
    answered: int
    completed: int
    cancelled: int
    failed: int
    #: Tasks that never ended (not completed, cancelled or failed) in the time allowed.
    lost: int
    #: Tasks by their count of runs (``"1"``, ``"2"``...): a run twice is one replayed after the
    #: kill; three is one run again after that.
    runs: dict[str, int]
    #: The new worker's PSS and threads once every open task was claimed again, and the runs
    #: it held then (fewer than ``handed_over`` when some had ended already).
    worker_pss_mib: float
    worker_threads: int
    held_after: int

    @property
    def ran_twice(self) -> int:
        return self.runs.get("2", 0)

    @property
    def ran_more(self) -> int:
        return sum(n for count, n in self.runs.items() if int(count) > 2)

    def render(self) -> str:
        def s(value: float | None) -> str:
            return "     none" if value is None else f"{value:9.2f}"

        return "\n".join(
            [
                "  SIGKILL of the worker's process group, a new worker started at once",
                f"    processes killed          {self.killed_processes:9d}",
                f"    open at the kill          {self.open_at_kill:9d}"
                f" (ended before it: {self.ended_before_kill})",
                f"    new worker beating after  {self.worker_up_s:9.2f} s",
                f"    first claimed again after {s(self.first_claim_s)} s",
                f"    all handed over after     {s(self.handed_over_s)} s"
                f" ({self.handed_over} of {self.open_at_kill})",
                f"    new worker PSS then       {self.worker_pss_mib:9.1f} MiB"
                f" ({self.worker_threads} threads, {self.held_after} runs held)",
                f"    answered after handover   {self.answered:9d}",
                f"    all ended after           {s(self.ended_s)} s",
                f"    completed                 {self.completed:9d}",
                f"    cancelled (before kill)   {self.cancelled:9d}",
                f"    failed                    {self.failed:9d}",
                f"    lost (never ended)        {self.lost:9d}",
                f"    ran twice                 {self.ran_twice:9d}"
                f" (more than twice: {self.ran_more}; once: {self.runs.get('1', 0)})",
            ]
        )


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
            f"{self.runs} waiting runs ({kind}) on one io worker process",
            f"  settings: {settings}; the waits end after {self.seconds:g} s",
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
) -> Waiting:
    """``runs`` tools waiting at once in one io worker process (see the module's doc);
    ``window_s``: each window of the renewals' measurement (0: not measured)."""
    kinds = kinds_of(wait_on)
    stack = Stack("waiting", workdir, tools=f"{DEFAULT_TOOLS},{bench_tools.MODULE}")
    stack.knobs.update({**KNOBS, **(knobs or {})})
    pool = _pool_env(runs, run_loop)
    admin: redis.Redis | None = None
    try:
        stack.start_redis()
        stack.start_web()
        server = _start_slow_server(stack) if "http" in kinds else None
        worker = _start_worker(stack, "waiting", pool)
        # A tool that asks may be created only by a client that can answer (elicitation).
        load = Load(stack.url(), capabilities={"elicitation": {"form": {}}})
        specs = _specs(kinds, runs, seconds, server)
        admin = redis.Redis.from_url(stack.redis_url, decode_responses=True)
        created, started_s, held = asyncio.run(_wait_many(load, specs, admin))
        ids = [task_id for task_id, _ in created]
        threads = _threads(process_tree(worker.popen.pid))
        http_runs = sum(1 for _, tool in created if tool == ASYNC_HTTP)
        http_held = _http_held(server, http_runs) if server is not None else None
        short = TOOL if kinds == ("sync",) else ASYNC_SLEEP
        short_s = asyncio.run(_short_tool(load, short))
        renewals = None
        if window_s > 0:
            period = _period(stack)
            renewals = measure_renewals(stack.redis_url, period, window_s)
        cancelled = _in_turn(created, CANCELS)
        cancels = asyncio.run(_cancel_some(load, cancelled, worker))
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
            handover = _hand_over(stack, worker, pool, admin, load, ids, answer_ids, seconds)
    finally:
        if admin is not None:
            admin.close()
        stack.close()
    return Waiting(
        runs=runs,
        running_after_s=started_s,
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
        settings=_settings(stack.knobs, pool),
        renewals=renewals,
        handover=handover,
        failures=load.failures,
    )


# -- the stack ------------------------------------------------------------------------------------
def _pool_env(runs: int, run_loop: bool) -> dict[str, str]:
    """The worker's own settings: a place on the run loop for every run, else no run loop and
    a pool thread for every run."""
    places = str(runs + 100)
    if run_loop:
        return {"MCPQ_ASYNC_RUNS": places}
    return {"MCPQ_ASYNC_RUNS": "0", "MCPQ_IO_CONCURRENCY": places}


def _start_worker(stack: Stack, node: str, pool: Mapping[str, str]) -> Child:
    """``mcpq worker`` (io pool); returns once it beats in Redis."""
    worker = stack.spawn_pool("mcpq", node, concurrency=None, **pool)
    wait_until(
        lambda: any(n.startswith(f"{node}@") for n in stack.stats().workers),
        timeout=60,
        interval=0.1,
        message=f"worker {node}",
    )
    return worker


def _settings(knobs: Mapping[str, str], pool: Mapping[str, str]) -> dict[str, str]:
    defaults = {
        str(f.metadata["env"]): str(f.default)
        for f in dataclasses.fields(Settings)
        if "env" in f.metadata
    }
    shown = {**knobs, **pool}
    names = [*SHOWN, *(k for k in shown if k not in SHOWN and k.startswith("MCPQ_"))]
    if "MCPQ_IO_CONCURRENCY" in pool:
        names.insert(0, "MCPQ_IO_CONCURRENCY")
    return {name: shown.get(name, defaults.get(name, "")) for name in dict.fromkeys(names)}


def _period(stack: Stack) -> float:
    """The lease keeper's renewal period (``LeaseKeeper``): min(max(lease / 3, 0.05), 0.5)."""
    lease_s = float(stack.knobs.get("MCPQ_LEASE_S", Settings.lease_s))
    return min(max(lease_s / 3, 0.05), 0.5)


def _start_slow_server(stack: Stack) -> str:
    """The slow HTTP server, a child of the stack; its base URL."""
    argv = [sys.executable, "-m", "mcpq.ops.bench.slow_http"]
    child = stack.spawn("slow-http", argv)
    found = wait_until(
        lambda: re.search(r"listening on (http://\S+)", child.log()),
        timeout=30,
        message="the slow HTTP server",
    )
    return found.group(1)


def _http_held(server: str, runs: int) -> int:
    """The requests the slow server holds once it holds ``runs`` (a run is held from its claim,
    and sends its GET a moment later), or after 60 s."""

    def holding() -> int:
        return int(httpx.get(f"{server}/stats", timeout=10).json()["holding"])

    with contextlib.suppress(TimeoutError):
        wait_until(lambda: holding() >= runs, timeout=60, interval=0.1, message="held requests")
    return holding()


def _threads(pids: list[int]) -> int:
    """The threads of processes ``pids``, together."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{pid}/status").read_text()
            total += int(status.split("Threads:")[1].split()[0])
    return total


# -- creating and waiting -------------------------------------------------------------------------
Spec = tuple[str, dict[str, Any]]  # a tool and its arguments


def _specs(kinds: Sequence[str], runs: int, seconds: float, server: str | None) -> list[Spec]:
    """``runs`` creates, the kinds taking turns (so each kind is spread over the whole run). The
    async sleeps and HTTP calls wait until ``seconds`` from now (a run replayed after a kill
    waits what is left: all end about then, however long the handover); ``slow_compute`` waits
    ``seconds`` from each run's start."""
    until = time.time() + seconds
    made: list[Spec] = []
    for i in range(runs):
        kind = kinds[i % len(kinds)]
        if kind == "answer":
            made.append((ASYNC_ANSWER, {}))
        elif kind == "http":
            made.append((ASYNC_HTTP, {"url": f"{server}/hold", "until": until}))
        elif kind == "sleep":
            made.append((ASYNC_SLEEP, {"until": until}))
        else:
            made.append((KINDS[kind], {"seconds": seconds}))
    return made


async def _create(load: Load, specs: list[Spec], clients: int) -> list[tuple[str, str]]:
    """Every spec created by ``clients`` concurrent keep-alive clients; (task id, tool) of each
    created, in the order of their answers."""
    created: list[tuple[str, str]] = []
    todo = iter(specs)  # one list, shared: each client takes the next spec

    async def client() -> None:
        async with RawClient(load.url) as http:
            for tool, arguments in todo:
                params = {"name": tool, "arguments": arguments}
                if (result := await load.call(http, "tools/call", params, tool)) is not None:
                    created.append((str(result["taskId"]), tool))

    await asyncio.gather(*(client() for _ in range(clients)))
    return created


def _fields(admin: redis.Redis, ids: Sequence[str], *names: str) -> list[list[str | None]]:
    """Fields ``names`` of each task's hash (one pipeline)."""
    keys = Keys()
    pipe = admin.pipeline(transaction=False)
    for task_id in ids:
        pipe.hmget(keys.task(task_ref(task_id)), list(names))
    return list(pipe.execute())


def _running(admin: redis.Redis, ids: Sequence[str]) -> int:
    """How many of the tasks ``ids`` a run holds (a lease set by its claim)."""
    return sum(1 for (lease,) in _fields(admin, ids, "lease") if lease and int(lease) > 0)


async def _wait_many(
    load: Load, specs: list[Spec], admin: redis.Redis
) -> tuple[list[tuple[str, str]], float, int]:
    """The tasks created and then held by a run each: (task id, tool) of each, the seconds from
    the first create until all were held (or 300 s passed), and how many were then."""
    started = time.monotonic()
    created = await _create(load, specs, CLIENTS)
    ids = [task_id for task_id, _ in created]
    while (held := _running(admin, ids)) < len(specs) and time.monotonic() - started < 300:
        await asyncio.sleep(0.1)
    return created, time.monotonic() - started, held


async def _short_tool(load: Load, tool: str) -> float:
    """A 0.3 s task created now: the seconds until it was seen completed."""
    sent = time.monotonic()
    async with RawClient(load.url) as http:
        params = {"name": tool, "arguments": {"seconds": 0.3}}
        short = await load.call(http, "tools/call", params, tool)
        if short is not None:
            await load.until_done(http, str(short["taskId"]), 0.01)
    return time.monotonic() - sent


def _in_turn(created: Sequence[tuple[str, str]], count: int) -> list[str]:
    """``count`` of the tasks, each tool's in turn (in the order they were created)."""
    by_tool: dict[str, list[str]] = {}
    for task_id, tool in created:
        by_tool.setdefault(tool, []).append(task_id)
    turns = itertools.zip_longest(*by_tool.values())
    return [task_id for turn in turns for task_id in turn if task_id is not None][:count]


async def _cancel_some(load: Load, ids: list[str], worker: Child) -> list[float]:
    """Cancel each; how long until the worker logged the end of its run (10 s at most)."""
    took = []
    async with httpx.AsyncClient(timeout=30) as http:
        for task_id in ids:
            needle = f'"task":"{task_hash(task_ref(task_id))}"'
            # Only what the worker logs from now on is read: its whole log (lines for each of
            # thousands of runs), read every 10 ms, would take the CPU the worker needs.
            offset = worker.log_path.stat().st_size
            sent = time.monotonic()
            await load.call(http, "tasks/cancel", {"taskId": task_id}, task_id)
            while time.monotonic() - sent < 10:
                if any(needle in line and '"cancelled"' in line for line in _lines(worker, offset)):
                    break
                await asyncio.sleep(0.01)
            took.append(time.monotonic() - sent)
    return took


def _lines(worker: Child, offset: int) -> list[str]:
    """The lines the worker logged past byte ``offset``."""
    with open(worker.log_path, "rb") as log:
        log.seek(offset)
        return log.read().decode("utf-8", errors="replace").splitlines()


# -- the kill -------------------------------------------------------------------------------------
def _hand_over(
    stack: Stack,
    worker: Child,
    pool: Mapping[str, str],
    admin: redis.Redis,
    load: Load,
    ids: list[str],
    answer_ids: list[str],
    seconds: float,
) -> Handover:
    """SIGKILL ``worker``'s group, start another worker, and follow every task to its end."""
    before = dict(zip(ids, _fields(admin, ids, "status", "gen"), strict=True))
    open_ids = [i for i, (status, _) in before.items() if status not in ENDED]
    gen_at_kill = {i: int(before[i][1] or 0) for i in open_ids}
    killed = len(process_tree(worker.popen.pid))
    killed_at = stack.kill_child(worker)
    worker = _start_worker(stack, "waiting-2", pool)
    worker_up_s = time.monotonic() - killed_at
    # The sweeper sends 100 runs per sweep (every MCPQ_SWEEP_INTERVAL_S) once their leases
    # lapsed: time enough for that, and some.
    deadline = time.monotonic() + 60 + len(open_ids) / 20
    first_s = handed_s = None
    claimed = 0
    while time.monotonic() < deadline:
        gens = _fields(admin, open_ids, "gen")
        again = zip(open_ids, gens, strict=True)
        claimed = sum(1 for i, (gen,) in again if int(gen or 0) > gen_at_kill[i])
        if claimed and first_s is None:
            first_s = time.monotonic() - killed_at
        if claimed == len(open_ids):
            handed_s = time.monotonic() - killed_at
            break
        time.sleep(0.25)
    tree = process_tree(worker.popen.pid)
    pss, threads, held = pss_mib(tree), _threads(tree), _running(admin, open_ids)
    still_open = set(open_ids)
    answered = asyncio.run(_answer_all(load, [i for i in answer_ids if i in still_open]))
    ended_s = None
    deadline = time.monotonic() + seconds + 60 + len(open_ids) / 20
    while time.monotonic() < deadline:
        if all(status in ENDED for (status,) in _fields(admin, ids, "status")):
            ended_s = time.monotonic() - killed_at
            break
        time.sleep(0.5)
    final = _fields(admin, ids, "status", "runs")
    statuses = Counter(status for status, _ in final)
    runs = Counter(str(int(n or 0)) for _, n in final)
    return Handover(
        killed_processes=killed,
        open_at_kill=len(open_ids),
        ended_before_kill=sum(
            1 for status, _ in before.values() if status in ENDED and status != "cancelled"
        ),
        worker_up_s=worker_up_s,
        first_claim_s=first_s,
        handed_over_s=handed_s,
        handed_over=claimed,
        ended_s=ended_s,
        answered=answered,
        completed=statuses["completed"],
        cancelled=statuses["cancelled"],
        failed=statuses["failed"],
        lost=sum(n for status, n in statuses.items() if status not in ENDED),
        runs=dict(sorted(runs.items(), key=lambda item: int(item[0]))),
        worker_pss_mib=pss,
        worker_threads=threads,
        held_after=held,
    )


async def _answer_all(load: Load, ids: list[str]) -> int:
    """Answer each task's outstanding questions (``tasks/get``, then ``tasks/update``), as a
    client would; a task not yet asking is tried again in a later pass. How many were answered."""
    todo, answered = list(ids), 0
    deadline = time.monotonic() + 60 + len(ids) / 20

    async def client(http: RawClient, retry: list[str]) -> None:
        nonlocal answered
        while todo:
            task_id = todo.pop()
            task = await load.call(http, "tasks/get", {"taskId": task_id}, task_id)
            asked = (task or {}).get("inputRequests") or {}
            if (task or {}).get("status") != "input_required" or not asked:
                retry.append(task_id)
                continue
            responses = {key: _ACCEPT for key in asked}
            params = {"taskId": task_id, "inputResponses": responses}
            if await load.call(http, "tasks/update", params, task_id) is not None:
                answered += 1

    while todo and time.monotonic() < deadline:
        retry: list[str] = []
        async with contextlib.AsyncExitStack() as up:
            https = [await up.enter_async_context(RawClient(load.url)) for _ in range(CLIENTS)]
            await asyncio.gather(*(client(http, retry) for http in https))
        if retry:
            todo.extend(retry)
            await asyncio.sleep(0.5)
    return answered


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
        "--knob",
        type=_knob,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting of the stack (repeatable), e.g. MCPQ_LEASE_S=2",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object")
    args = parser.parse_args(argv)
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
