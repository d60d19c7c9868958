"""The benchmarks' load generator: MCP clients (``mcpq.ops.bench.load``) on asyncio HTTP
connections, spread over processes, and what one measuring run reports (``Result``,
``measure``; the Redis costs per task come from ``mcpq.ops.bench.costs``). Used by
``mcpq.ops.bench.throughput`` against mcpq and its peer, both up at once and measured phase by phase
in turn."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import statistics
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import uvloop

from mcpq.ops.bench.costs import Costs, per_task_costs
from mcpq.ops.bench.load import Load
from mcpq.ops.bench.memory import process_tree, pss_mib
from mcpq.ops.bench.rawhttp import RawClient
from mcpq.ops.harness.children import Child
from mcpq.ops.harness.stack import Stack


@dataclass
class Result:
    clients: int
    created_per_s: float
    drained_per_s: float
    completed_per_s: float
    e2e_p50_ms: float
    e2e_p99_ms: float
    get_p50_ms: float
    get_p99_ms: float
    pss_mib: float
    redis_commands_per_task: float
    client_commands_per_task: float
    round_trips_per_task: float
    background_commands_per_s: float
    commands_by_name: dict[str, float]
    failures: int
    #: CPU time the hypervisor took from this machine during the measurement (``/proc/stat``
    #: steal, all CPUs): on a shared VM, phases with steal are slower for reasons not ours.
    steal_s: float = 0.0
    #: Where the 1-client end to end goes, seen by the client: its ``tools/call`` and
    #: ``tasks/get`` round trips (p50), and how many ``tasks/get`` each task took (share of
    #: tasks by count): e2e ≈ call + polls * get + (polls - 1) * 2 ms.
    e2e_call_p50_ms: float = 0.0
    e2e_get_p50_ms: float = 0.0
    e2e_polls: dict[int, float] = field(default_factory=dict)
    #: Seen by the server (mcpq only: its task records' Redis-clock times, ms resolution, a
    #: mean): from the create script to the finish script, the worker's part of the e2e.
    e2e_run_mean_ms: float | None = None

    def render(self, title: str = "mcpq") -> str:
        return "\n".join(
            [
                f"{title}, no-op tool, {self.clients} clients unless noted",
                f"  created/s                 {self.created_per_s:9.1f}",
                f"  drained/s (that backlog)  {self.drained_per_s:9.1f}",
                f"  completed/s (create+poll) {self.completed_per_s:9.1f}",
                f"  end to end, 1 client      p50 {self.e2e_p50_ms:6.2f} ms   "
                f"p99 {self.e2e_p99_ms:6.2f} ms",
                *self._breakdown(),
                f"  tasks/get                 p50 {self.get_p50_ms:6.2f} ms   "
                f"p99 {self.get_p99_ms:6.2f} ms",
                f"  PSS of web + worker       {self.pss_mib:9.1f} MiB",
                f"  Redis commands per task   {self.redis_commands_per_task:9.1f}",
                f"  of them sent by clients   {self.client_commands_per_task:9.1f}",
                f"  round trips per task      {self.round_trips_per_task:9.1f}",
                f"  (idle background: {self.background_commands_per_s:.0f} commands/s, "
                "not counted)",
                "  by command: "
                + ", ".join(f"{name} {n:g}" for name, n in self.commands_by_name.items()),
                f"  failed requests           {self.failures:9d}",
                f"  host steal time           {self.steal_s:9.2f} s"
                + ("  (noisy: latencies may be the host's)" if self.steal_s >= 0.1 else ""),
            ]
        )

    def _breakdown(self) -> list[str]:
        polls = ", ".join(
            f"{n}: {share:.0%}" if share >= 0.01 else f"{n}: <1%"
            for n, share in sorted(self.e2e_polls.items())
        )
        lines = [
            f"    of which tools/call p50 {self.e2e_call_p50_ms:.2f} ms, tasks/get p50 "
            f"{self.e2e_get_p50_ms:.2f} ms; tasks/get per task {polls}"
        ]
        if self.e2e_run_mean_ms is not None:
            lines.append(f"    create -> finish in Redis   {self.e2e_run_mean_ms:.2f} ms (mean)")
        return lines


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def _clients(
    url: str, kind: str, clients: int, stop_at: float, targets: list[str]
) -> dict[str, Any]:
    """``clients`` concurrent clients of one load-generator process doing ``kind`` until
    ``stop_at`` (wall clock): ``create`` back to back, ``cycle`` (create, then poll every
    10 ms to the end) or ``get`` (poll ``targets``)."""
    load = Load(url)
    created: list[str] = []
    gets: list[float] = []
    done = 0

    async def one(i: int) -> None:
        nonlocal done
        async with RawClient(url) as http:  # one connection per client
            while time.time() < stop_at:
                if kind == "create":
                    if (task_id := await load.create(http)) is not None:
                        created.append(task_id)
                elif kind == "cycle":
                    if (task_id := await load.create(http)) is not None:
                        await load.until_done(http, task_id, 0.01)
                        done += 1
                else:
                    sent = time.perf_counter()
                    await load.status(http, targets[i % len(targets)])
                    gets.append((time.perf_counter() - sent) * 1000)

    await asyncio.gather(*(one(i) for i in range(clients)))
    return {"created": created, "done": done, "gets": gets, "failures": load.failures}


def _generator_process(
    url: str, kind: str, clients: int, stop_at: float, targets: list[str]
) -> dict[str, Any]:
    uvloop.install()  # the generator's own loop as light as the servers'
    return asyncio.run(_clients(url, kind, clients, stop_at, targets))


def spread(
    pool: ProcessPoolExecutor,
    procs: int,
    url: str,
    kind: str,
    clients: int,
    seconds: float,
    targets: list[str] = [],  # noqa: B006 (never mutated)
) -> dict[str, Any]:
    """``clients`` spread over the generator's processes (one Python process alone, sharing the
    machine with the servers, would be what limits the rates)."""
    shares = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    stop_at = time.time() + seconds + 1.0  # every process starts before the clock runs
    futures = [pool.submit(_generator_process, url, kind, n, stop_at, targets) for n in shares if n]
    parts = [f.result() for f in futures]
    return {
        "created": [t for p in parts for t in p["created"]],
        "done": sum(p["done"] for p in parts),
        "gets": [ms for p in parts for ms in p["gets"]],
        "failures": sum(p["failures"] for p in parts),
    }


@dataclass
class Target:
    """One deployment under test: its stack (its private Redis), its MCP endpoint, its server
    processes (for PSS) and, for mcpq, how to read its own create → finish time (``run_ms``)."""

    stack: Stack
    url: str
    servers: list[Child]
    run_ms: Callable[[list[str]], float | None] | None = None


class _Phases:
    """What the phases found for one target, and the host's steal during them."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.load = Load(target.url)
        self.ids: list[str] = []
        self.created_per_s = self.drained_per_s = self.completed_per_s = 0.0
        self.e2e = EndToEnd()
        self.gets: list[float] = []
        self.costs: Costs | None = None
        self.steal_s = 0.0


def _interleaved(found: list[_Phases], phase: Callable[[_Phases], None], turn: int) -> None:
    """One phase against every target in turn, the first one alternating from phase to phase:
    a drift of the host (a noisy neighbour, a slower stretch) falls on all of them alike."""
    order = found[turn % len(found) :] + found[: turn % len(found)]
    for one in order:
        stolen = steal_s()
        phase(one)
        one.steal_s += steal_s() - stolen


def _phases(
    found: list[_Phases],
    clients: int,
    seconds: float,
    tasks: int,
    procs: int,
    floor: _Phases | None = None,
) -> None:
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(procs, mp_context=context) as pool:

        def warm(one: _Phases) -> None:
            # The generator processes start, the server's connections and caches fill.
            spread(pool, procs, one.load.url, "create", procs, 0.0)

        def create(one: _Phases) -> None:
            started = time.time()
            created = spread(pool, procs, one.load.url, "create", clients, seconds)
            one.ids = created["created"]
            one.created_per_s = len(one.ids) / (time.time() - started)
            last = one.ids[-clients:]
            one.drained_per_s = asyncio.run(_drain(one.load, last, len(one.ids), started))
            one.load.failures += created["failures"]

        def cycle(one: _Phases) -> None:
            started = time.time()
            cycled = spread(pool, procs, one.load.url, "cycle", clients, seconds)
            one.completed_per_s = cycled["done"] / (time.time() - started)
            one.load.failures += cycled["failures"]

        def one_client(one: _Phases) -> None:
            one.e2e = asyncio.run(end_to_end(one.load, tasks))

        def poll(one: _Phases) -> None:
            targets = one.ids[: clients * 4] or ["none"]
            polled = spread(pool, procs, one.load.url, "get", clients, seconds, targets)
            one.gets = polled["gets"]
            one.load.failures += polled["failures"]

        for turn, phase in enumerate((warm, create, cycle, one_client, poll)):
            # The floor takes its turn in the 1-client phase alone (it runs no tasks to count or
            # poll), after warming up with the rest.
            also = [floor] if floor is not None and phase in (warm, one_client) else []
            _interleaved(found + also, phase, turn)

    def costs(one: _Phases) -> None:
        one.costs = asyncio.run(per_task_costs(one.load, tasks, one.target.stack.redis_url))

    _interleaved(found, costs, 5)


async def _drain(load: Load, last: list[str], total: int, started: float) -> float:
    """Tasks completed per second, from the first create to the last completion."""
    async with RawClient(load.url) as http:
        for task_id in last:  # the last ones end last (first in, first out)
            await load.until_done(http, task_id, 0.01)
    return total / (time.time() - started)


@dataclass
class EndToEnd:
    """The 1-client phase, per task: sent → ``completed`` seen, its ``tools/call`` round trip,
    its ``tasks/get`` round trips; and the ids."""

    e2e: list[float] = field(default_factory=list)
    calls: list[float] = field(default_factory=list)
    gets: list[list[float]] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)

    @classmethod
    def pooled(cls, runs: list[EndToEnd]) -> EndToEnd:
        """Several runs' tasks as one."""
        out = cls()
        for run in runs:
            out.e2e += run.e2e
            out.calls += run.calls
            out.gets += run.gets
            out.ids += run.ids
        return out

    def call_p50_ms(self) -> float:
        return statistics.median(self.calls or [0.0])

    def get_p50_ms(self) -> float:
        return statistics.median([ms for each in self.gets for ms in each] or [0.0])

    def polls(self) -> dict[int, float]:
        """The share of tasks by how many ``tasks/get`` they took."""
        counted = Counter(len(each) for each in self.gets)
        return {n: count / len(self.gets) for n, count in sorted(counted.items())}


@dataclass
class OneClient:
    """One deployment's 1-client phase (``end_to_end``), every round pooled (ms)."""

    e2e_p50_ms: float
    e2e_p99_ms: float
    call_p50_ms: float
    get_p50_ms: float
    #: share of tasks by how many ``tasks/get`` they took
    polls: dict[int, float]
    failures: int

    @classmethod
    def of(cls, runs: list[EndToEnd], failures: int) -> OneClient:
        pooled = EndToEnd.pooled(runs)
        e2e = pooled.e2e or [0.0]
        return cls(
            statistics.median(e2e),
            percentile(e2e, 0.99),
            pooled.call_p50_ms(),
            pooled.get_p50_ms(),
            pooled.polls(),
            failures,
        )


async def end_to_end(load: Load, tasks: int) -> EndToEnd:
    """One client: ``tools/call`` sent → ``completed`` seen, polling every 2 ms."""
    out = EndToEnd()
    async with RawClient(load.url) as http:
        await load.create(http)
        for _ in range(tasks):
            sent = time.perf_counter()
            one = await load.create(http)
            if one is None:
                continue
            called = time.perf_counter()
            gets = await load.until_done(http, one, 0.002)
            if gets is None:
                continue
            out.e2e.append((time.perf_counter() - sent) * 1000)
            out.calls.append((called - sent) * 1000)
            out.gets.append(gets)
            out.ids.append(one)
    return out


def measure(
    targets: list[Target],
    clients: int,
    seconds: float,
    tasks: int,
    procs: int,
    floor: Target | None = None,
) -> tuple[list[Result], OneClient | None]:
    """Every phase against every target, interleaved phase by phase (``_interleaved``): one
    ``Result`` per target, in order. PSS of each target's ``servers`` process trees. ``floor``
    (the bare server, ``mcpq.ops.bench.bare_target``) takes its turn in the 1-client phase only:
    the host's floor under the end-to-end latency, in the same run."""
    found = [_Phases(target) for target in targets]
    bare = _Phases(floor) if floor is not None else None
    _phases(found, clients, seconds, tasks, procs, bare)
    floored = OneClient.of([bare.e2e], bare.load.failures) if bare is not None else None
    return [_result(one, clients) for one in found], floored


def _result(one: _Phases, clients: int) -> Result:
    assert one.costs is not None
    servers = one.target.servers
    pss = pss_mib([p for child in servers for p in process_tree(child.popen.pid)])
    timed, run_ms = one.e2e, one.target.run_ms
    e2e, gets = timed.e2e or [0.0], one.gets or [0.0]
    return Result(
        clients,
        one.created_per_s,
        one.drained_per_s,
        one.completed_per_s,
        statistics.median(e2e),
        percentile(e2e, 0.99),
        statistics.median(gets),
        percentile(gets, 0.99),
        pss,
        one.costs.commands,
        one.costs.sent,
        one.costs.round_trips,
        one.costs.background_per_s,
        one.costs.top,
        one.load.failures,
        one.steal_s,
        timed.call_p50_ms(),
        timed.get_p50_ms(),
        timed.polls(),
        run_ms(timed.ids) if run_ms is not None and timed.ids else None,
    )


def steal_s() -> float:
    """Seconds of CPU the hypervisor has taken from this machine since boot (0 where the
    kernel does not report it)."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = stat.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0
