"""``mcpq call TOOL`` and ``mcpq task get|watch|answer|cancel TASK_ID``: a terminal client.

Built on :mod:`mcpq.client` (the ``client`` extra: the ``mcp`` SDK and ``rich``). The SDK is
async; the terminal is not: the SDK client lives on an event loop in a background thread (an
anyio blocking portal) and this module's main thread drives the conversation, so every prompt
reads the terminal from the main thread. This module holds the commands themselves (their
options, the connection, what each one does); a task is followed by :mod:`mcpq.ops.cli.call_follow`
(where Ctrl-C cancels, then detaches), a tool's ``key=value`` arguments (and ``--answer``'s) are
typed by :mod:`ops.cli.call_arguments`, questions are asked by :mod:`ops.cli.call_prompts`, and
the outcome, a failure's one line and the exit status (``EXIT_*``) are
:mod:`ops.cli.call_output`'s. Before the task exists, Ctrl-C is a plain ``KeyboardInterrupt``
(130).

The endpoint is ``--url``, else ``MCPQ_URL``, else the one of the `mcpq dev` this user runs
(its state file: :func:`mcpq.ops.dev.state.running_dev`), else the local default.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from mcpq.ops.cli.call_arguments import parse_answers, parse_arguments
from mcpq.ops.cli.call_follow import answer_questions, follow
from mcpq.ops.cli.call_output import (
    EXIT_COMPLETED,
    EXIT_DETACHED,
    EXIT_USAGE,
    Refusals,
    failure,
    print_result,
    print_task_id,
)
from mcpq.ops.cli.call_prompts import CannotPrompt, UsageError, ask_form, ask_sampling
from mcpq.shared.settings import Settings

if TYPE_CHECKING:
    import mcp_types as types
    from anyio.from_thread import BlockingPortal
    from mcp import Client
    from rich.console import Console

#: Where `mcpq dev` serves by default (``MCPQ_URL`` unset and no `mcpq dev` found).
_DEFAULT_URL = Settings.from_env({}).client_url


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
    _answer_option(call)
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
            _answer_option(action)
        _common(action)


def _answer_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--answer",
        action="append",
        metavar="KEY=JSON",
        help="answer the field KEY of the task's forms with this JSON value, without asking "
        "(repeatable; e.g. approve=true)",
    )


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        help="the MCP endpoint (default: $MCPQ_URL, else the running mcpq dev's, else "
        f"{_DEFAULT_URL})",
    )
    parser.add_argument("--token", help="bearer token (default: $MCPQ_TOKEN)")
    parser.add_argument(
        "--output", choices=["text", "json"], default="text", help="json: one object on stdout"
    )


def endpoint(url: str | None, settings: Settings, environ: Mapping[str, str]) -> str:
    """``--url``, else ``MCPQ_URL``, else the endpoint of the `mcpq dev` this user runs, else
    the local default."""
    if url:
        return url
    if settings.client_url and ("MCPQ_URL" in environ or settings.client_url != _DEFAULT_URL):
        return settings.client_url
    from mcpq.ops.dev.state import running_dev

    dev = running_dev(environ)
    return dev.web_url if dev is not None and dev.web_url else _DEFAULT_URL


def run(
    args: argparse.Namespace, settings: Settings, environ: Mapping[str, str] | None = None
) -> int:
    """``mcpq call`` / ``mcpq task``; returns the exit status."""
    try:
        from mcp import MCPError  # the `client` extra
        from rich.console import Console
    except ImportError as exc:
        print(
            f"mcpq {args.command}: needs the client extra ({exc.name} missing): "
            "pip install 'mcpq-server[client]'",
            file=sys.stderr,
        )
        return EXIT_USAGE
    ui = Console(stderr=True, highlight=False)
    where = endpoint(args.url, settings, os.environ if environ is None else environ)
    refusals = Refusals()
    try:
        args.answers = parse_answers(getattr(args, "answer", None))
        token = args.token or settings.client_token
        with _connected(where, token, ui, args, refusals) as (portal, client):
            if args.command == "call":
                return _call(portal, client, ui, args)
            return _task(portal, client, ui, args)
    except KeyboardInterrupt:
        print(f"mcpq {args.command}: interrupted", file=sys.stderr)
        return EXIT_DETACHED
    except Exception as exc:  # the portal may wrap it in an exception group
        line, status = failure(_leaf(exc), where, refusals.last, MCPError)
        print(f"mcpq {args.command}: {line}", file=sys.stderr)
        return status


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


@contextmanager
def _connected(
    url: str, token: str, ui: Console, args: argparse.Namespace, refusals: Refusals
) -> Iterator[tuple[BlockingPortal, Client]]:
    from anyio.from_thread import start_blocking_portal

    from mcpq import client as tasks

    command = getattr(args, "sampling_command", None)

    # Only MRTR rounds before a task exists reach these (on the loop thread, while the main
    # thread waits for `start`); a task's own questions are asked by the main thread.
    async def on_input(params: types.ElicitRequestParams) -> types.ElicitResult:
        return ask_form(ui, params, args.answers)

    async def on_sampling(params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return ask_sampling(ui, params, command)

    with start_blocking_portal() as portal:
        connection = tasks.connect(
            url,
            token=token or None,
            on_input=on_input,
            on_sampling=on_sampling,
            client_name="mcpq-cli",
            on_response=refusals,
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
    try:
        return follow(portal, client, ui, started.task_id, args)
    except (CannotPrompt, UsageError):
        # Nobody will answer: a task left waiting would hold its place until its TTL.
        portal.call(tasks.cancel, client, started.task_id)
        raise


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
