"""Import the tool modules (``MCPQ_TOOLS``) once, in a child interpreter, before anything starts.

`mcpq dev` runs this before it starts Redis, the web or a worker: a module that does not import,
or declares a tool mcpq refuses, is then one line naming ``MCPQ_TOOLS``, the cause and the user's
file and line, instead of a traceback from every child (Flower's a misleading ``module 'workers'
has no attribute 'entry'``). `mcpq tools` lists what it finds. A child interpreter, with the
children's environment and folder, so the check finds exactly what they will find, and the
launcher itself never runs the developer's module code.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Run by the child: import each module, report the first failure (one line) or what the modules
# declare, as JSON on the last line of its output (a module may print at import).
_CHECK = """
import json, sys
modules = sys.argv[1:]
from mcpq.shared.tools import ToolDefinitionError
from mcpq.shared.registry import Registry, ToolModuleError
try:
    registry = Registry.from_modules(modules)
except (ToolDefinitionError, ToolModuleError) as exc:  # one line already, at the user's code
    print(json.dumps({"line": str(exc)}))
except ModuleNotFoundError as exc:  # a module itself: a dependency's is a ToolModuleError
    module = next((m for m in modules if m not in sys.modules), modules[-1])
    print(json.dumps({"module": module, "missing": exc.name,
                      "line": f"module {module!r} failed to import: {type(exc).__name__}: {exc}"}))
except BaseException as exc:  # SystemExit, KeyboardInterrupt at import
    module = next((m for m in modules if m not in sys.modules), modules[-1])
    print(json.dumps({"line": f"module {module!r} failed to import: {type(exc).__name__}: {exc}"}))
else:
    listed = [
        {"name": t.name, "module": t.fn.__module__, "description": t.description,
         "task": t.mode, "queue": t.queue, "inputSchema": t.input_schema}
        for t in registry.tools.values()
    ]
    served = {
        "resources": [r.listing() for r in registry.resources.values()],
        "templates": [t.listing() for t in registry.templates.values()],
        "prompts": [p.listing() for p in registry.prompts.values()],
    }
    print(json.dumps({"tools": listed, "served": served, "warnings": registry.warnings}))
"""


@dataclass(frozen=True)
class ToolModules:
    """What importing the tool modules found: their tools and the queues they name."""

    tools: list[str]
    queues: list[str]
    #: Each tool as ``mcpq tools`` shows it: name, module, description, task, queue (None: the
    #: default queue), inputSchema.
    listed: list[dict[str, Any]] = field(default_factory=list)
    #: One line per module that declares no tool.
    warnings: list[str] = field(default_factory=list)
    #: The resources, templates and prompts, as ``resources/list``, ``resources/templates/list``
    #: and ``prompts/list`` show them (keys ``resources``, ``templates``, ``prompts``).
    served: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


class ToolImportError(Exception):
    """A tool module does not import, or mcpq refuses a declaration in it; ``str()`` is the one
    line to print."""


def check_tool_modules(
    modules: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | None = None,
    timeout: float = 60,
    setting: str | None = "MCPQ_TOOLS",
) -> ToolModules:
    """Import ``modules`` as the children will; :class:`ToolImportError` when one fails. Its
    line starts with ``setting=modules:`` (``None``: modules named on a command line)."""
    prefix = f"{setting}={','.join(modules)}: " if setting else ""
    try:
        done = subprocess.run(  # our own interpreter and script
            [sys.executable, "-c", _CHECK, *modules],
            env=dict(env),
            cwd=cwd,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ToolImportError(
            f"{prefix}importing the tool modules took over {timeout:g}s (does a module "
            "do work at import?)"
        ) from exc
    lines = done.stdout.decode(errors="replace").strip().splitlines()
    try:
        report = json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise ToolImportError(f"{prefix}importing the tool modules failed: {tail[0]}") from None
    if "tools" in report:
        listed = list(report["tools"])
        queues = sorted({t["queue"] for t in listed if t["queue"]})
        names = [t["name"] for t in listed]
        served = dict(report.get("served") or {})
        return ToolModules(sorted(names), queues, listed, list(report["warnings"]), served)
    module, missing = report.get("module"), report.get("missing")
    if module and missing and (missing == module or module.startswith(f"{missing}.")):
        raise ToolImportError(not_found(prefix, module))
    raise ToolImportError(f"{prefix}{report['line']}")


def not_found(prefix: str, module: str) -> str:
    return (
        f"{prefix}no module named {module!r} here: tool modules are found in the current "
        "folder and on PYTHONPATH"
    )


def missing_module(modules: Sequence[str]) -> str | None:
    """The line for the first of ``modules`` that cannot be found at all, without running it."""
    saved = list(sys.path)
    # gunicorn and Celery put the current folder on their path; the `mcpq` script's own path
    # starts with its bin folder instead, so the check looks where the servers will.
    sys.path.insert(0, os.getcwd())
    try:
        for module in modules:
            try:
                found = importlib.util.find_spec(module.partition(":")[0])  # module:app
            except (ImportError, ValueError):  # a parent package is missing, or a bad name
                found = None
            if found is None:
                return not_found(f"MCPQ_TOOLS={','.join(modules)}: ", module)
    finally:
        sys.path[:] = saved
    return None


def tool_modules_problem(modules: Sequence[str]) -> str | None:
    """The one line for the first of ``modules`` that cannot be served, importing them in this
    process, or ``None``: ``mcpq web`` and ``mcpq worker`` before they exec (the server that
    replaces this process imports them again), and gunicorn's master before it loads the app.
    A module that does not import, or declares a tool mcpq refuses, is then one line at the
    user's file and line, not a traceback from each server process."""
    if missing := missing_module(modules):
        return missing
    from mcpq.shared.registry import Registry, ToolModuleError
    from mcpq.shared.tools import ToolDefinitionError

    saved = list(sys.path)
    sys.path.insert(0, os.getcwd())  # where the servers will look (see missing_module)
    try:
        Registry.from_modules(modules)
    except (ToolDefinitionError, ToolModuleError) as exc:
        return f"MCPQ_TOOLS={','.join(modules)}: {exc}"
    except ModuleNotFoundError as exc:  # found above, so a dependency of it is missing
        return f"MCPQ_TOOLS={','.join(modules)}: {type(exc).__name__}: {exc}"
    finally:
        sys.path[:] = saved
    return None
