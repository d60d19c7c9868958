"""The job contract: a run's Celery message is written by one function and read by one."""

from __future__ import annotations

from typing import Any

import pytest

from mcpq.shared.jobs import (
    REQUEST_ID_HEADER,
    TASK_TRACE_HEADER,
    TRACE_HEADER,
    Run,
    read_run,
    send_run,
)


class Recorder:
    """Stands in for ``Celery.send_task``: keeps what it was asked to publish."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def send_task(self, name: str, **options: Any) -> None:
        self.sent.append((name, options))


def test_a_run_travels_as_the_tool_name_and_the_ref_only() -> None:
    sender = Recorder()
    send_run(sender, Run("build_report", "ab" * 16, "bulk", "req-1"))
    [(name, options)] = sender.sent
    assert name == "build_report"  # Flower shows runs by tool
    assert options == {
        "args": ["ab" * 16],  # the ref: arguments and answers stay in the store
        "task_id": "ab" * 16,  # so a queued run can be revoked by ref
        "queue": "bulk",
        # No trace: tracing off.
        "headers": {REQUEST_ID_HEADER: "req-1", TRACE_HEADER: "", TASK_TRACE_HEADER: ""},
    }


def test_a_recovery_send_has_a_celery_id_of_its_own() -> None:
    # A revoke of the ref (a cancel a failover then undid) must not drop the sweeper's sends.
    sender = Recorder()
    run = Run("greet", "ab" * 16, "mcpq", recovery=True)
    send_run(sender, run)
    send_run(sender, run)
    ids = [options["task_id"] for _, options in sender.sent]
    assert ids[0] != ids[1]
    assert all(i.startswith("ab" * 16 + "-") and i != "ab" * 16 for i in ids)
    assert [options["args"] for _, options in sender.sent] == [["ab" * 16]] * 2


def test_what_was_sent_reads_back_as_the_same_run() -> None:
    sender = Recorder()
    trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    created = "00-5bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-01"
    run = Run("greet", "cd" * 16, "mcpq", "req-2", trace=trace, task_trace=created)
    send_run(sender, run)
    [(name, options)] = sender.sent
    assert read_run(name, options["args"], options["headers"], options["queue"]) == run
    assert read_run("greet", ["cd" * 16], None) == Run("greet", "cd" * 16, "", "")


@pytest.mark.parametrize("args", [[], ["a", "b"], [3], [{"ref": "x"}]])
def test_a_message_that_is_not_one_ref_is_refused(args: list[Any]) -> None:
    with pytest.raises(ValueError, match="exactly one ref"):
        read_run("greet", args, {})
