"""``python -m mcpq.ops.bench.capacity --quick --profile``, tiny: every measurement runs to its end
on its own private stack and reports sane numbers and the sizing derived from them (correctness
only: no timing is asserted). Each worker is compared with bare Celery's (its drain and its
steady run complete every task, every figure is there and positive), and the io worker's profile
is written, with entries. RabbitMQ and the Redis Cluster are measured where this machine has
them, and otherwise reported as not measured, with the reason; the RabbitMQ vhost the benchmark
made is deleted afterwards."""

from __future__ import annotations

import itertools
import pstats
from pathlib import Path
from typing import Any

import pytest

from mcpq.ops.harness import rabbitmq
from mcpq.ops.harness.redis_cluster import cluster_binaries
from tests.support.benches import run_bench


def check_rate(rate: dict[str, Any], kind: str) -> None:
    assert rate["kind"] == kind
    assert rate["tasks"] > 0 and rate["per_s"] > 0, rate
    assert rate["cpu_ms_per_task"] > 0 and rate["busy"] > 0, rate
    assert rate["per_core_s"] == pytest.approx(1000 / rate["cpu_ms_per_task"], rel=0.01)


def check_redis_cost(cost: dict[str, Any], broker: str) -> None:
    assert cost["broker"] == broker and cost["tasks"] > 0 and cost["tasks_per_s"] > 0, cost
    assert cost["cpu_ms_per_task"] > 0, cost
    assert cost["saturates_at"] == pytest.approx(1000 / cost["cpu_ms_per_task"], rel=0.01)
    # Commandstats: the create, claim, finish and read are scripts, at the least.
    assert cost["command_us_per_task"] >= cost["script_us_per_task"] > 0, cost
    assert "EVALSHA" in cost["usec_by_command"], cost
    assert cost["commands_per_task"] >= cost["round_trips_per_task"] >= 4, cost


def check_worker_cost(cost: dict[str, Any], backlog: int) -> None:
    assert cost["drain_tasks"] == backlog, cost
    # Every task of the steady arrival completed (the phase waits for all it sent).
    assert cost["steady_tasks"] >= 1 and cost["steady_per_s"] > 0, cost
    for name in ("drain_ms", "drain_per_s", "drain_whole_ms", "drain_whole_s", "steady_ms"):
        assert cost[name] > 0, (name, cost)
    assert cost["idle_ms_per_s"] >= 0 and cost["idle_share_ms"] >= 0, cost
    # Plan.quick's one round (the median of several: tests/unit/test_capacity_rounds.py).
    assert len(cost["drain_rounds_ms"]) == 1 and cost["drain_rounds_ms"][0] > 0, cost
    assert cost["drain_ms"] == pytest.approx(cost["drain_rounds_ms"][0], rel=1e-3), cost


def check_versus(row: dict[str, Any], kind: str) -> None:
    assert row["kind"] == kind
    assert row["bare_pool"] == {"io": "threads", "cpu": "prefork"}[kind]
    assert row["concurrency"] == {"io": 100, "cpu": 4}[kind]
    for side in ("mcpq", "bare"):
        check_worker_cost(row[side], 120)  # Plan.quick's backlog
    for name in ("drain", "drain_whole", "steady"):
        assert row["ratios"][name] > 0, row["ratios"]
    # The drain's ratio is the round's: mcpq's drain over the bare one run right after it.
    mine, theirs = row["mcpq"]["drain_rounds_ms"], row["bare"]["drain_rounds_ms"]
    assert row["drain_round_ratios"] == pytest.approx([mine[0] / theirs[0]], rel=1e-2), row
    assert row["ratios"]["drain"] == pytest.approx(mine[0] / theirs[0], rel=1e-2), row


def check_profile(profile: dict[str, Any], path: Path) -> None:
    assert profile["kind"] == "io" and profile["path"] == str(path), profile
    assert profile["processes"] == 1 and profile["tasks"] > 0, profile
    assert profile["cpu_ms"] > 0 and profile["unprofiled_ms"] > 0 and profile["overhead"] > 0
    assert profile["accounted_ms"] > 0, profile
    assert len(profile["top_own"]) == 25 and len(profile["top_cumulative"]) == 15, profile
    for entry in profile["top_own"]:
        assert entry["function"] and entry["calls"] > 0 and entry["own_us"] >= 0, entry
    # The file is a pstats profile of the worker's run: mcpq's run is in it.
    stats: Any = pstats.Stats(str(path))
    functions = {name for (_file, _line, name) in stats.stats}
    assert "run_task" in functions, sorted(functions)[:50]


@pytest.mark.timeout(900)
def test_the_capacity_benchmark_measures_everything(tmp_path: Path) -> None:
    profile = tmp_path / "profile.pstats"
    result = run_bench(
        "capacity", "--quick", "--profile", "--profile-out", str(profile), timeout=840
    )
    assert result["failures"] == 0
    assert result["machine"]["cpus"] >= 1 and "redis-server" in result["machine"]["redis"]

    check_rate(result["web"], "web")
    assert [rate["kind"] for rate in result["workers"]] == ["io", "cpu"]
    for rate in result["workers"]:
        check_rate(rate, rate["kind"])
    assert [row["kind"] for row in result["versus"]] == ["io", "cpu"]
    for row in result["versus"]:
        check_versus(row, row["kind"])
    check_profile(result["profile"], profile)
    check_redis_cost(result["redis"], "redis")
    assert result["redis"]["broker_cpu_ms_per_task"] is None  # the store is the broker

    if why := rabbitmq.unavailable():
        assert result["rabbitmq"] is None and result["skipped"]["rabbitmq"] == why
    else:
        check_redis_cost(result["rabbitmq"], "rabbitmq")
        assert result["rabbitmq"]["broker_cpu_ms_per_task"] >= 0
        assert len(result["rabbitmq"]["broker_idle_cpu_ms_per_s"]) == 2
        # Its own vhost is gone (by name: another benchmark may hold a vhost of its own now).
        vhost = result["rabbitmq"]["broker_vhost"]
        assert vhost.startswith(f"{rabbitmq.BENCH_PREFIX}-"), vhost
        assert vhost not in rabbitmq.vhost_names()

    if cluster_binaries() is None:
        assert result["cluster"] is None and "cluster" in result["skipped"]
    else:
        cluster = result["cluster"]
        assert cluster["primaries"] == 3 and cluster["shards"] == 6 and cluster["tasks"] > 0
        assert cluster["tasks_per_s"] > 0 and cluster["broker_cpu_ms_per_task"] > 0
        # Every primary did some of the work.
        assert all(ms > 0 for ms in cluster["cpu_ms_per_task_by_primary"]), cluster
        assert sum(cluster["shares"]) == pytest.approx(1.0, abs=0.01)

    sizing = result["sizing"]
    assert [row["tasks_per_s"] for row in sizing] == [100, 1000, 10000]
    for row in sizing:
        for kind in ("web", "worker_io", "worker_cpu"):
            assert row[kind] >= 1, row
        assert row["redis_cores"] > 0 and isinstance(row["single_redis"], bool), row
        if result["cluster"] is not None:
            assert row["cluster_primaries"] >= 3 and row["broker_cores"] > 0, row
    for small, big in itertools.pairwise(sizing):
        assert big["web"] >= small["web"] and big["redis_cores"] > small["redis_cores"]
