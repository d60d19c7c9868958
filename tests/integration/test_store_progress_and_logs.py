"""``report_progress``'s numbers and a synchronous call's log messages (``report.lua``): what the
stream of a call reads (``TaskRecord.progress``/``total``/``logs``, ``TaskStore.logs``).

Log messages are numbered in the order the run made them: a replay, which makes the same ones
again, adds none twice; only a synchronous call keeps them (only its stream sends them), and
only its last ``LOG_KEEP``.
"""

from __future__ import annotations

import pytest

from mcpq.shared.store import Reply, TaskStatus
from mcpq.shared.store.records import LOG_KEEP
from tests.integration.conftest import TaskFactory
from tests.support.white_box import WhiteBoxStore, field

pytestmark = pytest.mark.quick


def info(text: str) -> dict[str, str]:
    return {"level": "info", "data": text}


def test_progress_numbers_are_stored_with_the_message(
    store: WhiteBoxStore, tasks: TaskFactory
) -> None:
    ref, gen = tasks.running()
    assert store.report(ref, gen, "charging", progress=1, total=3) is Reply.OK
    record = store.record(ref)
    assert record is not None
    assert (record.message, record.progress, record.total, record.reports) == ("charging", 1, 3, 1)
    store.report(ref, gen, "half", progress=1.5)
    record = store.record(ref)
    assert record is not None
    assert (record.progress, record.total) == (1.5, None), "a report without a total has none"
    store.report(ref, gen, "plain")
    record = store.record(ref)
    assert record is not None
    assert (record.message, record.progress, record.total, record.reports) == (
        "plain",
        1.5,
        None,
        3,
    ), "a plain report changes the text; the numbers stay"


def test_a_synchronous_calls_messages_are_numbered_and_a_replay_adds_none_twice(
    store: WhiteBoxStore, tasks: TaskFactory
) -> None:
    ref, gen = tasks.running(sync=True)
    store.report(ref, gen, None, 0, logs=[info("one"), info("two")], first_log=1)
    # The run made again from the top: messages 1 and 2 again, then a new third.
    store.report(ref, gen, None, 0, logs=[info("one"), info("two"), info("three")], first_log=1)
    record = store.record(ref)
    assert record is not None
    assert record.logs == 3
    assert record.message == "" and record.reports == 0, "only messages: no status was written"
    assert store.logs(ref, 0, 3) == [info("one"), info("two"), info("three")]
    assert store.logs(ref, 2, 3) == [info("three")]
    assert store.logs(ref, 3, 3) == []


def test_only_the_last_messages_are_kept(store: WhiteBoxStore, tasks: TaskFactory) -> None:
    ref, gen = tasks.running(sync=True)
    many = [info(str(n)) for n in range(1, LOG_KEEP + 11)]
    store.report(ref, gen, None, 0, logs=many, first_log=1)
    record = store.record(ref)
    assert record is not None and record.logs == LOG_KEEP + 10
    kept = store.logs(ref, 0, record.logs)
    assert kept == many[10:], "a reader that fell behind gets the last LOG_KEEP"
    assert field(store, ref, "log:10") is None and field(store, ref, "log:11") is not None


def test_a_task_keeps_no_messages(store: WhiteBoxStore, tasks: TaskFactory) -> None:
    ref, gen = tasks.running()
    store.report(ref, gen, "working", logs=[info("one")], first_log=1)
    record = store.record(ref)
    assert record is not None
    assert (record.logs, record.message) == (0, "working")
    assert store.logs(ref, 0, 1) == []


def test_messages_are_fenced_like_any_write(store: WhiteBoxStore, tasks: TaskFactory) -> None:
    ref, gen = tasks.running(sync=True)
    assert store.report(ref, gen + 1, None, 0, logs=[info("late")]) is Reply.SUPERSEDED
    store.finish(ref, gen, TaskStatus.COMPLETED, {"content": []})
    assert store.report(ref, gen, None, 0, logs=[info("late")]) is Reply.TERMINAL
    record = store.record(ref)
    assert record is not None and record.logs == 0
