"""Capacity planning, measured: ``python -m mcpq.ops.bench.capacity [--json] [--quick]``.

What one process of each kind does, and what one task costs Redis (and RabbitMQ), each measured
on a private stack of its own (``ops.harness.stack.Stack``: redis-server on a free loopback port,
never the shared one), with a no-op tool (``slow_compute seconds=0``; the workers' phase runs
``bench_noop``, which returns at once, as bare Celery's no-op task does nothing):

1. **web**: tasks created per second by one web process (``mcpq web``, ``WEB_CONCURRENCY=1``,
   no worker), driven by the load generator of ``mcpq.ops.bench.loadgen`` in ``--procs`` processes;
   and the web process's CPU time per task (its busy share says whether it was the limit).
2. **workers**: a backlog of tasks created first, then one ``mcpq worker`` process started, once
   with the io pool (the default) and once with the cpu pool (``--pool cpu``), each with its
   default concurrency: tasks drained per second between 10 % and 90 % of the backlog (start-up
   left out), and the worker's CPU time per task (prefork children included). Then, against
   **bare Celery** (``mcpq.ops.bench.bare_celery``: a minimal app, JSON, ``acks_late``, the same
   prefetch and slots, Celery's ``threads`` pool for io and ``prefork`` for cpu, on the same
   Redis): each worker's CPU per no-op task in that drain (10-90 %, and from the worker's
   start; mcpq's and bare Celery's drains in turn, three rounds, their medians and the median
   of the rounds' ratios), at a steady arrival (``--rate``, 200/s, for 10 s: mcpq's tasks
   created through the web by a paced client, bare Celery's sent by a paced producer) and
   idle, and the ratios
   (``mcpq.ops.bench.capacity_bare``). With ``--profile [io|cpu]``, a worker of that kind
   profiled over a steady run of its own: every thread on its CPU clock, the top entries printed
   and the merged ``pstats`` written to ``--profile-out`` (``mcpq.ops.bench.capacity_profile``).
3. **Redis per task**, the store as broker (the default): a burst of tasks created by 10 clients,
   run by one io worker, then read once each (``tasks/get``); Redis's CPU time (``INFO cpu``:
   used_cpu_sys + used_cpu_user) and command time (``INFO commandstats`` usec) over that,
   less the idle deployment's rate measured just before, divided by the tasks; hence the tasks/s
   at which one Redis core saturates. Then, separately (``MONITOR`` costs Redis CPU itself),
   the commands and round trips per task (``mcpq.ops.bench.costs.per_task_costs``).
4. the same with **RabbitMQ as broker** (a vhost of its own on the machine's RabbitMQ,
   ``mcpq-bench-<hex>``, deleted after; never ``/``), plus RabbitMQ's own CPU per task from its
   Erlang VM's ``/proc`` times, less an idle baseline measured just before and just after (it
   is a shared server: both baselines are reported, their difference is the noise). Left out,
   with the reason, where RabbitMQ is not usable.
5. **a Redis Cluster** of 3 primaries (``MCPQ_REDIS_CLUSTER``, ``MCPQ_STORE_SHARDS=6``, a plain
   redis-server as broker): tasks/s through one web and one io worker process, and each
   primary's CPU per task, to show the cluster spreads the load. Left out without Redis 7.

Prints a table (measured, then the sizing derived from it for 100, 1,000 and 10,000 tasks/s);
``--json`` prints one object. ``--quick`` is a small run for development and the smoke test:
its numbers mean little.

This module is the run and its command line. The measurements are ``mcpq.ops.bench.capacity_rates``
(1, 2; timed by ``mcpq.ops.bench.capacity_phases``) and ``mcpq.ops.bench.capacity_redis`` (3 to
5), on stacks driven by ``mcpq.ops.bench.capacity_stacks``; the results and the sizing derived
from them are ``mcpq.ops.bench.capacity_report``'s (the comparison's and the profile's
``mcpq.ops.bench.capacity_versus``').
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from mcpq.ops.bench.capacity_rates import measure_web, measure_worker
from mcpq.ops.bench.capacity_redis import measure_cluster, measure_redis
from mcpq.ops.bench.capacity_report import Capacity, Plan
from mcpq.ops.bench.loadgen import steal_s
from mcpq.ops.harness import rabbitmq
from mcpq.ops.harness.redis_cluster import cluster_binaries
from mcpq.ops.runtime.redis_binary import choose_redis_server


# -- the run ------------------------------------------------------------------------------------
def run(
    plan: Plan, workdir: Path, only: set[str], profile: tuple[str, Path] | None = None
) -> Capacity:
    skipped: dict[str, str] = {}
    failures = 0
    stolen = steal_s()
    machine = {
        "cpus": os.cpu_count() or 0,
        "load_before": round(os.getloadavg()[0], 2),
        "redis": "",
    }

    def phase(name: str, measure: Callable[[], tuple[Any, int]]) -> Any:
        nonlocal failures
        print(f"measuring {name}...", file=sys.stderr, flush=True)
        result, failed = measure()
        failures += failed
        return result

    web = phase("one web process", lambda: measure_web(plan, workdir / "web"))
    measured = [
        phase(
            f"one worker process, {kind} pool, then bare Celery's",
            partial(measure_worker, kind, plan, workdir / kind, _profile_to(profile, kind)),
        )
        for kind in ("io", "cpu")
    ]
    cost = phase("Redis per task", lambda: measure_redis("redis", plan, workdir / "redis"))
    machine["redis"] = _redis_version()
    on_rabbit = None
    if "rabbitmq" not in only:
        skipped["rabbitmq"] = "not asked for (--skip)"
    elif why := rabbitmq.unavailable():
        skipped["rabbitmq"] = why
    else:
        on_rabbit = phase(
            "Redis and RabbitMQ per task, RabbitMQ as broker",
            lambda: measure_redis("rabbitmq", plan, workdir / "rabbitmq"),
        )
    cluster = None
    if "cluster" not in only:
        skipped["cluster"] = "not asked for (--skip)"
    elif cluster_binaries() is None:
        skipped["cluster"] = "a Redis Cluster needs redis-server 7+ and redis-cli"
    else:
        cluster = phase(
            "a 3-primary Redis Cluster", lambda: measure_cluster(plan, workdir / "cluster")
        )
    return Capacity(
        machine,
        web,
        [m.rate for m in measured],
        cost,
        on_rabbit,
        cluster,
        skipped,
        failures,
        steal_s() - stolen,
        versus=[m.versus for m in measured],
        profile=next((m.profiled for m in measured if m.profiled is not None), None),
    )


def _profile_to(profile: tuple[str, Path] | None, kind: str) -> Path | None:
    return profile[1] if profile is not None and profile[0] == kind else None


def _redis_version() -> str:
    return choose_redis_server().describe()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m mcpq.ops.bench.capacity",
        description="Capacity per process and Redis cost per task, measured on private stacks.",
    )
    parser.add_argument("--quick", action="store_true", help="a small run (numbers mean little)")
    parser.add_argument("--procs", type=int, default=2, help="load-generator processes (2)")
    parser.add_argument(
        "--skip",
        action="append",
        choices=OPTIONAL,
        default=[],
        help="leave out an optional measurement (repeatable)",
    )
    parser.add_argument(
        "--rate", type=float, help="the steady arrival at each worker, tasks/s (200; --quick 50)"
    )
    parser.add_argument(
        "--profile",
        nargs="?",
        const="io",
        choices=("io", "cpu"),
        help="profile mcpq's worker of that pool kind (io if not said) over a steady run of its "
        "own: every thread, on its CPU clock; the top entries printed",
    )
    parser.add_argument(
        "--profile-out",
        type=Path,
        help="where the merged profile (pstats) goes (mcpq-capacity-profile-KIND.pstats in the "
        "temporary directory)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


OPTIONAL = ("rabbitmq", "cluster")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.procs < 1:
        build_parser().error("--procs must be >= 1")
    if args.rate is not None and args.rate <= 0:
        build_parser().error("--rate must be > 0")
    plan = Plan.quick(args.procs) if args.quick else Plan.full(args.procs)
    if args.rate is not None:
        plan = replace(plan, rate=args.rate)
    profile = None
    if args.profile is not None:
        default = Path(tempfile.gettempdir()) / f"mcpq-capacity-profile-{args.profile}.pstats"
        profile = (args.profile, (args.profile_out or default).resolve())
    workdir = Path(tempfile.mkdtemp(prefix="mcpq-bench-capacity-"))
    try:
        result = run(plan, workdir, set(OPTIONAL) - set(args.skip), profile)
    except BaseException:
        print(f"benchmark failed; logs in {workdir}", file=sys.stderr)
        raise
    shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(result.as_json()) if args.json else result.render())
    return 0 if result.failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
