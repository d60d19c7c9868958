"""The lease keeper's round on a real Redis (``TaskStore.renew_many``): one call of ``renew.lua``
per shard and chunk of runs, all in one pipeline, each run answered in the order given, as a
renewal of its own would have been."""

from __future__ import annotations

import redis

from mcpq.shared.store import Reply, TaskStatus
from mcpq.shared.store.run_calls import RENEW_CHUNK
from tests.integration.conftest import TaskFactory
from tests.support.white_box import WhiteBoxStore, field

LEASE_MS = 60_000


def test_many_runs_renewed_in_chunks_each_answered_in_its_place(
    store: WhiteBoxStore, tasks: TaskFactory, redis_client: redis.Redis
) -> None:
    running = [tasks.running(lease_ms=1_000) for _ in range(RENEW_CHUNK * 2 + 50)]
    done_ref, done_gen = running[7]
    store.finish(done_ref, done_gen, TaskStatus.COMPLETED, {"content": []}, "done")
    stale_ref, gen = running[600]
    runs = [*running]
    runs[600] = (stale_ref, gen + 1)  # not the run that holds it
    runs.insert(300, ("task-gone", 1))
    before = redis_client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
    renewals = store.renew_many(runs, LEASE_MS)
    calls = redis_client.info("commandstats")["cmdstat_evalsha"]["calls"] - before
    shards = len(store.keys.all_shards)
    # One call per shard and chunk: never one per run.
    assert calls <= shards * (len(runs) // RENEW_CHUNK + 1), calls
    assert len(renewals) == len(runs)
    for (ref, _), renewal in zip(runs, renewals, strict=True):
        if ref == "task-gone":
            assert renewal.reply is Reply.GONE
        elif ref == done_ref:
            assert (renewal.reply, renewal.status) == (Reply.TERMINAL, TaskStatus.COMPLETED)
        elif ref == stale_ref:
            assert renewal.reply is Reply.SUPERSEDED
        else:
            assert (renewal.reply, renewal.status) == (Reply.OK, TaskStatus.WORKING), ref
    now_ms = store.now_ms()
    for ref, _ in running:
        if ref not in (done_ref, stale_ref):
            assert int(field(store, ref, "lease") or 0) > now_ms + LEASE_MS / 2, ref
            assert field(store, ref, "peers") == str(len(runs) - 1)
    assert int(field(store, stale_ref, "lease") or 0) < now_ms + LEASE_MS / 2
