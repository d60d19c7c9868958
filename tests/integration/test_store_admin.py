"""The operator's access to the store (``shared.store.admin``, behind ``mcpq tasks``), on a real
Redis, with one shard and with three: listing unfinished tasks from every shard's ``active``
index (filters, oldest first, pages that neither skip nor repeat), showing one task with its
payloads opened, cancelling with the client's transition."""

from __future__ import annotations

import pytest
import redis

from shared.sealing import new_data_key
from shared.store import AdminError, Keys, Reply, TaskAdmin, TaskFilter, TaskStatus, TaskStore
from shared.store.admin import UNREADABLE
from shared.store.payloads import PLAIN, Payloads
from tests.integration.conftest import RedisClock, TaskFactory
from tests.support.white_box import WhiteBoxStore


def admin_of(client: redis.Redis, keys: Keys, payloads: Payloads = PLAIN) -> TaskAdmin:
    return TaskAdmin(TaskStore(client, keys, payloads), keys, payloads)


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

    everything = admin.list_tasks(TaskFilter(), limit=100)
    assert [t.ref for t in everything.tasks] == [*made, waiting]
    assert finished not in {t.ref for t in everything.tasks}, "a finished task is not listed"
    assert everything.cursor is None

    only = admin.list_tasks(TaskFilter(states=frozenset({TaskStatus.INPUT_REQUIRED})), 100)
    assert [(t.ref, t.tool, t.owner, t.message) for t in only.tasks] == [
        (waiting, "approve", "key:alice", "waits for a human")
    ]
    by_tool = admin.list_tasks(TaskFilter(tool="echo"), 100)
    assert [t.ref for t in by_tool.tasks] == made[1::2]
    by_owner = admin.list_tasks(TaskFilter(principal="key:alice"), 100)
    assert [t.ref for t in by_owner.tasks] == [*made[0::2], waiting]
    assert admin.list_tasks(TaskFilter(principal="key:carol"), 100).tasks == []


def test_older_than_bounds_the_creation_time(
    store: WhiteBoxStore, redis_client: redis.Redis, keys: Keys, clock: RedisClock
) -> None:
    tasks = TaskFactory(store)
    old = tasks.new()
    clock.wait_past(clock.now_ms() + 300)
    young = tasks.new()
    admin = admin_of(redis_client, keys)
    listed = [t.ref for t in admin.list_tasks(TaskFilter(older_than_ms=200), 100).tasks]
    assert old in listed and young not in listed
    assert admin.list_tasks(TaskFilter(older_than_ms=200), 100).tasks[0].age_s(clock.now_ms()) > 0.2


def test_pages_neither_skip_nor_repeat_across_shards(
    store: WhiteBoxStore, redis_client: redis.Redis, keys: Keys, tasks: TaskFactory
) -> None:
    made = [tasks.new() for _ in range(23)]  # many share a millisecond: ties order by ref
    admin = admin_of(redis_client, keys)
    whole = [t.ref for t in admin.list_tasks(TaskFilter(), limit=100).tasks]
    assert sorted(whole) == sorted(made)

    def page_through(create_meanwhile: bool) -> tuple[list[str], int]:
        seen: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            page = admin.list_tasks(TaskFilter(), limit=5, cursor=cursor)
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


def test_a_bad_cursor_or_a_finished_state_is_a_clear_refusal(
    redis_client: redis.Redis, keys: Keys
) -> None:
    admin = admin_of(redis_client, keys)
    with pytest.raises(AdminError, match="not a cursor"):
        admin.list_tasks(TaskFilter(), 10, cursor="12-abc")
    with pytest.raises(AdminError, match=r"finished tasks \(completed\) are not indexed"):
        TaskFilter(states=frozenset({TaskStatus.COMPLETED}))


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
    (listed,) = other.list_tasks(TaskFilter(), 10).tasks
    assert listed.message == UNREADABLE, "one unreadable payload does not fail the listing"
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
    assert admin.list_tasks(TaskFilter(), 10).tasks == [], "it left the active index"
    assert redis_client.hlen(keys.inputs(ref)) == 0, "its input requests went with it"
    assert admin.cancel(ref).reply is Reply.TERMINAL
    assert admin.cancel("0" * 32).reply is Reply.NOTFOUND
