"""``mcpq tasks list|show|cancel``: the operator's view of tasks, read from the task store itself.

Not MCP: the spec has no method that lists tasks, and an operator is nobody's principal. The
store's operator access (``mcpq.shared.store.admin``) lists tasks (unfinished ones from its
indexes, oldest first; finished ones by a ``SCAN`` of the task records, in storage order), shows
one task with its payloads opened (``MCPQ_DATA_KEYS``) and cancels with the same transition as
``tasks/cancel``; this module parses the command line, prints, asks before cancelling and revokes
a cancelled task's queued Celery message as the web tier does. Tasks are named by their ``ref``
(a hash of the ``taskId``, the ``task`` of log lines is its first 12 digits): no ``taskId`` is
ever read or printed.

The Redis is found as ``mcpq status`` finds it (``ops.cli.status.locate_redis``), said on stderr so
that stdout stays the command's output (``--output json`` for scripts).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO

#: The states ``--state`` accepts: the spec's five.
STATES = ("working", "input_required", "completed", "failed", "cancelled")
#: The one place the listing's order is explained (``--help`` and docs/operations.md say it).
_ORDER = (
    "Only unfinished states (--state working/input_required): oldest first, from the index of "
    "unfinished tasks. Any finished state, or no --state (all five): every task record is "
    "walked with SCAN, and finished tasks are listed in storage order, not by age (unfinished "
    "ones among them). --older-than counts from the task's creation in both cases (the age "
    "column), also for finished tasks. No taskId is ever printed: tasks are named by their ref."
)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)?")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def duration_ms(raw: str) -> int:
    """argparse type: ``90``, ``90s``, ``15m``, ``1h``, ``2d``, ``500ms`` -> milliseconds."""
    found = _DURATION.fullmatch(raw.strip())
    if found is None:
        raise argparse.ArgumentTypeError(f"not a duration (e.g. 30s, 15m, 1h, 2d): {raw!r}")
    return int(float(found.group(1)) * _UNIT_MS[found.group(2) or "s"])


def _limit(raw: str) -> int:
    value = int(raw)
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"between 1 and 1000: {raw}")
    return value


def add_parser(sub: Any) -> None:
    """Register ``mcpq tasks`` (plural: the operator's; ``mcpq task`` is a client's)."""
    tasks = sub.add_parser(
        "tasks",
        help="operators: list tasks, show one, cancel some (reads the store; no ids)",
    )
    actions = tasks.add_subparsers(dest="tasks_command", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list",
        help="tasks by ref: unfinished oldest first; finished in storage order",
        description=_ORDER,
    )
    listing.add_argument(
        "--state",
        action="append",
        choices=STATES,
        default=[],
        help="only tasks in this state (repeatable); default: all five states",
    )
    listing.add_argument(
        "--older-than",
        type=duration_ms,
        default=0,
        help="created longer ago than (30s, 1h...), finished or not",
    )
    listing.add_argument("--tool", default="", help="only runs of this tool")
    listing.add_argument(
        "--principal", default="", help="only tasks of this owner (key:<id>, oauth:<hash>...)"
    )
    listing.add_argument("--limit", type=_limit, default=50, help="tasks per page (default 50)")
    listing.add_argument(
        "--cursor",
        default="",
        help="the next page (printed by the last one; give the same --state and filters)",
    )
    show = actions.add_parser("show", help="every stored field of a task, input requests too")
    show.add_argument("ref", help="the task's ref (or its first 6+ hex digits, if unfinished)")
    cancel = actions.add_parser("cancel", help="cancel tasks as tasks/cancel does")
    cancel.add_argument("refs", nargs="+", metavar="REF", help="refs (or unique prefixes)")
    cancel.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    for action in (listing, show, cancel):
        action.add_argument("--output", choices=["text", "json"], default="text")


def run_tasks(
    args: argparse.Namespace,
    environ: Mapping[str, str],
    *,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
) -> int:
    """Run ``mcpq tasks``; returns the exit status: 0 done, 1 store unavailable or a task not
    found or not cancelled, 2 a bad request (cursor, ref, filter, setting)."""
    from mcpq.ops.cli.status import locate_redis
    from mcpq.shared.errors import StoreUnavailable
    from mcpq.shared.sealing import DataKeyError
    from mcpq.shared.settings import Settings
    from mcpq.shared.store import AdminError, open_admin

    out = out or sys.stdout
    target = locate_redis(environ)
    print(target.line, file=sys.stderr)
    if target.problem:
        print(f"mcpq tasks: {target.problem}", file=sys.stderr)
        return 2
    try:
        settings = Settings.from_env(target.environ)
        admin = open_admin(settings)
        if args.tasks_command == "list":
            return _list(admin, args, out)
        if args.tasks_command == "show":
            return _show(admin, args, out)
        return _cancel(admin, args, settings, stdin or sys.stdin, out)
    except (AdminError, DataKeyError, ValueError) as exc:
        print(f"mcpq tasks: {exc}", file=sys.stderr)
        return 2
    except StoreUnavailable as exc:
        cause = exc.__cause__ or exc.__context__
        detail = f" ({cause})" if cause else ""
        print(f"mcpq tasks: {exc}{detail}", file=sys.stderr)
        return 1


def _list(admin: Any, args: argparse.Namespace, out: TextIO) -> int:
    from mcpq.shared.store import TaskFilter, TaskStatus

    which = TaskFilter(
        states=frozenset(TaskStatus(s) for s in args.state),
        older_than_ms=args.older_than,
        tool=args.tool,
        principal=args.principal,
    )
    page = admin.list_tasks(which, args.limit, args.cursor or None)
    if args.output == "json":
        tasks = [task.as_json(page.now_ms) for task in page.tasks]
        json.dump({"tasks": tasks, "nextCursor": page.cursor}, out, indent=2)
        out.write("\n")
        return 0
    print(
        f"{'ref':<32}  {'state':<14}  {'tool':<20}  {'age':>8}  {'principal':<24}  message",
        file=out,
    )
    for task in page.tasks:
        state = f"{task.status}{' (parked)' if task.parked else ''}"
        print(
            f"{task.ref:<32}  {state:<14}  {_cut(task.tool, 20):<20}  "
            f"{_age(task.age_s(page.now_ms)):>8}  {_cut(task.owner, 24):<24}  "
            f"{_cut(_oneline(task.message), 80)}",
            file=out,
        )
    if not page.tasks:
        print("(no task matches)", file=out)
    if page.cursor:
        print(f"more: --cursor {page.cursor}", file=out)
    return 0


def _show(admin: Any, args: argparse.Namespace, out: TextIO) -> int:
    ref = admin.resolve(args.ref)
    detail = admin.show(ref)
    if detail is None:
        print(f"mcpq tasks: no task with ref {ref} (never created, or expired)", file=sys.stderr)
        return 1
    if args.output == "json":
        body = {"ref": ref, "fields": detail.fields, "inputRequests": detail.inputs}
        json.dump(body, out, indent=2, default=str)
        out.write("\n")
        return 0
    print(f"ref: {ref}", file=out)
    for name, value in detail.fields.items():
        shown = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        if name.endswith("_ms") and name != "ttl_ms" and value.isdigit() and int(value) > 0:
            shown = (
                f"{value} ({_when(int(value))}, {_age((detail.now_ms - int(value)) / 1000)} ago)"
            )
        print(f"  {name}: {shown}", file=out)
    print(f"input requests outstanding: {len(detail.inputs)}", file=out)
    for key, request in detail.inputs.items():
        print(f"  {key}: {json.dumps(request, sort_keys=True)}", file=out)
    return 0


def _cancel(admin: Any, args: argparse.Namespace, settings: Any, stdin: TextIO, out: TextIO) -> int:
    from mcpq.shared.store import Reply

    refs = list(dict.fromkeys(admin.resolve(ref) for ref in args.refs))
    if not args.yes:
        print(f"cancel {len(refs)} task(s): {' '.join(refs)}", file=sys.stderr)
        print("type 'yes' to cancel: ", end="", file=sys.stderr, flush=True)
        answer = stdin.readline().strip().lower()
        if answer not in {"y", "yes"}:
            print("mcpq tasks: nothing cancelled", file=sys.stderr)
            return 1
    results: dict[str, str] = {}
    for ref in refs:
        cancelled = admin.cancel(ref)
        if cancelled.reply is Reply.CANCELLED:
            results[ref] = "cancelled"
            _revoke(settings, ref)
        elif cancelled.reply is Reply.TERMINAL:
            results[ref] = "already finished"
        else:
            results[ref] = "not found"
    if args.output == "json":
        json.dump({"results": results}, out, indent=2)
        out.write("\n")
    else:
        for ref, outcome in results.items():
            print(f"{ref}  {outcome}", file=out)
    return 0 if all(r != "not found" for r in results.values()) else 1


def _revoke(settings: Any, ref: str) -> None:
    """Drop the task's queued run if it has not started (as the web tier's cancel does). The
    store already says ``cancelled``, which a run that starts anyway sees at its claim: a revoke
    that fails is only a warning."""
    from mcpq.ops.cli.status import celery_app

    try:
        celery_app(settings).control.revoke(ref)
    except Exception as exc:  # the broker is down: the cancel stands
        print(f"mcpq tasks: warning: revoke failed ({type(exc).__name__})", file=sys.stderr)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _oneline(text: str) -> str:
    """A status message on one line, its control characters shown escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))
