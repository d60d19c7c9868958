"""Import the tool modules (``MCPQ_TOOLS``) once, in a child interpreter, before anything starts.

`mcpq dev` runs this before it starts Redis, the web or a worker: a module that does not import
is then one line naming ``MCPQ_TOOLS`` and the module, instead of a traceback from every child
(Flower's a misleading ``module 'workers' has no attribute 'entry'``). A child
interpreter, with the children's environment and folder, so the check finds exactly what they
will find, and the launcher itself never runs the developer's module code.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Run by the child: import each module, report the first failure or the tools found, as JSON.
_CHECK = """
import json, sys, traceback
modules = sys.argv[1:]
try:
    from mcpq.shared.tools import Registry
    registry = Registry.from_modules(modules)
except BaseException as exc:
    module = next((m for m in modules if m not in sys.modules), modules[-1])
    where = ""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "importlib" not in f.filename]
    if frames and not isinstance(exc, ModuleNotFoundError):
        where = f" ({frames[-1].filename}:{frames[-1].lineno})"
    missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    print(json.dumps({"module": module, "missing": missing,
                      "error": f"{type(exc).__name__}: {exc}{where}"}))
else:
    print(json.dumps({"tools": sorted(registry.tools), "queues": sorted(registry.queues())}))
"""


@dataclass(frozen=True)
class ToolModules:
    """What importing the tool modules found: their tools and the queues they name."""

    tools: list[str]
    queues: list[str]


class ToolImportError(Exception):
    """A tool module does not import; ``str()`` is the one line to print."""


def check_tool_modules(
    modules: Sequence[str], *, env: Mapping[str, str], cwd: str | None = None, timeout: float = 60
) -> ToolModules:
    """Import ``modules`` as the children will; :class:`ToolImportError` when one fails."""
    setting = f"MCPQ_TOOLS={','.join(modules)}"
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
            f"{setting}: importing the tool modules took over {timeout:g}s (does a module "
            "do work at import?)"
        ) from exc
    lines = done.stdout.decode(errors="replace").strip().splitlines()
    try:
        report = json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise ToolImportError(f"{setting}: importing the tool modules failed: {tail[0]}") from None
    if "tools" in report:
        return ToolModules(list(report["tools"]), list(report["queues"]))
    module, missing = report["module"], report.get("missing")
    if missing is not None and (missing == module or module.startswith(f"{missing}.")):
        raise ToolImportError(not_found(setting, module))
    raise ToolImportError(f"{setting}: module {module!r} failed to import: {report['error']}")


def not_found(setting: str, module: str) -> str:
    return (
        f"{setting}: no module named {module!r} here: tool modules are found in the current "
        "folder and on PYTHONPATH"
    )


def missing_module(modules: Sequence[str]) -> str | None:
    """The line for the first of ``modules`` that cannot be found at all, without running it
    (``mcpq web`` and ``mcpq worker``, before they exec: a module that is there but fails to
    import is reported by the server with its traceback)."""
    saved = list(sys.path)
    # gunicorn and Celery put the current folder on their path; the `mcpq` script's own path
    # starts with its bin folder instead, so the check looks where the servers will.
    sys.path.insert(0, os.getcwd())
    try:
        for module in modules:
            try:
                found = importlib.util.find_spec(module)
            except (ImportError, ValueError):  # a parent package is missing, or a bad name
                found = None
            if found is None:
                return not_found(f"MCPQ_TOOLS={','.join(modules)}", module)
    finally:
        sys.path[:] = saved
    return None
