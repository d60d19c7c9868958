"""The reports and log messages of one run (``ctx.report``, ``ctx.report_progress``,
``ctx.info``...): the half of :class:`~mcpq.workers.context.RunContext` that writes for people,
not for the run's control. Written late, in order with the run's other writes
(``mcpq.workers.reports``); a run's log messages go to the store only for a synchronous call
(``mcpq.workers.tool_logs``)."""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from typing import Any

from mcpq.shared.bounds import shorten
from mcpq.shared.flag import Flag
from mcpq.shared.store import Reply, TaskStore
from mcpq.shared.tool_context import DONE, Done, LogLevel
from mcpq.workers import tool_logs
from mcpq.workers.interrupts import raise_for
from mcpq.workers.reports import PendingReport, Report, ReportFlusher


class RunReports:
    """Mixed into ``RunContext``, which sets these attributes."""

    _store: TaskStore
    ref: str
    gen: int
    _reports: ReportFlusher | None
    _pending: PendingReport
    _max_message_chars: int
    _keep_logs: bool
    _tool: str
    _logged: int
    cancel_seen: Flag
    _stopped_by: Reply

    def _inside(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def report(self, message: str) -> Done:
        return self._status(message)

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> Done:
        for name, value in (("progress", progress), ("total", total)):
            if value is not None and not (isinstance(value, int | float) and math.isfinite(value)):
                raise TypeError(f"report_progress: {name} must be a finite number, not {value!r}")
        if message is None:
            message = (
                _number(progress) if total is None else f"{_number(progress)}/{_number(total)}"
            )
        return self._status(message, float(progress), None if total is None else float(total))

    def _status(
        self, message: str, progress: float | None = None, total: float | None = None
    ) -> Done:
        with self._inside():
            # Shortened, not refused: a status line is for people, and stored for every poll.
            text = shorten(message, self._max_message_chars)
            if self._reports is None:
                reply = self._store.report(self.ref, self.gen, text, progress=progress, total=total)
                if reply is not Reply.OK:
                    raise_for(reply)
                return DONE
            # Written later (mcpq.workers.reports); a cancel this worker knows of still stops here.
            if self.cancel_seen.is_set():
                raise_for(self._stopped_by)
            if self._pending.set(text, self._store.now_ms(), progress, total):
                self._reports.schedule(self._pending)
        return DONE

    def log(self, level: LogLevel, data: Any, *, logger_name: str | None = None) -> Done:
        with self._inside():
            params = tool_logs.entry(level, data, logger_name, self._tool)
            if self.cancel_seen.is_set():
                raise_for(self._stopped_by)
            if not self._keep_logs:
                return DONE  # a task's: the worker's log only (no stream may carry it)
            self._logged += 1
            first, full = self._pending.add_log(params, self._logged)
            if self._reports is None or full:
                self._flush_report()
            elif first:
                self._reports.schedule(self._pending)
        return DONE

    def debug(self, data: Any, *, logger_name: str | None = None) -> Done:
        return self.log("debug", data, logger_name=logger_name)

    def info(self, data: Any, *, logger_name: str | None = None) -> Done:
        return self.log("info", data, logger_name=logger_name)

    def warning(self, data: Any, *, logger_name: str | None = None) -> Done:
        return self.log("warning", data, logger_name=logger_name)

    def error(self, data: Any, *, logger_name: str | None = None) -> Done:
        return self.log("error", data, logger_name=logger_name)

    def _write_report(self, report: Report) -> Reply:
        return self._store.report(
            self.ref,
            self.gen,
            report.message,
            report.count,
            report.at_ms,
            progress=report.progress,
            total=report.total,
            logs=report.logs,
            first_log=report.first_log,
        )

    def discard_report(self, *, keep: bool = False) -> None:
        """The run ends: its final write replaces any report still pending. With ``keep``
        (it completed), a synchronous call's report stays for :meth:`flush_logs`."""
        if not (keep and self._keep_logs):
            self._pending.discard()

    def flush_logs(self) -> None:
        """Before the run's final write: the log messages still pending, and a synchronous
        call's last progress, so that the call's stream sends them before its result (a tool
        that reports faster than reports are written still shows where it ended). A refusal
        is the final write's to report."""
        if not self._keep_logs:
            self._pending.discard()
        self._pending.flush()

    def _flush_report(self) -> None:
        """Before another write of this run: its pending report first, so they stay in order."""
        reply = self._pending.flush()
        if reply is not Reply.OK:
            raise_for(reply)


def _number(value: float) -> str:
    """A progress number for people: 2100000, not 2.1e+06; 1.5; 0.3333."""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.4f}".rstrip("0").rstrip(".")
