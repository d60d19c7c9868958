"""The shard tags and the cluster settings, without a server: tags spread evenly over the
Cluster's slots, one shard keeps today's key names, and a cluster store needs its own broker."""

from __future__ import annotations

import pytest

from mcpq.ops.runtime import preflight
from mcpq.shared.settings import Settings
from mcpq.shared.store.keyspace import CLUSTER_SLOTS, Keys, shard_tags, slot


def test_one_shard_keeps_the_key_names_of_a_single_redis() -> None:
    keys = Keys("mcpq")
    assert (keys.task("abc"), keys.leases, keys.stats) == (
        "{mcpq}:t:abc",
        "{mcpq}:leases",
        "{mcpq}:stats",
    )
    assert keys.quota("pk", "tasks") == "{mcpq}:q:pk:tasks"
    assert keys.used_state("j") == "{mcpq}:used:j"


@pytest.mark.parametrize("shards", [2, 3, 6, 12, 64])
def test_shard_tags_sit_evenly_over_the_slots(shards: int) -> None:
    cell = CLUSTER_SLOTS / shards
    for s, tag in enumerate(shard_tags("mcpq", shards)):
        assert abs(slot(tag) - (s + 0.5) * cell) <= max(cell / 8, 0.5), (s, tag)
    # Three primaries of equal contiguous ranges get a third of the shards each
    if shards % 3 == 0:
        owners = [slot(tag) * 3 // CLUSTER_SLOTS for tag in shard_tags("mcpq", shards)]
        assert sorted(owners) == sorted(list(range(3)) * (shards // 3))


def test_a_task_and_its_indexes_share_a_slot() -> None:
    keys = Keys("mcpq", 6)
    shard = keys.at("0123456789abcdef")
    same = {shard.leases, shard.unclaimed, shard.active, shard.expiry, shard.stats}
    same |= {keys.task("0123456789abcdef"), keys.wake("0123456789abcdef")}
    assert {k.partition("}")[0] for k in same} == {shard.root[:-1]}
    with pytest.raises(ValueError, match="per shard"):
        _ = keys.leases


def test_a_cluster_store_refuses_to_start_without_a_broker_of_its_own() -> None:
    base = Settings(tools=("mcpq.demo",), data_keys="plaintext", redis_cluster=True)
    message = preflight.worker_problem(base)
    assert message is not None and "CELERY_BROKER_URL" in message and "\n" not in message
    same = Settings(**{**base.__dict__, "broker_url": base.redis_url})
    assert preflight.cluster_problem(same) == message
    apart = Settings(**{**base.__dict__, "broker_url": "redis://broker:6379/0"})
    assert preflight.cluster_problem(apart) is None
    assert preflight.cluster_problem(Settings()) is None


def test_shards_are_a_setting_with_bounds() -> None:
    assert Settings.from_env({"MCPQ_STORE_SHARDS": "6"}).store_shards == 6
    with pytest.raises(ValueError, match="MCPQ_STORE_SHARDS"):
        Settings.from_env({"MCPQ_STORE_SHARDS": "0"})
