"""Test-only tools of the fault layer, loaded by its stacks through ``MCPQ_TOOLS``
(``tests.faults.tools_faults``). Like any tool module it imports only ``shared``.

Every side effect is a line appended to a file the test names in the arguments, so a test counts
what really happened, across runs and processes:

- ``calls``: one line each time the tool body starts (once per run, replays included);
- ``path`` (in ``step_then_sleep``): one line each time the memoized step's function runs.

Lines are short single ``write`` calls on a file opened for append, so concurrent writers never
interleave.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

from mcpq import ToolContext, tool

HELD_QUEUE = "faults-held"
"""Queue of ``ask_held``: served by a worker whose input hold is long (the run keeps its slot)."""

_CONFIRM = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
}


def append_line(path: str, line: str) -> int:
    """Append ``line`` to ``path``; returns the number of lines the file has afterwards."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
    return len(Path(path).read_text(encoding="utf-8").splitlines())


@tool(
    task="optional",
    description="Test-only: a memoized step appends a line to `path`, then the tool sleeps.",
)
def step_then_sleep(ctx: ToolContext, path: str, seconds: float = 3.0, calls: str = "") -> str:
    if calls:
        append_line(calls, "call")
    lines = ctx.step("effect", lambda: append_line(path, "effect"))
    ctx.report("stepped")
    ctx.sleep(seconds)
    return f"effect written (line {lines}), slept {seconds:g}s"


def _ask(ctx: ToolContext, calls: str, label: str) -> str:
    append_line(calls, label)
    answer = ctx.elicit(f"Proceed with {label}?", _CONFIRM)
    content = answer.get("content") or {}
    verdict = "yes" if answer.get("action") == "accept" and content.get("ok") is True else "no"
    return f"{label}: {verdict}"


@tool(task="optional", description="Test-only: asks one question; records each call in `calls`.")
def ask_once(ctx: ToolContext, calls: str, label: str = "q") -> str:
    return _ask(ctx, calls, label)


@tool(
    task="optional",
    queue=HELD_QUEUE,
    description="Test-only: ask_once on the queue whose worker holds its slot while waiting.",
)
def ask_held(ctx: ToolContext, calls: str, label: str = "q") -> str:
    return _ask(ctx, calls, label)


@tool(
    task="optional",
    max_run_s=2,
    description="Test-only: reports, then blocks forever outside the context (a hung tool).",
)
def hang_forever(ctx: ToolContext, calls: str) -> str:
    append_line(calls, "call")
    ctx.report("about to hang")
    threading.Event().wait()  # never set: only the watchdog ends this run
    return "unreachable"


@tool(
    task="optional",
    description="Test-only: the docs' idempotent write, held once between fn and its save.",
)
def charge_once(ctx: ToolContext, db: str, calls: str, amount: int = 42) -> str:
    """The example of the README's replay contract: the step's ``fn`` passes the step's key to
    the outside system (here a SQLite table whose key is unique, as a payment API's idempotency
    key is), so a second call of ``fn`` writes nothing twice. The first call then blocks before
    returning (its value unsaved) for the test to kill its worker right there."""

    def charge() -> str:
        key = ctx.step_key("charge")
        first = append_line(calls, key) == 1
        with sqlite3.connect(db) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS charges (key TEXT PRIMARY KEY, cents INT)")
            conn.execute(
                "INSERT INTO charges VALUES (?, ?) ON CONFLICT(key) DO NOTHING", (key, amount)
            )
        if first:
            threading.Event().wait(120)  # killed here: after the write, before the save
        return key

    key = ctx.step("charge", charge)
    return f"charged under {key}"


@tool(
    task="optional",
    description="Test-only: ends the process running it at once (os._exit), as a crash would.",
)
def exit_worker(ctx: ToolContext, calls: str) -> str:
    append_line(calls, "call")
    os._exit(1)  # no cleanup, no finish, no hand-back: the run loses its worker


@tool(task="optional", description="Test-only: reports progress, then asks one question.")
def report_then_ask(ctx: ToolContext, calls: str) -> str:
    ctx.report("preparing the question")
    return _ask(ctx, calls, "after-report")
