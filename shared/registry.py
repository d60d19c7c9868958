r"""The tools, resources and prompts one process serves (:class:`Registry`), and how they are
found: the modules ``MCPQ_TOOLS`` names (their ``@tool``/``@resource``/``@prompt`` functions and
the ``App``\ s they hold), imported with a failure turned into one line at the user's file."""

from __future__ import annotations

import contextlib
import importlib
import logging
import sysconfig
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Unpack, overload

from mcpq.shared.brought import Brought, bring, kind
from mcpq.shared.prompts import PROMPT_MARK, Prompt
from mcpq.shared.resources import RESOURCE_MARK, Resource, ResourceTemplate
from mcpq.shared.tool_signature import ToolDefinitionError, where
from mcpq.shared.tools import _MARK, APP_MARK, F, Tool, ToolOptions, tool

log = logging.getLogger("mcpq.tools")


def _brought(value: object, entry: str, module: Any = None) -> Brought | None:
    """``value`` as mcpq serves it if it is a FastMCP or SDK server, else ``None``; found in
    ``module`` (not named by ``entry``), it is named ``module:attribute`` in what is said."""
    if kind(value) is None:
        return None
    if module is not None:
        entry += ":" + next((k for k, v in vars(module).items() if v is value), "?")
    return bring(value, entry)


@contextlib.contextmanager
def _logging_kept() -> Iterator[None]:
    """The process's logging stays mcpq's: handlers a tool module adds to the root logger while
    it imports are taken off again (the MCP SDK's ``MCPServer()`` calls ``logging.basicConfig``
    with a rich console handler, which would reformat every line of a worker's or a web's log)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        root.setLevel(level)


class ToolModuleError(Exception):
    """A tool module does not import (a syntax error, a failing import, an exception at its
    top level); ``str()`` is the one line to print, at the user's file and line."""


class Registry:
    """The tools one process serves, by name: an object the web app and the worker are given,
    not a global filled by imports."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self.tools: dict[str, Tool] = {}
        #: One line per module that declares no tool (logged; ``mcpq tools`` prints them).
        self.warnings: list[str] = []
        #: The name and instructions of the app the tools came from (``mcpq.shared.app``).
        self.server_name: str | None = None
        self.instructions: str | None = None
        #: Resources by URI, templates by URI template, prompts by name (``mcpq.shared.app``).
        self.resources: dict[str, Resource] = {}
        self.templates: dict[str, ResourceTemplate] = {}
        self.prompts: dict[str, Prompt] = {}
        for spec in tools:
            self.add(spec)

    @classmethod
    def from_modules(cls, modules: Iterable[str]) -> Registry:
        """Import the tool modules and collect their tools, in definition order: a module's
        ``@tool`` functions and the tools of the apps it holds, or, for ``module:attribute``,
        the tools of that one app.

        A module that cannot be found raises ``ModuleNotFoundError``; one that fails to import
        :class:`ToolModuleError`; a declaration mcpq refuses :class:`ToolDefinitionError`."""
        with _logging_kept():
            return cls._from_modules(modules)

    @classmethod
    def _from_modules(cls, modules: Iterable[str]) -> Registry:
        registry = cls()
        for entry in modules:
            module_name, _, attribute = entry.partition(":")
            module = _import(module_name)
            if attribute:
                found = registry._add_named(entry, module, attribute)
            else:
                found = sum(
                    registry._add_value(entry, module, v) for v in list(vars(module).values())
                )
            if not found:
                warning = (
                    f"module {entry!r} declares no tool, resource or prompt: mark its functions "
                    "with @tool (a tool imported from another module counts only there)"
                )
                log.warning(warning)
                registry.warnings.append(warning)
        return registry

    def _add_named(self, entry: str, module: Any, attribute: str) -> int:
        """``module:attribute``: that one app, or FastMCP or SDK server."""
        app = getattr(module, attribute, None)
        if getattr(app, APP_MARK, False):
            return self._add_app(app)
        # A FastMCP or MCP SDK server is served as it is (mcpq.shared.brought).
        if (brought := _brought(app, entry)) is not None:
            return self._add_brought(brought)
        raise ToolDefinitionError(
            f"{entry}: module {module.__name__!r} has no App named {attribute!r} (nor a FastMCP "
            "or MCPServer server): name one (app = App(...)) or list the module alone"
        )

    def _add_value(self, entry: str, module: Any, value: Any) -> int:
        """One value of a module listed alone: what it declares (how many)."""
        if getattr(value, APP_MARK, False):
            return self._add_app(value)
        if (brought := _brought(value, entry, module)) is not None:
            return self._add_brought(brought)
        # A module may import another's tool: only its own definitions count here.
        if getattr(value, "__module__", None) != entry:
            return 0
        if isinstance(spec := getattr(value, _MARK, None), Tool):
            self.add(spec)
        elif isinstance(
            declared := getattr(value, RESOURCE_MARK, None), Resource | ResourceTemplate
        ):
            self.add_resource(declared)
        elif isinstance(prompt := getattr(value, PROMPT_MARK, None), Prompt):
            self.add_prompt(prompt)
        else:
            return 0
        return 1

    def _add_brought(self, brought: Brought) -> int:
        """A FastMCP or SDK server's tools, resources and prompts, as an app's."""
        for spec in brought.tools:
            self.add(spec)
        for resource in brought.resources:
            self.add_resource(resource)
        for prompt in brought.prompts:
            self.add_prompt(prompt)
        if self.server_name is None:
            self.server_name, self.instructions = brought.name, brought.instructions
        return len(brought.tools) + len(brought.resources) + len(brought.prompts)

    def _add_app(self, app: Any) -> int:
        """An app's tools, and its name and instructions (the first app's, if there are
        several); how many tools it has."""
        theirs: Registry = app.registry
        for spec in theirs.tools.values():
            self.add(spec)
        for resource in theirs.resources.values():
            self.add_resource(resource)
        for template in theirs.templates.values():
            self.add_resource(template)
        for prompt in theirs.prompts.values():
            self.add_prompt(prompt)
        if self.server_name is None:
            self.server_name, self.instructions = app.name, app.instructions
        return (
            len(theirs.tools) + len(theirs.resources) + len(theirs.templates) + len(theirs.prompts)
        )

    def add_resource(self, spec: Resource | ResourceTemplate) -> None:
        """A resource by its URI, a template by its URI template: one function each."""
        if isinstance(spec, Resource):
            known: Resource | ResourceTemplate | None = self.resources.get(spec.uri)
            key = spec.uri
        else:
            known, key = self.templates.get(spec.uri_template), spec.uri_template
        if known is not None and known.fn is not spec.fn:
            raise ToolDefinitionError(
                f"two resources are at {key}: {_qualified(known.fn)} and {_qualified(spec.fn)}"
            )
        if isinstance(spec, Resource):
            self.resources[key] = spec
        else:
            self.templates[key] = spec

    def add_prompt(self, spec: Prompt) -> None:
        known = self.prompts.get(spec.name)
        if known is not None and known.fn is not spec.fn:
            raise ToolDefinitionError(
                f"two prompts are named {spec.name}: {_qualified(known.fn)} and "
                f"{_qualified(spec.fn)}: rename one with @prompt(name=...)"
            )
        self.prompts[spec.name] = spec

    def find_resource(self, uri: str) -> tuple[Resource | ResourceTemplate, dict[str, str]] | None:
        """The resource at ``uri``: a static one first, else the first template it matches
        (with its variables)."""
        static = self.resources.get(uri)
        if static is not None:
            return static, {}
        for template in self.templates.values():
            values = template.match(uri)
            if values is not None:
                return template, values
        return None

    def add(self, spec: Tool) -> None:
        known = self.tools.get(spec.name)
        if known is not None and known.fn is not spec.fn:
            raise ToolDefinitionError(
                f"two tools are named {spec.name}: {_qualified(known.fn)} and "
                f"{_qualified(spec.fn)}: rename one with @tool(name=...)"
            )
        self.tools[spec.name] = spec

    @overload
    def tool(self, name: F, /) -> F: ...
    @overload
    def tool(self, name: str | None = None, **options: Unpack[ToolOptions]) -> Callable[[F], F]: ...
    def tool(self, name: Any = None, **options: Unpack[ToolOptions]) -> Any:
        """:func:`tool`, and add the result to this registry (tests, ad hoc registries)."""
        if name is not None and not isinstance(name, str):
            return self.tool()(name)

        def mark_and_add(fn: F) -> F:
            marked = tool(name, **options)(fn)
            self.add(getattr(marked, _MARK))
            return marked

        return mark_and_add

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def queues(self) -> set[str]:
        """The queues the tools name (tools without one use the default queue)."""
        return {spec.queue for spec in self.tools.values() if spec.queue}


def _qualified(fn: Callable[..., Any]) -> str:
    """``module.function (file:line)``: which of two tools of one name is which."""
    name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"
    return f"{name} ({where(fn)})"


def _import(module_name: str) -> Any:
    """Import a tool module; a failure becomes one line at the user's file and line."""
    try:
        return importlib.import_module(module_name)
    except ToolDefinitionError:
        raise  # one line already, at the declaration
    except ModuleNotFoundError as exc:
        if exc.name == module_name or module_name.startswith(f"{exc.name}."):
            raise  # the module itself is not there: the caller says where modules are found
        raise ToolModuleError(_failure(module_name, exc)) from exc
    except Exception as exc:
        raise ToolModuleError(_failure(module_name, exc)) from exc


def _failure(module_name: str, exc: BaseException) -> str:
    lines = str(exc.msg if isinstance(exc, SyntaxError) else exc).strip().splitlines()
    detail = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    if isinstance(exc, SyntaxError) and exc.filename:
        # Where the user's code is wrong (not the importing line of mcpq's, which is the only
        # frame of a module that does not compile).
        detail += f" ({exc.filename}:{exc.lineno})"
    elif not isinstance(exc, ModuleNotFoundError) and (place := _user_frame(exc)):
        detail += f" ({place})"
    return f"module {module_name!r} failed to import: {detail}"


_OURS = str(Path(__file__).resolve().parent)
_LIBRARIES = {sysconfig.get_paths()[key] for key in ("stdlib", "purelib", "platlib")}


def _user_frame(exc: BaseException) -> str:
    """The deepest frame of the user's own code: not importlib's, not mcpq's machinery here,
    preferably not a library's (an error raised inside one is shown at the user's call)."""
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith("<frozen")
        and "importlib" not in frame.filename
        and not str(Path(frame.filename).resolve()).startswith(_OURS)
    ]
    own = [f for f in frames if not f.filename.startswith(tuple(_LIBRARIES))]
    chosen = (own or frames)[-1:]
    return f"{chosen[0].filename}:{chosen[0].lineno}" if chosen else ""
