"""Late status reports (``mcpq.workers.reports``): due on a grid of half the delay, so that one
wake-up of the flusher writes every report due in that step."""

from __future__ import annotations

import time

import pytest

from mcpq.shared.store import Reply
from mcpq.workers import reports
from mcpq.workers.reports import PendingReport, ReportFlusher


def test_reports_made_close_together_fall_due_together_and_are_all_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    written: list[str] = []
    elsewhere: list[str] = []

    def pending(name: str, written: list[str] = elsewhere) -> PendingReport:
        report = PendingReport(
            lambda report: written.append(report.message) or Reply.OK, lambda reply: None
        )
        report.set(name, 0)
        return report

    class Clock:
        now = 1000.001

        def monotonic(self) -> float:
            return self.now

    clock = Clock()
    monkeypatch.setattr(reports, "time", clock)
    flusher = ReportFlusher(0.1)
    flusher.schedule(pending("first"))
    clock.now = 1000.02
    flusher.schedule(pending("second"))
    due = sorted(entry[0] for entry in flusher._due)
    # 1000.101 and 1000.12 both round up to the grid step 1000.15 (half the delay: 0.05 s).
    assert due == [pytest.approx(1000.15), pytest.approx(1000.15)]
    monkeypatch.undo()

    flusher = ReportFlusher(0.05)
    flusher.schedule(pending("a", written))
    flusher.schedule(pending("b", written))
    deadline = time.monotonic() + 5
    while len(written) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert written == ["a", "b"]  # in the order they were made
