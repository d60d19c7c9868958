"""``MCPQ_REDIS_MIN_REPLICAS``: a create or an answer is acknowledged only once that many replicas
hold it (``WAIT`` after the script, one round trip), on real redis-servers.

- No replica confirms: the create raises ``NotReplicated`` (503) and the task it made on the
  primary is withdrawn (cancelled, so its run ends at its claim); an answer stays delivered and
  its retry is ignored.
- A replica confirms: the create is acknowledged, and the replica has the task.
- A primary whose script cache was flushed (a promoted replica has none) loads the script again.
- On a Redis Cluster the same holds: the ``WAIT`` runs on the connection that ran the script,
  on the node that owns the task's slot (not on redis-py's default node, which would count
  replicas of a connection that wrote nothing, and acknowledge at once).
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.settings import Settings
from mcpq.shared.store import AsyncTaskStore, Keys, NewTask, Reply, TaskStore, task_ref
from mcpq.shared.store.clients import async_client, sync_client
from mcpq.shared.store.redis_errors import NotReplicated
from tests.support.redis_cluster import LocalCluster, cluster_binaries
from tests.support.redis_server import IN_MEMORY_ARGS, RedisProcess

OWNER = "principal-alice"


@pytest.fixture
def primary() -> Iterator[RedisProcess]:
    with RedisProcess() as server:
        yield server


#: How long a write waits for its replica where the test expects it confirmed: a WAIT returns
#: as soon as the replica acknowledges, so this costs nothing unless the host is loaded (a
#: whole-suite run once needed more than 100 ms). Refusals keep the short wait.
CONFIRMED_WAIT_MS = 5_000


def _store(
    server: RedisProcess, keys: Keys, min_replicas: int = 1, wait_ms: int = 100
) -> AsyncTaskStore:
    client = async_client(Settings(redis_url=server.url))
    return AsyncTaskStore(client, keys, min_replicas=min_replicas, replica_wait_ms=wait_ms)


@contextmanager
def replica_of(primary: RedisProcess) -> Iterator[RedisProcess]:
    """A replica of ``primary``, once its link is up."""
    args = (*IN_MEMORY_ARGS, "--replicaof", "127.0.0.1", str(primary.port))
    with RedisProcess(extra_args=args) as replica:
        raw = redis.Redis.from_url(replica.url, decode_responses=True)
        try:
            wait_until(
                lambda: raw.info("replication")["master_link_status"] == "up",
                timeout=15,
                interval=0.05,
            )
        finally:
            raw.close()
        yield replica


def _task(tool: str = "echo") -> NewTask:
    ref = task_ref(uuid.uuid4().hex)
    return NewTask(ref, tool, "q", OWNER, {"x": 1}, {}, 60_000, 100)


def test_an_unreplicated_create_is_refused_and_withdrawn(primary: RedisProcess) -> None:
    keys = Keys(f"t{uuid.uuid4().hex[:8]}")
    task = _task()
    raw = redis.Redis.from_url(primary.url, decode_responses=True)
    raw.script_flush()  # as on a replica just promoted: the script must be loaded again

    async def create() -> None:
        store = _store(primary, keys)
        try:
            await store.create(task, 1_000)
        finally:
            await store.aclose()

    with pytest.raises(NotReplicated) as caught:
        asyncio.run(create())
    error = caught.value
    assert error.http_status == 503
    assert error.to_error() == {
        "code": -32603,
        "message": "not replicated",
        "data": {"requiredReplicas": 1, "replicas": 0},
    }
    # The script ran (after NOSCRIPT), and the task it made was withdrawn at once.
    assert raw.hget(keys.task(task.ref), "status") == "cancelled"
    raw.close()


def test_an_unreplicated_answer_stays_delivered_and_its_retry_is_ignored(
    primary: RedisProcess,
) -> None:
    keys = Keys(f"t{uuid.uuid4().hex[:8]}")
    task = _task()
    worker = TaskStore(sync_client(Settings(redis_url=primary.url)), keys)

    async def scenario() -> Reply:
        plain = _store(primary, keys, min_replicas=0)
        strict = _store(primary, keys)
        try:
            assert await plain.create(task, 1_000) is not None
            claim = worker.claim(task.ref, 5_000)
            assert claim.reply is Reply.OK
            poll = worker.request_input(task.ref, claim.gen, {"elicit-1": {"message": "?"}})
            assert poll.missing == 1
            with pytest.raises(NotReplicated):
                await strict.answer(task.ref, OWNER, {"elicit-1": {"action": "accept"}}, 1_000)
            retried = await strict.answer(
                task.ref, OWNER, {"elicit-1": {"action": "accept"}}, 1_000
            )
            return retried.reply
        finally:
            await plain.aclose()
            await strict.aclose()

    assert asyncio.run(scenario()) is Reply.IGNORED, "the retry finds the answer delivered"
    raw = redis.Redis.from_url(primary.url, decode_responses=True)
    assert raw.hexists(keys.answers(task.ref), "elicit-1"), "the refused answer stays stored"
    assert raw.hlen(keys.inputs(task.ref)) == 0, "and is no longer outstanding"
    raw.close()


def test_a_replicated_create_is_acknowledged_and_on_the_replica(primary: RedisProcess) -> None:
    keys = Keys(f"t{uuid.uuid4().hex[:8]}")
    task = _task()
    with replica_of(primary) as replica:
        raw = redis.Redis.from_url(replica.url, decode_responses=True)

        async def create() -> int | None:
            store = _store(primary, keys, wait_ms=CONFIRMED_WAIT_MS)
            try:
                return await store.create(task, 1_000)
            finally:
                await store.aclose()

        assert asyncio.run(create()) is not None
        # WAIT returned only once the replica had it: it is there without waiting.
        assert raw.hget(keys.task(task.ref), "status") == "working"
        raw.close()


@pytest.mark.skipif(cluster_binaries() is None, reason="needs Redis 7 and redis-cli")
def test_on_a_cluster_the_wait_counts_the_replicas_of_the_tasks_node(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "cluster").start()
    try:
        check_cluster_waits(cluster)
    finally:
        cluster.close()


def check_cluster_waits(cluster: LocalCluster) -> None:
    keys = Keys(f"t{uuid.uuid4().hex[:8]}", shards=6)
    settings = Settings(redis_url=cluster.url, redis_cluster=True, store_shards=6)
    primaries = cluster.primary_nodes()
    replicas = [node for node in cluster.alive() if node not in primaries]
    for node in primaries:
        with cluster.client(node) as c:
            c.script_flush()  # loaded again at the first NOSCRIPT, on the task's node
    acknowledged, stopped = _task(), _task()

    async def create(task: NewTask) -> int | None:
        wait_ms = CONFIRMED_WAIT_MS if task is acknowledged else 300
        store = AsyncTaskStore(
            async_client(settings), keys, min_replicas=1, replica_wait_ms=wait_ms
        )
        try:
            return await store.create(task, 1_000)
        finally:
            await store.aclose()

    assert asyncio.run(create(acknowledged)) is not None
    # With every replica stopped, no write can be confirmed: before the WAIT went with its
    # script, it ran on another connection and answered 1 at once.
    for node in replicas:
        os.kill(node.pid, signal.SIGSTOP)
    try:
        with pytest.raises(NotReplicated) as caught:
            asyncio.run(create(stopped))
    finally:
        for node in replicas:
            os.kill(node.pid, signal.SIGCONT)
    assert caught.value.to_error()["data"] == {"requiredReplicas": 1, "replicas": 0}
    assert _status_on_cluster(cluster, keys.task(acknowledged.ref)) == "working"
    assert _status_on_cluster(cluster, keys.task(stopped.ref)) == "cancelled", "withdrawn"


def _status_on_cluster(cluster: LocalCluster, key: str) -> str | None:
    """The ``status`` field of ``key``'s hash, read on the primary that owns its slot."""
    primaries = cluster.primary_nodes()
    with cluster.client(primaries[0]) as c:
        key_slot = int(c.cluster("keyslot", key))
    (owner,) = [node for node in primaries if key_slot in cluster.slots_of(node)]
    with cluster.client(owner) as c:
        return c.hget(key, "status")  # type: ignore[no-any-return]


def test_a_runs_claim_and_step_memo_wait_for_a_replica(primary: RedisProcess) -> None:
    """A run's writes that a failover must not undo: its claim (the generation that fences
    every earlier run: a promoted replica without it gives the same generation to a second run)
    and a step's memo (without it the replay calls ``fn`` again). Unconfirmed, the run stops
    (``NotReplicated``); confirmed, the replica holds both."""
    keys = Keys(f"t{uuid.uuid4().hex[:8]}")
    settings = Settings(redis_url=primary.url)

    def worker(wait_ms: int) -> TaskStore:
        return TaskStore(sync_client(settings), keys, min_replicas=1, replica_wait_ms=wait_ms)

    web = TaskStore(sync_client(settings), keys)  # creates, as the web tier does
    lonely, task = worker(100), _task()
    assert web.create(task, 1_000) is not None
    redis.Redis.from_url(primary.url).script_flush()  # a promoted replica's empty cache
    with pytest.raises(NotReplicated):
        lonely.claim(task.ref, 5_000)
    # Handed back: the claim neither holds the task nor lapses into a lost run.
    plain = redis.Redis.from_url(primary.url, decode_responses=True)
    assert plain.hmget(keys.task(task.ref), ["gen", "lease"]) == ["1", "0"]
    plain.close()
    with replica_of(primary) as replica:
        raw = redis.Redis.from_url(replica.url, decode_responses=True)
        store, task = worker(5_000), _task()  # a busy machine's replica may be slow
        assert web.create(task, 1_000) is not None
        claim = store.claim(task.ref, 5_000)
        assert claim.reply is Reply.OK
        assert raw.hget(keys.task(task.ref), "gen") == str(claim.gen), "on the replica already"
        assert store.save_step(task.ref, claim.gen, "charge", "ch_1") == (Reply.OK, "ch_1")
        assert raw.hexists(keys.steps(task.ref), "charge")
        raw.close()
