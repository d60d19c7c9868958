"""``statusMessage`` belongs to the state it was written in: every transition to another state
clears it unless the new state sets its own (``finish`` with a failure's message, ``cancel``).

A tool's progress text (``ctx.report``) describes the run at work; shown next to questions
(``input_required``), a result (``completed``) or after the answers came (``working`` again), it
would describe something that is over.
"""

from __future__ import annotations

from mcpq.shared.store import TaskStatus
from tests.integration.conftest import TaskFactory
from tests.support.white_box import WhiteBoxStore

RESULT = {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}
ERROR = {"code": -32603, "message": "tool blew up"}


def message(store: WhiteBoxStore, ref: str) -> tuple[str, str]:
    record = store.record(ref)
    assert record is not None
    return record.status.value, record.message


def test_asking_for_input_clears_the_progress_text(
    store: WhiteBoxStore, tasks: TaskFactory
) -> None:
    ref, gen = tasks.running()
    store.report(ref, gen, "step 2/5")
    assert message(store, ref) == ("working", "step 2/5")
    store.request_input(ref, gen, {"name": {}})
    assert message(store, ref) == ("input_required", "")
    store.park(ref, gen)
    assert message(store, ref) == ("input_required", "")


def test_a_poll_for_the_same_keys_keeps_a_text_written_while_waiting(
    store: WhiteBoxStore, tasks: TaskFactory
) -> None:
    # Not a state change: the poll for answers (same keys, nothing new) leaves the text alone.
    ref, gen = tasks.waiting("name")
    store.report(ref, gen, "still waiting for a name")
    store.request_input(ref, gen, {"name": {}})
    assert message(store, ref) == ("input_required", "still waiting for a name")


def test_the_last_answer_makes_the_task_working_again_without_the_old_text(
    store: WhiteBoxStore, tasks: TaskFactory
) -> None:
    ref, gen = tasks.waiting("name", "age")
    store.report(ref, gen, "waiting for two answers")
    store.answer(ref, tasks.owner, {"name": "Ada"}, 1_000)
    assert message(store, ref) == ("input_required", "waiting for two answers"), "partial"
    store.answer(ref, tasks.owner, {"age": 36}, 1_000)
    assert message(store, ref) == ("working", "")


def test_completing_clears_the_progress_text(store: WhiteBoxStore, tasks: TaskFactory) -> None:
    ref, gen = tasks.running()
    store.report(ref, gen, "almost there")
    assert store.finish(ref, gen, TaskStatus.COMPLETED, RESULT) == "OK"
    assert message(store, ref) == ("completed", "")


def test_failing_shows_the_failures_message_or_none(
    store: WhiteBoxStore, tasks: TaskFactory
) -> None:
    with_message, gen = tasks.running()
    store.report(with_message, gen, "almost there")
    store.finish(with_message, gen, TaskStatus.FAILED, ERROR, "tool blew up")
    assert message(store, with_message) == ("failed", "tool blew up")
    without, gen = tasks.running()
    store.report(without, gen, "almost there")
    store.finish(without, gen, TaskStatus.FAILED, ERROR)
    assert message(store, without) == ("failed", "")


def test_cancelling_replaces_the_progress_text(store: WhiteBoxStore, tasks: TaskFactory) -> None:
    ref, gen = tasks.running()
    store.report(ref, gen, "almost there")
    store.cancel(ref, tasks.owner, "Cancelled by client")
    assert message(store, ref) == ("cancelled", "Cancelled by client")
    waiting, gen = tasks.waiting("name")
    store.cancel(waiting, tasks.owner, "")
    assert message(store, waiting) == ("cancelled", "")


def test_a_refused_finish_leaves_the_text_alone(store: WhiteBoxStore, tasks: TaskFactory) -> None:
    ref, gen = tasks.running()
    store.report(ref, gen, "working hard")
    assert store.finish(ref, gen + 1, TaskStatus.COMPLETED, RESULT) == "SUPERSEDED"
    assert message(store, ref) == ("working", "working hard")
