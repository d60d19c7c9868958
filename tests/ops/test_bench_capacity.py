"""``python -m mcpq.ops.bench.capacity --quick``, tiny: every measurement runs to its end on its own
private stack and reports sane numbers and the sizing derived from them (correctness only: no
timing is asserted). RabbitMQ and the Redis Cluster are measured where this machine has them,
and otherwise reported as not measured, with the reason; the benchmark's RabbitMQ vhost is
deleted afterwards."""

from __future__ import annotations

import itertools
import subprocess
from typing import Any

import pytest

from mcpq.ops.harness import rabbitmq
from mcpq.ops.harness.redis_cluster import cluster_binaries
from tests.support.benches import run_bench


def bench_vhosts() -> set[str]:
    if rabbitmq.unavailable():
        return set()
    listed = subprocess.run(
        ["rabbitmqctl", "-q", "list_vhosts", "--no-table-headers"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    return {name for name in listed if name.startswith(f"{rabbitmq.BENCH_PREFIX}-")}


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


@pytest.mark.timeout(900)
def test_the_capacity_benchmark_measures_everything() -> None:
    vhosts_before = bench_vhosts()
    result = run_bench("capacity", "--quick", timeout=840)
    assert result["failures"] == 0
    assert result["machine"]["cpus"] >= 1 and "redis-server" in result["machine"]["redis"]

    check_rate(result["web"], "web")
    assert [rate["kind"] for rate in result["workers"]] == ["io", "cpu"]
    for rate in result["workers"]:
        check_rate(rate, rate["kind"])
    check_redis_cost(result["redis"], "redis")
    assert result["redis"]["broker_cpu_ms_per_task"] is None  # the store is the broker

    if why := rabbitmq.unavailable():
        assert result["rabbitmq"] is None and result["skipped"]["rabbitmq"] == why
    else:
        check_redis_cost(result["rabbitmq"], "rabbitmq")
        assert result["rabbitmq"]["broker_cpu_ms_per_task"] >= 0
        assert len(result["rabbitmq"]["broker_idle_cpu_ms_per_s"]) == 2
        assert bench_vhosts() == vhosts_before  # its vhost is gone

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
