"""The task states the store keeps and the reply codes its scripts answer, as ``str`` enums.

Lua speaks plain strings; they become these enums at one place, the parse functions of
``mcpq.shared.store.calls``, so nothing outside the store compares bare strings.
"""

from __future__ import annotations

from enum import StrEnum


class TaskStatus(StrEnum):
    """A task's ``status`` (the spec's five states)."""

    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED})
"""States a task never leaves."""


class Reply(StrEnum):
    """What a transition script answered. The fence (``_prelude.lua``) answers GONE, SUPERSEDED
    or TERMINAL to a worker write that must not happen; the others are per script."""

    OK = "OK"
    GONE = "GONE"  # the task no longer exists (expired)
    SUPERSEDED = "SUPERSEDED"  # a newer run (higher generation) owns the task
    TERMINAL = "TERMINAL"  # the task has ended: nothing changes it any more
    BUSY = "BUSY"  # claim: another run holds a live lease
    PARKED = "PARKED"  # claim/renew: the task waits for answers with no run; park: done
    ANSWERED = "ANSWERED"  # park: nothing is outstanding any more, go on in place
    NOTFOUND = "NOTFOUND"  # client-side writes: unknown task, or another principal's
    IGNORED = "IGNORED"  # answer: no outstanding key was answered
    PARTIAL = "PARTIAL"  # answer: some keys are still outstanding
    WOKEN = "WOKEN"  # answer: all answered; the waiting run was woken
    RESUME = "RESUME"  # answer: all answered; the task was parked and must be enqueued
    CANCELLED = "CANCELLED"  # cancel: the task is now cancelled
    POISONED = "POISONED"  # claim: its runs kept losing their worker; the sweeper fails it
    SOLO = "SOLO"  # claim: the task must run alone, and the claiming process holds other runs
