"""``mcpq tools [MODULE...]``: what tool modules declare, without starting anything.

Each tool's name, task mode, queue and input schema, as the web tier will list them and the
workers will run them, then the resources, resource templates and prompts beside them;
``--json`` for a machine (the tools only: a list, as before). The modules (default:
``MCPQ_TOOLS``'s) are imported the way `mcpq dev` checks them (``mcpq.ops.runtime.tool_check``:
a child interpreter in this folder), so a module that does not import, or a declaration mcpq
refuses, is the same one line here, with exit status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

from mcpq.ops.dev.state import running_dev
from mcpq.ops.runtime.tool_check import ToolImportError, check_tool_modules
from mcpq.shared.settings import Settings

_INDENT = "    "


def add_parser(sub: Any) -> None:
    """Register ``mcpq tools``."""
    tools = sub.add_parser(
        "tools", help="list the tools that modules declare (default: those of MCPQ_TOOLS)"
    )
    tools.add_argument(
        "modules", nargs="*", metavar="MODULE", help="a tool module's import path (repeatable)"
    )
    tools.add_argument("--json", action="store_true", help="print JSON (a list of tools)")


def run(args: argparse.Namespace, settings: Settings, environ: Mapping[str, str]) -> int:
    """List the tools (returns 0); one line on stderr and exit status 1 when the modules do not
    load (``SystemExit``: ``python -m mcpq`` does not pass a returned status on)."""
    modules: list[str] = list(args.modules) or list(settings.tools)
    folder = None
    if not args.modules and "MCPQ_TOOLS" not in environ and (dev := running_dev(environ)):
        # Nothing named, and a `mcpq dev` runs: its tools, found where it finds them.
        modules, folder = list(dev.tools) or modules, dev.folder or None
    if not modules:
        print("mcpq tools: name tool modules, or set MCPQ_TOOLS", file=sys.stderr)
        raise SystemExit(1)
    try:
        # Named on the command line, the modules are not MCPQ_TOOLS': the line says neither.
        found = check_tool_modules(
            modules, env=environ, cwd=folder, setting=None if args.modules else "MCPQ_TOOLS"
        )
    except ToolImportError as exc:
        print(f"mcpq tools: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    for warning in found.warnings:
        print(f"mcpq tools: warning: {warning}", file=sys.stderr)
    # A tool without a queue of its own runs on the default queue: shown by its name.
    listed = [{**t, "queue": t["queue"] or settings.default_queue} for t in found.listed]
    if args.json:
        print(json.dumps(listed, indent=2))
    else:
        print(render(listed, settings.default_queue))
        others = render_served(found.served)
        if others:
            print(f"\n{others}")
    return 0


def render(listed: list[dict[str, Any]], default_queue: str) -> str:
    """For a terminal: a heading per tool, its description, its input schema (indented JSON)."""
    blocks = []
    for t in listed:
        queue = f"{t['queue']} (default)" if t["queue"] == default_queue else t["queue"]
        lines = [f"{t['name']}  task: {t['task']}  queue: {queue}  module: {t['module']}"]
        lines += [f"{_INDENT}{line}".rstrip() for line in str(t["description"]).splitlines()]
        lines.append(f"{_INDENT}input schema:")
        schema = json.dumps(t["inputSchema"], indent=2)
        lines += [f"{_INDENT}{_INDENT}{line}" for line in schema.splitlines()]
        blocks.append("\n".join(lines))
    count = f"{len(listed)} tool{'' if len(listed) == 1 else 's'}"
    return "\n\n".join([*blocks, count])


def render_served(served: Mapping[str, list[dict[str, Any]]]) -> str:
    """The resources (URI, name, MIME type), templates and prompts (name and arguments, ``?``
    after an optional one), one line each under a heading; empty when there are none."""
    sections = []
    resources = served.get("resources") or []
    if resources:
        rows = [f"{r['uri']}  {r['name']}  {r.get('mimeType', '')}".rstrip() for r in resources]
        sections.append(_section("resource", rows))
    templates = served.get("templates") or []
    if templates:
        rows = [f"{t['uriTemplate']}  {t['name']}" for t in templates]
        sections.append(_section("resource template", rows))
    prompts = served.get("prompts") or []
    if prompts:
        rows = []
        for p in prompts:
            names = [a["name"] + ("" if a.get("required") else "?") for a in p["arguments"]]
            rows.append(f"{p['name']}({', '.join(names)})")
        sections.append(_section("prompt", rows))
    return "\n\n".join(sections)


def _section(kind: str, rows: list[str]) -> str:
    heading = f"{len(rows)} {kind}{'' if len(rows) == 1 else 's'}:"
    return "\n".join([heading, *(f"{_INDENT}{row}" for row in rows)])
