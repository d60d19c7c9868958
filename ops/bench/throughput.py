"""Throughput and latency of one deployment, measured with our own load generator:
``python -m mcpq.ops.bench.throughput``.

Starts a private stack as the Procfile runs it (``ops.harness.stack.Stack``: redis-server on a free
loopback port, ``mcpq web`` with its default workers, ``mcpq worker`` with its default io pool)
and drives a no-op tool (``slow_compute seconds=0``) over ``POST /mcp`` with asyncio HTTP
clients (keep-alive connections, one per simulated client), spread over ``--procs`` processes
so that the generator is not what limits the rates. Measures, in one run:

- **created/s**, 20 clients creating tasks back to back for ``--seconds``;
- **drained/s**: those tasks completed per second, from the first create to the last completion;
- **completed/s**, 20 clients each creating a task and polling it (every 10 ms) to completion,
  again and again;
- **end to end**, 1 client: ``tools/call`` sent → ``completed`` seen, polling every 2 ms
  (p50/p99 of ``--tasks`` tasks), and where it goes: the ``tools/call`` and ``tasks/get``
  round trips, how many ``tasks/get`` each task took, and (mcpq) the time from the create
  script to the finish script by the task records;
- **tasks/get** p50/p99, 20 clients polling existing tasks;
- **PSS** (not RSS: forked children share pages) of every web and worker process after the run;
- **Redis commands per task** (counted with ``MONITOR``: every command, those inside scripts
  included, and those clients sent) for ``--tasks`` tasks created, run and polled to the end,
  one at a time;
- **waiting runs** on one io worker process (``--waiting``, 1000: a sync tool in ``ctx.sleep``;
  ``--waiting-async``: an ``async def`` tool awaiting ``ctx.sleep``, ``bench_async_sleep``):
  how long until all run, a 0.3 s tool beside them, cancels of 20 of them, the worker's PSS
  and threads, Redis's clients.

``--peer`` measures fastmcp-tasks 4.1.4 in the same run (FastMCP on Docket/Redis, the best
operational peer; installed into a cached venv, ``.cache/peer-venv``): the same no-op tool, its
server (with its embedded worker, concurrency 10) plus one dedicated worker, on a private Redis,
driven by the same load generator (it speaks the same 2026-07-28 tasks wire). Both deployments
are up at once and measured phase by phase in turn, the first alternating (a drift of the
shared host falls on both alike); then it prints mcpq/peer ratios.

What tracing costs (off against a build without it, on against off) is measured by
``mcpq.ops.bench.tracing_cost``, on these same deployments.

Prints a table; ``--json`` prints one JSON object. A smoke test runs it tiny in CI (correctness
only: every phase completes, nothing fails).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import redis

from mcpq.ops.bench import bench_tools
from mcpq.ops.bench.bench_tools import ASYNC_SLEEP
from mcpq.ops.bench.builds import Build, FolderStack
from mcpq.ops.bench.capacity_stacks import create_many
from mcpq.ops.bench.load import TOOL, Load
from mcpq.ops.bench.loadgen import Result, Target, measure
from mcpq.ops.bench.memory import process_tree, pss_mib
from mcpq.ops.bench.peer import PEER_VENV, PEER_VERSION, peer_target
from mcpq.ops.bench.rawhttp import RawClient
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.logs import task_hash
from mcpq.shared.settings import DEFAULT_TOOLS
from mcpq.shared.store import Keys, task_ref


@contextlib.contextmanager
def mcpq_target(
    workdir: Path, env: Mapping[str, str] | None = None, build: Build | None = None, name: str = ""
) -> Iterator[Target]:
    """mcpq as the Procfile runs it: ``mcpq web`` (2 gunicorn workers) + ``mcpq worker``;
    ``env``: more variables for both (``mcpq.ops.bench.tracing_cost``: ``OTEL_*``); ``build``:
    that tree of mcpq instead of the repository's (``mcpq.ops.bench.builds``)."""
    name = name or "throughput"
    if build is None:
        stack = Stack(name, workdir, tools=DEFAULT_TOOLS)
    else:
        stack = FolderStack(name, workdir, tools=DEFAULT_TOOLS, folder=build.tree)
        stack.knobs.update(build.env())
    stack.knobs.update(MCPQ_LOG_LEVEL="WARNING", WEB_CONCURRENCY="2")
    stack.knobs.update(env or {})
    try:
        stack.start_redis()
        stack.start_web()
        worker = stack.spawn_pool("mcpq", name, concurrency=None)
        wait_until(lambda: stack.stats().workers, timeout=60, interval=0.2, message="a worker")

        def run_ms(ids: list[str]) -> float | None:
            with redis.Redis.from_url(stack.redis_url, decode_responses=True) as admin:
                return _run_ms(admin, Keys(), ids)

        yield Target(stack, stack.url(), [*stack.webs, worker], run_ms)
    finally:
        stack.close()


def _run_ms(admin: redis.Redis, keys: Keys, ids: list[str]) -> float | None:
    """Mean time from the create script to the finish script of finished tasks, by their
    records (Redis's clock as the web and the worker each carry it, ms resolution: a mean over
    many tasks is still fair); ``None`` when no finished task's record was found."""
    took: list[int] = []
    for task_id in ids:
        created, updated = admin.hmget(keys.task(task_ref(task_id)), "created_ms", "updated_ms")
        if created is not None and updated is not None:
            took.append(int(updated) - int(created))
    return sum(took) / len(took) if took else None


@dataclass
class Waiting:
    runs: int
    running_after_s: float
    short_tool_s: float
    cancel_max_s: float
    worker_pss_mib: float
    redis_clients: int
    #: The tool that waits: ``slow_compute`` (a sync tool) or ``bench_async_sleep`` (async).
    tool: str = TOOL
    #: The worker process's threads while they all wait (``/proc/<pid>/status``).
    worker_threads: int = 0
    #: The runs waited on the worker's run loop (``MCPQ_ASYNC_RUNS``), not a thread each.
    run_loop: bool = False

    def render(self) -> str:
        kind = "async def, await ctx.sleep" if self.tool == ASYNC_SLEEP else "ctx.sleep"
        kind += ", on the run loop" if self.run_loop else ""
        return "\n".join(
            [
                f"{self.runs} waiting runs ({kind}) on one io worker process",
                f"  all running after         {self.running_after_s:9.2f} s",
                f"  a 0.3 s tool alongside    {self.short_tool_s:9.2f} s",
                f"  cancel -> run ended, max  {self.cancel_max_s:9.2f} s (of 20)",
                f"  worker PSS                {self.worker_pss_mib:9.1f} MiB",
                f"  worker threads            {self.worker_threads:9d}",
                f"  Redis clients             {self.redis_clients:9d}",
            ]
        )


def waiting(runs: int, workdir: Path, tool: str = TOOL, run_loop: bool = False) -> Waiting:
    """``runs`` tools waiting at once in one io worker process (threads), a short tool beside
    them, and cancels of some of them; ``tool``: ``slow_compute`` (sync) or
    ``bench_async_sleep`` (``async def``); ``run_loop``: an async tool's runs wait on the
    worker's run loop (``MCPQ_ASYNC_RUNS``), its pool at its default threads."""
    stack = Stack("waiting", workdir, tools=f"{DEFAULT_TOOLS},{bench_tools.MODULE}")
    try:
        stack.start_redis()
        stack.start_web()
        if run_loop:
            loop = {"MCPQ_ASYNC_RUNS": str(runs + 100)}
            worker = stack.spawn_pool("mcpq", "waiting", concurrency=None, **loop)
        else:
            worker = stack.spawn_pool("mcpq", "waiting", concurrency=runs + 100)
        wait_until(lambda: stack.stats().workers, timeout=60, interval=0.2, message="a worker")
        admin = redis.Redis.from_url(stack.redis_url, decode_responses=True)
        load = Load(stack.url(), tool)
        ids, started_s, short_s = asyncio.run(_wait_many(load, runs, admin, Keys()))
        threads = _threads(process_tree(worker.popen.pid))
        cancels = asyncio.run(_cancel_some(load, ids[:20], worker))
        pss = pss_mib(process_tree(worker.popen.pid))
        clients = int(admin.info("clients")["connected_clients"])
    finally:
        stack.close()
    return Waiting(runs, started_s, short_s, max(cancels), pss, clients, tool, threads, run_loop)


def _threads(pids: list[int]) -> int:
    """The threads of processes ``pids``, together."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{pid}/status").read_text()
            total += int(status.split("Threads:")[1].split()[0])
    return total


def _running(admin: redis.Redis, keys: Keys, ids: list[str]) -> int:
    """How many of the tasks ``ids`` a run holds (a lease set by its claim)."""
    pipe = admin.pipeline(transaction=False)
    for task_id in ids:
        pipe.hget(keys.task(task_ref(task_id)), "lease")
    return sum(1 for lease in pipe.execute() if lease and int(lease) > 0)


async def _wait_many(
    load: Load, runs: int, admin: redis.Redis, keys: Keys
) -> tuple[list[str], float, float]:
    """``runs`` tasks created (by 16 clients on keep-alive connections, the load generator's
    own: an httpx client would be what limits the rate) and then held by a run each; the
    seconds from the first create until all are held, and the seconds a 0.3 s task created
    then took to complete."""
    started = time.monotonic()
    ids = await create_many(load, runs, 16, {"seconds": 120})
    while _running(admin, keys, ids) < runs and time.monotonic() - started < 300:
        await asyncio.sleep(0.1)
    running_after = time.monotonic() - started
    sent = time.monotonic()
    async with RawClient(load.url) as http:
        params = {"name": load.tool, "arguments": {"seconds": 0.3}}
        short = await load.call(http, "tools/call", params, load.tool)
        if short is not None:
            await load.until_done(http, str(short["taskId"]), 0.01)
    return ids, running_after, time.monotonic() - sent


async def _cancel_some(load: Load, ids: list[str], worker: Any) -> list[float]:
    """Cancel each; how long until the worker logged the end of its run."""
    took = []
    async with httpx.AsyncClient(timeout=30) as http:
        for task_id in ids:
            needle = f'"task":"{task_hash(task_ref(task_id))}"'
            sent = time.monotonic()
            await load.call(http, "tasks/cancel", {"taskId": task_id}, task_id)
            while time.monotonic() - sent < 10:
                if any(
                    needle in line and '"cancelled"' in line for line in worker.log().splitlines()
                ):
                    break
                await asyncio.sleep(0.01)
            took.append(time.monotonic() - sent)
    return took


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcpq.ops.bench.throughput", description=__doc__
    )
    parser.add_argument("--clients", type=int, default=20, help="concurrent clients (20)")
    parser.add_argument("--seconds", type=float, default=5.0, help="per phase (5)")
    parser.add_argument("--tasks", type=int, default=200, help="for latency and costs (200)")
    parser.add_argument("--procs", type=int, default=2, help="load-generator processes (2)")
    parser.add_argument(
        "--waiting", type=int, default=1000, help="waiting runs on one worker (1000; 0: skip)"
    )
    parser.add_argument(
        "--waiting-async",
        type=int,
        default=0,
        help="waiting runs of an async def tool (await ctx.sleep) on one worker (0: skip)",
    )
    parser.add_argument(
        "--run-loop",
        action="store_true",
        help="--waiting-async's runs on the worker's run loop (MCPQ_ASYNC_RUNS), not a thread each",
    )
    parser.add_argument(
        "--peer",
        action="store_true",
        help=f"also measure fastmcp-tasks {PEER_VERSION} (installed into {PEER_VENV} on first use)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="mcpq-bench-throughput-"))
    try:
        with contextlib.ExitStack() as up:
            targets = [up.enter_context(mcpq_target(workdir / "mcpq"))]
            if args.peer:
                targets.append(up.enter_context(peer_target(workdir / "peer")))
            results = measure(targets, args.clients, args.seconds, args.tasks, args.procs)
        result, peer = results[0], (results[1] if args.peer else None)
        waited = waiting(args.waiting, workdir / "waiting") if args.waiting else None
        awaited = None
        if args.waiting_async:
            where = workdir / "waiting-async"
            awaited = waiting(args.waiting_async, where, ASYNC_SLEEP, args.run_loop)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        print(
            json.dumps(
                {
                    **asdict(result),
                    "peer": asdict(peer) if peer else None,
                    "ratios": ratios(result, peer) if peer else None,
                    "waiting": asdict(waited) if waited else None,
                    "waiting_async": asdict(awaited) if awaited else None,
                }
            )
        )
    else:
        print(result.render())
        if peer is not None:
            print(peer.render(f"fastmcp-tasks {PEER_VERSION}"))
            print("mcpq / peer, same run (rates: higher is better; the rest: lower is better)")
            for name, ratio in ratios(result, peer).items():
                print(f"  {name:<26}{ratio:9.2f}x")
        for phase in (waited, awaited):
            if phase is not None:
                print(phase.render())
    failures = result.failures + (peer.failures if peer else 0)
    return 0 if failures == 0 else 1


RATIOS = (
    "created_per_s",
    "drained_per_s",
    "completed_per_s",
    "e2e_p50_ms",
    "e2e_p99_ms",
    "get_p50_ms",
    "get_p99_ms",
    "pss_mib",
    "redis_commands_per_task",
    "round_trips_per_task",
)


def ratios(mine: Result, peer: Result) -> dict[str, float]:
    ours, theirs = asdict(mine), asdict(peer)
    return {key: round(ours[key] / theirs[key], 3) for key in RATIOS if theirs[key]}


if __name__ == "__main__":
    sys.exit(main())
