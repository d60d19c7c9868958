"""A run's outcome (``mcpq.workers.outcomes.RunOutcome``): the ``outcome`` label of the worker's
metrics and the ``transition`` of its ``run ended`` line, from a closed set of words that
dashboards, alerts and docs/operations.md name."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpq.shared.store import Reply, TaskStatus
from mcpq.workers.outcomes import RunOutcome

#: Every label value a run can have, as dashboards read them.
LABELS = {
    "completed", "failed", "cancelled", "parked", "abandoned", "superseded", "unreadable",
    "busy", "gone", "terminal", "poisoned", "solo",
    "discarded-gone", "discarded-superseded", "discarded-terminal",
}  # fmt: skip


def test_the_labels_are_a_closed_set_of_known_words() -> None:
    # (``detached`` is never a label: a run handed to the run loop is counted, and logged, with
    # the outcome it ends with there. It is only what its Celery job returns.)
    assert {outcome.value for outcome in RunOutcome} - {"detached"} == LABELS
    assert all(str(outcome) == outcome.value for outcome in RunOutcome)


def test_the_operations_guide_names_every_label() -> None:
    guide = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
    (row,) = [line for line in guide.read_text().splitlines() if "mcpq_tool_runs_total{" in line]
    assert [label for label in sorted(LABELS) if f"`{label}`" not in row] == []


def test_a_run_that_ended_its_task_is_labelled_with_the_tasks_status() -> None:
    for status in (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED):
        assert RunOutcome.ended(status).value == status.value


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        (Reply.BUSY, "busy"),
        (Reply.PARKED, "parked"),
        (Reply.GONE, "gone"),
        (Reply.TERMINAL, "terminal"),
        (Reply.POISONED, "poisoned"),
    ],
)
def test_every_refusal_of_claim_is_a_run_not_started(reply: Reply, label: str) -> None:
    # claim.lua: {'GONE'|'TERMINAL'|'BUSY'|'PARKED'|'POISONED'}, or OK.
    assert RunOutcome.not_started(reply) == label


@pytest.mark.parametrize("reply", [Reply.GONE, Reply.SUPERSEDED, Reply.TERMINAL])
def test_every_refusal_of_the_fence_discards_the_result(reply: Reply) -> None:
    # The fence (_prelude.lua) answers a worker's finish GONE, SUPERSEDED or TERMINAL.
    assert RunOutcome.discarded(reply) == f"discarded-{reply.lower()}"


def test_a_reply_no_run_expects_is_no_label() -> None:
    with pytest.raises(KeyError):
        RunOutcome.not_started(Reply.WOKEN)
    with pytest.raises(KeyError):
        RunOutcome.discarded(Reply.OK)
