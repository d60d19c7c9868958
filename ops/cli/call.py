"""``mcpq call TOOL`` and ``mcpq task get|watch|answer|cancel TASK_ID``: a terminal client.

Built on :mod:`mcpq.client` (the ``client`` extra: the ``mcp`` SDK and ``rich``). The SDK is
async; the terminal is not: the SDK client lives on an event loop in a background thread (an
anyio blocking portal) and this module's main thread drives the conversation, so every prompt
reads the terminal from the main thread. This module holds the commands themselves (their
options, the connection, what each one does); a task is followed by :mod:`mcpq.ops.cli.call_follow`
(where Ctrl-C cancels, then detaches), a tool's ``key=value`` arguments are typed by
:mod:`ops.cli.call_arguments`, questions are asked by :mod:`ops.cli.call_prompts`, and the outcome
and its exit status (``EXIT_*``) are :mod:`ops.cli.call_output`'s. Before the task exists, Ctrl-C
is a plain ``KeyboardInterrupt`` (130).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from mcpq.ops.cli.call_arguments import parse_arguments
from mcpq.ops.cli.call_follow import answer_questions, follow
from mcpq.ops.cli.call_output import (
    EXIT_COMPLETED,
    EXIT_DETACHED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    print_result,
    print_task_id,
)
from mcpq.ops.cli.call_prompts import UsageError, ask_form, ask_sampling

if TYPE_CHECKING:
    import mcp_types as types
    from anyio.from_thread import BlockingPortal
    from mcp import Client
    from rich.console import Console

    from mcpq.shared.settings import Settings


def add_parsers(sub: Any) -> None:
    """Register ``call`` and ``task`` on `mcpq`'s sub-parsers."""
    call = sub.add_parser("call", help="call a tool as a task and follow it (a terminal client)")
    call.add_argument("tool", help="the tool's name (see tools/list)")
    call.add_argument(
        "arguments", nargs="*", metavar="key=value", help="arguments, typed by the tool's schema"
    )
    call.add_argument("--json", dest="json_args", metavar="ARGS", help="arguments as JSON")
    call.add_argument("--detach", action="store_true", help="print the taskId at once and exit")
    call.add_argument(
        "--sampling-command",
        metavar="CMD",
        help="answer sampling requests with this command (the prompt on its stdin, the answer "
        "on its stdout) instead of asking",
    )
    _common(call)

    task = sub.add_parser("task", help="get, watch, answer or cancel a task by its taskId")
    task_sub = task.add_subparsers(dest="task_command", required=True, metavar="ACTION")
    for name, text in (
        ("get", "print the task (status, message, result)"),
        ("watch", "follow the task to its end, answering its questions"),
        ("answer", "answer the task's outstanding questions once"),
        ("cancel", "cancel the task"),
    ):
        action = task_sub.add_parser(name, help=text)
        # (An id with a leading '-', which mcpq no longer hands out, goes after `--`.)
        action.add_argument(
            "task_id", metavar="TASK_ID", help="the taskId (after -- if it starts with -)"
        )
        if name in {"watch", "answer"}:
            action.add_argument("--sampling-command", metavar="CMD")
        _common(action)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help="the MCP endpoint (default: $MCPQ_URL or the local dev one)")
    parser.add_argument("--token", help="bearer token (default: $MCPQ_TOKEN)")
    parser.add_argument(
        "--output", choices=["text", "json"], default="text", help="json: one object on stdout"
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """``mcpq call`` / ``mcpq task``; returns the exit status."""
    try:
        from mcp import MCPError  # the `client` extra
        from rich.console import Console
    except ImportError as exc:
        print(
            f"mcpq {args.command}: needs the client extra ({exc.name} missing): "
            "pip install 'mcpq[client]'",
            file=sys.stderr,
        )
        return EXIT_USAGE
    ui = Console(stderr=True, highlight=False)
    where = args.url or settings.client_url
    try:
        with _connected(where, args.token or settings.client_token, ui, args) as (portal, client):
            if args.command == "call":
                return _call(portal, client, ui, args)
            return _task(portal, client, ui, args)
    except KeyboardInterrupt:
        print(f"mcpq {args.command}: interrupted", file=sys.stderr)
        return EXIT_DETACHED
    except Exception as exc:  # the portal may wrap it in an exception group
        return _failure(args.command, where, _leaf(exc), MCPError)


def _failure(command: str, where: str, exc: BaseException, mcp_error: type[Exception]) -> int:
    """One line, never a traceback: a bad argument (2); an error the server answered, or an
    unreachable server, TLS, a broken proxy (5)."""
    if isinstance(exc, UsageError):
        print(f"mcpq {command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if isinstance(exc, mcp_error):
        error = exc.error  # type: ignore[attr-defined]
        print(f"mcpq {command}: {error.message} (code {error.code})", file=sys.stderr)
        return EXIT_UNREACHABLE
    print(f"mcpq {command}: {where}: {type(exc).__name__}: {exc}", file=sys.stderr)
    return EXIT_UNREACHABLE


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


@contextmanager
def _connected(
    url: str, token: str, ui: Console, args: argparse.Namespace
) -> Iterator[tuple[BlockingPortal, Client]]:
    from anyio.from_thread import start_blocking_portal

    from mcpq import client as tasks

    command = getattr(args, "sampling_command", None)

    # Only MRTR rounds before a task exists reach these (on the loop thread, while the main
    # thread waits for `start`); a task's own questions are asked by the main thread.
    async def on_input(params: types.ElicitRequestParams) -> types.ElicitResult:
        return ask_form(ui, params)

    async def on_sampling(params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return ask_sampling(ui, params, command)

    with start_blocking_portal() as portal:
        connection = tasks.connect(
            url,
            token=token or None,
            on_input=on_input,
            on_sampling=on_sampling,
            client_name="mcpq-cli",
        )
        with portal.wrap_async_context_manager(connection) as client:
            yield portal, client


# -- mcpq call ---------------------------------------------------------------------------------
def _call(portal: BlockingPortal, client: Client, ui: Console, args: argparse.Namespace) -> int:
    import mcp_types as types

    from mcpq import client as tasks

    listed = portal.call(client.list_tools)
    tool = next((t for t in listed.tools if t.name == args.tool), None)
    if tool is None:
        raise UsageError(f"no tool {args.tool!r} on this server")
    arguments = parse_arguments(args.arguments, args.json_args, tool.input_schema)
    started = portal.call(tasks.start, client, args.tool, arguments)
    if isinstance(started, types.CallToolResult):  # a tool that never runs as a task
        return print_result(None, "completed", started, args.output)
    if args.detach:
        print_task_id(args.output, started.task_id, started.status)
        return EXIT_COMPLETED
    return follow(portal, client, ui, started.task_id, args)


# -- mcpq task ---------------------------------------------------------------------------------
def _task(portal: BlockingPortal, client: Client, ui: Console, args: argparse.Namespace) -> int:
    from mcpq import client as tasks

    task_id = args.task_id
    if args.task_command == "watch":
        return follow(portal, client, ui, task_id, args)
    if args.task_command == "cancel":
        portal.call(tasks.cancel, client, task_id)
    task = portal.call(tasks.get, client, task_id)
    if args.task_command == "answer":
        if task.status != "input_required":
            ui.print(f"nothing to answer: the task is {task.status}")
        else:
            count = len(answer_questions(portal, client, ui, task, set(), args))
            ui.print(f"answered {count}")
            task = portal.call(tasks.get, client, task_id)
    return print_result(task, task.status, task.call_tool_result(), args.output)
