"""What an operator's task listing shows and asks (``mcpq tasks``, ``mcpq.shared.store.admin``): the
filter, one line per task, a page with its cursor, one task in full, and the one error."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from mcpq.shared.store.states import TERMINAL, TaskStatus

_CURSOR = re.compile(r"(\d{1,16})\.([0-9a-f]{32})")


class AdminError(ValueError):
    """A request the store cannot serve as asked (a bad cursor, an ambiguous ref): its text is
    the one line an operator sees."""


@dataclass(frozen=True)
class Position:
    """Where a page ended: its last task. As text (a cursor): ``<createdAt>.<ref>``."""

    created_ms: int
    ref: str

    def __str__(self) -> str:
        return f"{self.created_ms}.{self.ref}"

    @staticmethod
    def is_cursor(text: str) -> bool:
        return _CURSOR.fullmatch(text.strip()) is not None

    @classmethod
    def parse(cls, text: str) -> Position:
        found = _CURSOR.fullmatch(text.strip())
        if found is None:
            raise AdminError(f"not a cursor of mcpq tasks list: {text!r}")
        return cls(int(found.group(1)), found.group(2))


@dataclass(frozen=True)
class TaskFilter:
    """Which tasks to list. ``states`` empty: all five. ``older_than_ms``: created at least that
    long ago (by Redis's clock), whatever the state."""

    states: frozenset[TaskStatus] = frozenset()
    older_than_ms: int = 0
    tool: str = ""
    principal: str = ""

    @property
    def scans(self) -> bool:
        """Whether this listing must walk every task record (``SCAN``): it may hold finished
        tasks, which no index holds."""
        return not self.states or bool(self.states & TERMINAL)

    def matches(self, task: TaskSummary, now_ms: int) -> bool:
        # The index walk already bounds createdAt by its score; the scan has only this test.
        return (
            (not self.states or task.status in self.states)
            and (self.older_than_ms <= 0 or task.created_ms <= now_ms - self.older_than_ms)
            and (not self.tool or task.tool == self.tool)
            and (not self.principal or task.owner == self.principal)
        )


@dataclass(frozen=True)
class TaskSummary:
    """One line of a listing."""

    ref: str
    status: TaskStatus
    tool: str
    owner: str
    created_ms: int
    updated_ms: int
    parked: bool
    runs: int
    message: str

    def age_s(self, now_ms: int) -> float:
        return max(0, now_ms - self.created_ms) / 1000

    def as_json(self, now_ms: int) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "status": self.status.value,
            "tool": self.tool,
            "principal": self.owner,
            "createdMs": self.created_ms,
            "updatedMs": self.updated_ms,
            "ageS": round(self.age_s(now_ms), 3),
            "parked": self.parked,
            "runs": self.runs,
            "statusMessage": self.message,
        }


@dataclass
class Page:
    """A page of a listing: its tasks, the cursor of the next page (``None``: the last one), and
    Redis's clock when it was read (ages are counted on it)."""

    tasks: list[TaskSummary]
    cursor: str | None
    now_ms: int


@dataclass
class TaskDetail:
    """Every stored field of a task, payloads opened (``UNREADABLE`` where one does not), and its
    outstanding input requests."""

    ref: str
    fields: dict[str, Any]
    inputs: dict[str, Any] = field(default_factory=dict)
    now_ms: int = 0
