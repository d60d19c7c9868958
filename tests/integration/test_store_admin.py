"""The operator's access to the store (``shared.store.admin``, behind ``mcpq tasks``), on a real
Redis, with one shard and with three: listing unfinished tasks from every shard's ``active``
index (filters, oldest first, pages that neither skip nor repeat), listing finished ones (and
everything) by a ``SCAN`` of the task records (filters, pages that neither skip nor repeat, also
on a Redis Cluster), showing one task with its payloads opened, cancelling with the client's
transition."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import redis
import redis.cluster

from mcpq.shared.sealing import new_data_key
from mcpq.shared.store import AdminError, Keys, Reply, TaskAdmin, TaskFilter, TaskStatus, TaskStore
from mcpq.shared.store.admin import UNREADABLE
from mcpq.shared.store.admin_scan import SCAN_COUNT, ScanPosition, scan_refs
from mcpq.shared.store.payloads import PLAIN, Payloads
from tests.integration.conftest import RedisClock, TaskFactory
from tests.support.redis_cluster import LocalCluster, cluster_binaries
from tests.support.white_box import WhiteBoxStore

UNFINISHED = frozenset({TaskStatus.WORKING, TaskStatus.INPUT_REQUIRED})


def admin_of(client: redis.Redis, keys: Keys, payloads: Payloads = PLAIN) -> TaskAdmin:
    return TaskAdmin(TaskStore(client, keys, payloads), keys, payloads, client)


def states(*names: TaskStatus) -> TaskFilter:
    return TaskFilter(states=frozenset(names))


def refs_of(admin: TaskAdmin, which: TaskFilter, limit: int = 1000) -> list[str]:
    page = admin.list_tasks(which, limit)
    assert page.cursor is None, "one page holds them all"
    return [t.ref for t in page.tasks]


def page_through(admin: TaskAdmin, which: TaskFilter, limit: int) -> tuple[list[str], int]:
    """Every page of a listing, the next asked with the cursor of the last: the refs in the
    order shown and the number of pages. No page is larger than ``limit``, none empty."""
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = admin.list_tasks(which, limit, cursor=cursor)
        assert 1 <= len(page.tasks) <= limit or (pages == 0 and not page.tasks)
        seen += [t.ref for t in page.tasks]
        pages += 1
        assert pages < 1000, "the walk does not end"
        if page.cursor is None:
            return seen, pages
        cursor = page.cursor


def finish(store: WhiteBoxStore, tasks: TaskFactory, status: TaskStatus) -> str:
    """A task ended ``status`` the way it ends in production: a run's finish, or a cancel."""
    if status is TaskStatus.CANCELLED:
        ref, _ = tasks.waiting("approve")
        assert store.cancel(ref, tasks.owner).reply is Reply.CANCELLED
        return ref
    ref, gen = tasks.running()
    payload = {"content": []} if status is TaskStatus.COMPLETED else {"code": -1, "message": "x"}
    assert store.finish(ref, gen, status, payload) == Reply.OK
    return ref


def test_lists_unfinished_tasks_of_every_shard_oldest_first_with_filters(
    store: WhiteBoxStore, redis_client: redis.Redis, keys: Keys, clock: RedisClock
) -> None:
    alice = TaskFactory(store, owner="key:alice", tool="approve")
    bob = TaskFactory(store, owner="key:bob", tool="echo")
    made = []
    for factory in (alice, bob, alice, bob, alice, bob):
        made.append(factory.new())
        clock.tick()  # distinct createdAt: the expected order is the creation order
    waiting, gen = alice.waiting("approve")
    store.report(waiting, gen, "waits for a human")
    finished, fgen = bob.running()
    assert store.finish(finished, fgen, TaskStatus.COMPLETED, {"content": []}) == Reply.OK
    admin = admin_of(redis_client, keys)

    unfinished = admin.list_tasks(TaskFilter(states=UNFINISHED), limit=100)
    assert [t.ref for t in unfinished.tasks] == [*made, waiting]
    assert finished not in {t.ref for t in unfinished.tasks}, "unfinished states only"
    assert unfinished.cursor is None

    only = admin.list_tasks(states(TaskStatus.INPUT_REQUIRED), 100)
    assert [(t.ref, t.tool, t.owner, t.message) for t in only.tasks] == [
        (waiting, "approve", "key:alice", "waits for a human")
    ]
    by_tool = admin.list_tasks(TaskFilter(states=UNFINISHED, tool="echo"), 100)
    assert [t.ref for t in by_tool.tasks] == made[1::2]
    by_owner = admin.list_tasks(TaskFilter(states=UNFINISHED, principal="key:alice"), 100)
    assert [t.ref for t in by_owner.tasks] == [*made[0::2], waiting]
    assert admin.list_tasks(TaskFilter(states=UNFINISHED, principal="key:carol"), 100).tasks == []


def test_older_than_bounds_the_creation_time(
    store: WhiteBoxStore, redis_client: redis.Redis, keys: Keys, clock: RedisClock
) -> None:
    tasks = TaskFactory(store)
    old = tasks.new()
    clock.wait_past(clock.now_ms() + 300)
    young = tasks.new()
    admin = admin_of(redis_client, keys)
    older = TaskFilter(states=UNFINISHED, older_than_ms=200)
    listed = [t.ref for t in admin.list_tasks(older, 100).tasks]
    assert old in listed and young not in listed
    assert admin.list_tasks(older, 100).tasks[0].age_s(clock.now_ms()) > 0.2


def test_pages_neither_skip_nor_repeat_across_shards(
    store: WhiteBoxStore, redis_client: redis.Redis, keys: Keys, tasks: TaskFactory
) -> None:
    made = [tasks.new() for _ in range(23)]  # many share a millisecond: ties order by ref
    admin = admin_of(redis_client, keys)
    whole = [t.ref for t in admin.list_tasks(TaskFilter(states=UNFINISHED), limit=100).tasks]
    assert sorted(whole) == sorted(made)

    def page_through(create_meanwhile: bool) -> tuple[list[str], int]:
        seen: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            page = admin.list_tasks(TaskFilter(states=UNFINISHED), limit=5, cursor=cursor)
            assert len(page.tasks) <= 5
            seen += [t.ref for t in page.tasks]
            pages += 1
            if page.cursor is None:
                return seen, pages
            cursor = page.cursor
            if create_meanwhile and pages < 3:
                tasks.new()  # later than every task seen: it comes on a later page

    seen, pages = page_through(create_meanwhile=False)
    assert (seen, pages) == (whole, 5), "five pages of the one order, no empty last page"
    seen, pages = page_through(create_meanwhile=True)
    assert seen[:23] == whole and len(seen) == 25, "nothing skipped, nothing repeated"


def test_a_bad_cursor_is_a_clear_refusal(redis_client: redis.Redis, keys: Keys) -> None:
    admin = admin_of(redis_client, keys)
    with pytest.raises(AdminError, match="not a cursor"):
        admin.list_tasks(TaskFilter(states=UNFINISHED), 10, cursor="12-abc")
    with pytest.raises(AdminError, match="not a cursor"):
        admin.list_tasks(TaskFilter(), 10, cursor="scan.0.x")
    with pytest.raises(AdminError, match="not a cursor"):
        admin.list_tasks(TaskFilter(), 10, cursor="nonsense")
    with pytest.raises(AdminError, match="names shard 7, and this store has"):
        admin.list_tasks(TaskFilter(), 10, cursor="scan.7.0")
    # A cursor of one walk handed to the other: said, not misread as a position
    index_cursor = f"1764600000000.{'a' * 32}"
    with pytest.raises(AdminError, match="belongs to a listing of other states"):
        admin.list_tasks(states(TaskStatus.COMPLETED), 10, cursor=index_cursor)
    with pytest.raises(AdminError, match="belongs to a listing of other states"):
        admin.list_tasks(states(TaskStatus.WORKING), 10, cursor="scan.0.12")


def test_show_opens_payloads_and_lists_input_requests(
    redis_client: redis.Redis, keys: Keys
) -> None:
    sealed = Payloads.from_setting(new_data_key(), keys)
    writer = TaskStore(redis_client, keys, sealed)
    tasks = TaskFactory(writer)  # type: ignore[arg-type]
    ref, gen = tasks.waiting("approve")
    writer.report(ref, gen, "secret plan")
    stored = redis_client.hgetall(keys.task(ref))
    assert "secret plan" not in str(stored), "the message is sealed at rest"

    detail = admin_of(redis_client, keys, sealed).show(ref)
    assert detail is not None
    assert detail.fields["msg"] == "secret plan"
    assert detail.fields["args"] == {"text": "hello"}
    assert detail.fields["status"] == "input_required"
    assert detail.fields["owner"] == "principal-alice"
    assert detail.inputs["approve"]["method"] == "elicitation/create"

    other = admin_of(redis_client, keys, Payloads.from_setting(new_data_key(), keys))
    stranger = other.show(ref)
    assert stranger is not None and stranger.fields["msg"] == UNREADABLE
    (listed,) = other.list_tasks(TaskFilter(states=UNFINISHED), 10).tasks
    assert listed.message == UNREADABLE, "one unreadable payload does not fail the listing"
    (scanned,) = other.list_tasks(TaskFilter(), 10).tasks
    assert scanned.ref == ref and scanned.message == UNREADABLE, "nor does the scan"
    assert other.show("0" * 32) is None


def test_resolve_a_prefix_of_an_unfinished_task(
    redis_client: redis.Redis, keys: Keys, tasks: TaskFactory
) -> None:
    ref = tasks.new()
    admin = admin_of(redis_client, keys)
    assert admin.resolve(ref[:12]) == ref
    assert admin.resolve(ref.upper()) == ref
    with pytest.raises(AdminError, match="no unfinished task"):
        admin.resolve("abcdef" if not ref.startswith("abcdef") else "fedcba")
    with pytest.raises(AdminError, match="not a task ref"):
        admin.resolve("task-id-here")


def test_cancel_is_the_clients_transition(
    store: WhiteBoxStore, redis_client: redis.Redis, keys: Keys, tasks: TaskFactory
) -> None:
    ref, _ = tasks.waiting("approve")
    admin = admin_of(redis_client, keys)
    assert admin.cancel(ref).reply is Reply.CANCELLED
    record = store.record(ref)
    assert record is not None and record.status is TaskStatus.CANCELLED
    assert record.message == "Cancelled by an operator"
    assert admin.list_tasks(TaskFilter(states=UNFINISHED), 10).tasks == [], "it left the index"
    assert [t.ref for t in admin.list_tasks(states(TaskStatus.CANCELLED), 10).tasks] == [ref]
    assert redis_client.hlen(keys.inputs(ref)) == 0, "its input requests went with it"
    assert admin.cancel(ref).reply is Reply.TERMINAL
    assert admin.cancel("0" * 32).reply is Reply.NOTFOUND


# -- finished tasks: the SCAN walk ---------------------------------------------------------------
def test_finished_tasks_are_listed_by_their_state_and_never_as_unfinished(
    store: WhiteBoxStore, redis_client: redis.Redis, keys: Keys
) -> None:
    alice = TaskFactory(store, owner="key:alice", tool="approve")
    bob = TaskFactory(store, owner="key:bob", tool="echo")
    done = finish(store, alice, TaskStatus.COMPLETED)
    failed = finish(store, bob, TaskStatus.FAILED)
    cancelled = finish(store, alice, TaskStatus.CANCELLED)
    waiting, _ = alice.waiting("approve")  # has a ``:in`` hash: not a task of its own
    working = bob.new()
    admin = admin_of(redis_client, keys)
    before = {ref: redis_client.hgetall(keys.task(ref)) for ref in (done, failed, cancelled)}

    assert refs_of(admin, states(TaskStatus.COMPLETED)) == [done]
    assert refs_of(admin, states(TaskStatus.FAILED)) == [failed]
    assert refs_of(admin, states(TaskStatus.CANCELLED)) == [cancelled]
    assert refs_of(admin, states(TaskStatus.INPUT_REQUIRED)) == [waiting]
    assert refs_of(admin, states(TaskStatus.WORKING)) == [working]
    mixed = refs_of(admin, states(TaskStatus.COMPLETED, TaskStatus.INPUT_REQUIRED))
    assert sorted(mixed) == sorted([done, waiting]), "finished and unfinished in one walk"

    everything = admin.list_tasks(TaskFilter(), 100)
    assert everything.cursor is None
    by_ref = {t.ref: t for t in everything.tasks}
    assert len(everything.tasks) == len(by_ref) == 5, "each task once, its hashes not as tasks"
    assert {ref: t.status for ref, t in by_ref.items()} == {
        done: TaskStatus.COMPLETED,
        failed: TaskStatus.FAILED,
        cancelled: TaskStatus.CANCELLED,
        waiting: TaskStatus.INPUT_REQUIRED,
        working: TaskStatus.WORKING,
    }
    assert by_ref[cancelled].message == "Cancelled by client"
    assert (by_ref[failed].tool, by_ref[failed].owner) == ("echo", "key:bob")
    finished = TaskFilter(states=frozenset({*TaskStatus} - UNFINISHED), principal="key:alice")
    assert sorted(refs_of(admin, finished)) == sorted([done, cancelled])
    assert refs_of(admin, TaskFilter(states=finished.states, tool="echo")) == [failed]
    assert refs_of(admin, TaskFilter(principal="key:carol")) == []

    walked: list[str] = []
    for shard in keys.all_shards:
        cursor = -1
        while cursor:
            cursor, refs = scan_refs(redis_client, keys, shard, max(cursor, 0))
            walked += refs
    assert sorted(walked) == sorted(by_ref), "the walk matches task hashes only (not ``:in``)"

    after = {ref: redis_client.hgetall(keys.task(ref)) for ref in (done, failed, cancelled)}
    assert after == before, "listing reads, never writes"


def test_older_than_counts_from_creation_for_finished_tasks_too(
    store: WhiteBoxStore, redis_client: redis.Redis, keys: Keys, clock: RedisClock
) -> None:
    tasks = TaskFactory(store)
    old, old_gen = tasks.running()
    clock.wait_past(clock.now_ms() + 300)
    young = finish(store, tasks, TaskStatus.COMPLETED)
    assert store.finish(old, old_gen, TaskStatus.COMPLETED, {"content": []}) == Reply.OK
    admin = admin_of(redis_client, keys)
    # Both finished just now; only ``old`` was created more than 200 ms ago.
    which = TaskFilter(states=frozenset({TaskStatus.COMPLETED}), older_than_ms=200)
    assert refs_of(admin, which) == [old]
    assert sorted(refs_of(admin, TaskFilter(older_than_ms=0))) == sorted([old, young])
    assert refs_of(admin, TaskFilter(older_than_ms=3_600_000)) == []


def test_pages_of_a_finished_listing_return_every_task_once(
    store: WhiteBoxStore, redis_client: redis.Redis, keys: Keys, tasks: TaskFactory
) -> None:
    ended = [TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED]
    made = [finish(store, tasks, ended[i % 3]) for i in range(10)]
    unfinished = [tasks.new(), tasks.waiting()[0]]
    admin = admin_of(redis_client, keys)
    which = TaskFilter(states=frozenset(ended))

    seen, pages = page_through(admin, which, limit=3)
    assert sorted(seen) == sorted(made) and len(seen) == 10, "every task once"
    assert pages == 4, "3 + 3 + 3 + 1: no empty last page"
    everything, _ = page_through(admin, TaskFilter(), limit=3)
    assert sorted(everything) == sorted(made + unfinished)


def test_pages_resume_inside_and_across_scan_batches(
    store: WhiteBoxStore, redis_client: redis.Redis, keys: Keys, tasks: TaskFactory
) -> None:
    # Keys that are no task make a shard's walk take several SCAN steps (COUNT is counted on
    # the keys a step looks at), so pages end both inside a batch and between batches.
    with redis_client.pipeline(transaction=False) as pipe:
        for i in range(3 * SCAN_COUNT):
            pipe.set(f"{keys.all_shards[0].root}:filler:{i}", "x", px=60_000)
        pipe.execute()
    made = [finish(store, tasks, TaskStatus.COMPLETED) for _ in range(25)]
    admin = admin_of(redis_client, keys)
    which = states(TaskStatus.COMPLETED)
    for limit in (1, 3, 7, 25, 1000):
        seen, pages = page_through(admin, which, limit)
        assert sorted(seen) == sorted(made), f"limit {limit}: every task once"
        assert pages == -(-25 // limit), f"limit {limit}: full pages and no empty one"
    cursors = []
    page = admin.list_tasks(which, 1)
    while page.cursor:
        cursors.append(ScanPosition.parse(page.cursor))
        page = admin.list_tasks(which, 1, page.cursor)
    assert any(c.after for c in cursors), "a page ended inside a batch"
    assert any(c.cursor for c in cursors), "the walk took more than one SCAN step"


def test_a_batch_that_changed_is_read_whole(
    store: WhiteBoxStore, redis_client: redis.Redis, keys: Keys, tasks: TaskFactory
) -> None:
    first = keys.all_shards[0]
    made = [finish(store, tasks, TaskStatus.COMPLETED) for _ in range(4)]
    while sum(keys.at(r) == first for r in made) < 2:  # shard 0 holds two or more
        made.append(finish(store, tasks, TaskStatus.COMPLETED))
    admin = admin_of(redis_client, keys)
    which = states(TaskStatus.COMPLETED)
    end, batch = scan_refs(redis_client, keys, first, 0)
    assert batch, "the first step of shard 0 finds some of its tasks"
    after = batch[0]
    # A page that ended after ``after`` in this batch: the next one skips what it showed.
    resumed = [
        t.ref for t in admin.list_tasks(which, 100, str(ScanPosition(0, 0, end, after))).tasks
    ]
    shown = {r for r in batch if r <= after}
    assert sorted(resumed) == sorted(set(made) - shown)
    # Said to have ended elsewhere, the batch has changed: it is read whole, nothing missed.
    moved = ScanPosition(0, 0, end + 1, batch[-1])
    again = [t.ref for t in admin.list_tasks(which, 100, str(moved)).tasks]
    assert sorted(again) == sorted(made)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    if cluster_binaries() is None:
        pytest.skip("a Redis Cluster needs redis-server 7+ and redis-cli")
    made = LocalCluster(tmp_path / "cluster", primaries=3, replicas=0).start()
    try:
        yield made
    finally:
        made.close()


def test_a_finished_listing_walks_every_primary_of_a_cluster(cluster: LocalCluster) -> None:
    # The cluster client stands in for a plain one, as mcpq.shared.store.clients hands it out.
    cluster_client = redis.cluster.RedisCluster.from_url(cluster.url, decode_responses=True)
    client = cast(redis.Redis, cluster_client)
    keys = Keys(prefix="adm", shards=6)
    try:
        store = WhiteBoxStore(client, keys)
        tasks = TaskFactory(store)
        ended = [TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED]
        made = [finish(store, tasks, ended[i % 3]) for i in range(12)]
        unfinished = [tasks.new() for _ in range(3)]
        node_of: Any = cluster_client.get_node_from_key
        assert len({node_of(keys.task(ref)).name for ref in made}) > 1, "over several primaries"
        admin = admin_of(client, keys)
        seen, pages = page_through(admin, TaskFilter(states=frozenset(ended)), limit=5)
        assert sorted(seen) == sorted(made) and pages == 3
        everything, _ = page_through(admin, TaskFilter(), limit=4)
        assert sorted(everything) == sorted(made + unfinished)
        assert sorted(refs_of(admin, states(TaskStatus.FAILED))) == sorted(made[1::3])
    finally:
        client.close()
