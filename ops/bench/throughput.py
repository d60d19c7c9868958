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
  ``--waiting-async``: an ``async def`` tool awaiting ``ctx.sleep``, ``bench_async_sleep``, with
  ``--run-loop`` on the worker's run loop): how long until all run, a 0.3 s tool beside them,
  cancels of 20 of them, the worker's PSS and threads, Redis's clients. These are
  ``mcpq.ops.bench.waiting_runs``'s phases (which also waits on answers and HTTP, measures the
  lease renewals and kills the worker).

``--peer`` measures fastmcp-tasks 4.1.4 in the same run (FastMCP on Docket/Redis, the best
operational peer; installed into a cached venv, ``.cache/peer-venv``): the same no-op tool, its
server (with its embedded worker, concurrency 10) plus one dedicated worker, on a private Redis,
driven by the same load generator (it speaks the same 2026-07-28 tasks wire). Both deployments
are up at once and measured phase by phase in turn, the first alternating (a drift of the
shared host falls on both alike); then it prints mcpq/peer ratios. The 1-client phase also runs
against ``mcpq.ops.bench.floor``'s bare server of mcpq's parts, in turn with the others: the
host's floor under that latency, in the same run. The bare server answers a task's first
``tasks/get`` with ``working``, so its figure is what any server of these parts takes when a
task needs a second ``tasks/get`` (the 2 ms pause included); a deployment whose e2e is below it
won its first polls.

What tracing costs (off against a build without it, on against off) is measured by
``mcpq.ops.bench.tracing_cost``, on these same deployments.

Prints a table; ``--json`` prints one JSON object. A smoke test runs it tiny in CI (correctness
only: every phase completes, nothing fails).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

import redis

from mcpq.ops.bench.bare_target import bare_target
from mcpq.ops.bench.builds import Build, FolderStack
from mcpq.ops.bench.loadgen import OneClient, Result, Target, measure
from mcpq.ops.bench.peer import PEER_VENV, PEER_VERSION, peer_target
from mcpq.ops.bench.waiting_runs import waiting
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until
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
            bare = None
            if args.peer:
                targets.append(up.enter_context(peer_target(workdir / "peer")))
                bare = up.enter_context(bare_target(workdir / "bare"))
            results, floor = measure(
                targets, args.clients, args.seconds, args.tasks, args.procs, bare
            )
        result, peer = results[0], (results[1] if args.peer else None)
        waited = waiting(args.waiting, workdir / "waiting", "sync") if args.waiting else None
        awaited = None
        if args.waiting_async:
            where = workdir / "waiting-async"
            awaited = waiting(args.waiting_async, where, "sleep", run_loop=args.run_loop)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        print(
            json.dumps(
                {
                    **asdict(result),
                    "peer": asdict(peer) if peer else None,
                    "ratios": ratios(result, peer) if peer else None,
                    "floor": asdict(floor) if floor else None,
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
        if floor is not None and peer is not None:
            print(render_floor(floor, result, peer))
        for phase in (waited, awaited):
            if phase is not None:
                print(phase.render())
    failures = result.failures + (peer.failures if peer else 0) + (floor.failures if floor else 0)
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


def render_floor(floor: OneClient, mine: Result, peer: Result) -> str:
    """The host's floor under the 1-client end to end, beside mcpq's and the peer's."""
    polls = ", ".join(f"{n}: {share:.0%}" for n, share in sorted(floor.polls.items()))
    return "\n".join(
        [
            "the floor, same run: a bare server of mcpq's parts (mcpq.ops.bench.floor's), 1 client",
            f"  end to end                p50 {floor.e2e_p50_ms:6.2f} ms   "
            f"p99 {floor.e2e_p99_ms:6.2f} ms",
            f"    of which tools/call p50 {floor.call_p50_ms:.2f} ms, tasks/get p50 "
            f"{floor.get_p50_ms:.2f} ms; tasks/get per task {polls}",
            f"  mcpq above the floor      {mine.e2e_p50_ms - floor.e2e_p50_ms:+9.2f} ms",
            f"  the floor / the peer's    {floor.e2e_p50_ms / peer.e2e_p50_ms:9.2f}x"
            "  (mcpq's e2e ratio can be lower only by winning its first tasks/get)",
        ]
    )


def ratios(mine: Result, peer: Result) -> dict[str, float]:
    ours, theirs = asdict(mine), asdict(peer)
    return {key: round(ours[key] / theirs[key], 3) for key in RATIOS if theirs[key]}


if __name__ == "__main__":
    sys.exit(main())
