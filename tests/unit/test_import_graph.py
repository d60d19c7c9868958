"""The import graph of mcpq's own modules (not the tests): no cycle anywhere, and the layers
import only what they may.

Every module is parsed with ``ast`` (nothing is imported), and every import in it counts:
module-level, inside a function, under ``if TYPE_CHECKING:`` alike. A function-level import
hides a cycle from the interpreter, not from a reader, and a ``TYPE_CHECKING`` one is a cycle
in the design that a later edit turns into an import error.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: The folders installed as ``mcpq``'s subpackages (``mcpq/<name>`` links to each).
SUBPACKAGES = ("frontend", "workers", "shared", "ops")
#: The layers: those, the public API (``mcpq`` itself), the Python client (``mcpq.client``) and
#: the bundled tool modules (``mcpq.demo``, ``mcpq.conformance_fixtures``).
PACKAGES = (*SUBPACKAGES, "api", "client", "tools")
TOOL_MODULES = {"mcpq.demo", "mcpq.conformance_fixtures"}

Graph = dict[str, set[str]]


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    if parts[0] != "mcpq":
        parts = ("mcpq", *parts)  # a subpackage's folder: installed as mcpq.<folder>
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    """Every module of mcpq by its installed name, each file once (the real folders, and the
    files of ``mcpq/`` itself beside its links to them)."""
    files = [path for path in (REPO / "mcpq").glob("*.py")]
    files += [path for folder in SUBPACKAGES for path in (REPO / folder).rglob("*.py")]
    return {module_name(path): path for path in sorted(files)}


def imported_names(module: str, path: Path, modules: set[str]) -> set[str]:
    """Every module the imports of ``module`` (at ``path``) name, third-party ones included.
    ``from a.b import c`` imports the module ``a.b.c`` when it is one of ours, else the name
    ``c`` of the module ``a.b``. Relative imports are resolved against ``module``."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                anchor = parts[: len(parts) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in modules else base)
    return found - {module}


@functools.cache
def all_imports() -> dict[str, set[str]]:
    """Module → every module it imports (ours and others)."""
    modules = project_modules()
    names = set(modules)
    return {module: imported_names(module, path, names) for module, path in modules.items()}


def import_graph() -> Graph:
    """Module → the project modules it imports."""
    names = set(project_modules())
    return {module: imported & names for module, imported in all_imports().items()}


def reachable(graph: Graph, start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for child in graph.get(todo.pop(), ()):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen


def cycles(graph: Graph) -> list[list[str]]:
    """One cycle per group of modules that import each other (a strongly connected
    component), each as the modules in import order with the first repeated last."""
    reach = {node: reachable(graph, node) for node in graph}
    found: list[list[str]] = []
    placed: set[str] = set()
    for node in sorted(graph):
        if node in placed or node not in reach[node]:
            continue
        group = {other for other in reach[node] if node in reach.get(other, ())}
        placed |= group
        found.append(_cycle_through(graph, node, group))
    return found


def _cycle_through(graph: Graph, start: str, group: set[str]) -> list[str]:
    """The shortest way from ``start`` back to itself inside ``group`` (breadth first)."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for child in sorted(graph[node] & group):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"{start} is in no cycle")


SAMPLE = """
from __future__ import annotations
import os
from typing import TYPE_CHECKING
import pkg.a
from pkg import b, NAME
from . import sibling
from .other import thing

if TYPE_CHECKING:
    from pkg.c import C


def later() -> None:
    from pkg.d import D
"""


def test_every_kind_of_import_is_an_edge(tmp_path: Path) -> None:
    # Module-level, relative, ``TYPE_CHECKING`` and function-level imports alike; ``from pkg
    # import b`` is an import of the module pkg.b, ``from pkg import NAME`` one of pkg.
    path = tmp_path / "mod.py"
    path.write_text(SAMPLE)
    ours = {"pkg", "pkg.a", "pkg.b", "pkg.c", "pkg.d", "pkg.sub.sibling", "pkg.sub.other"}
    assert imported_names("pkg.sub.mod", path, ours | {"pkg.sub", "pkg.sub.mod"}) == {
        "__future__", "os", "typing", "pkg", *(ours - {"pkg"})
    }  # fmt: skip


def test_the_graph_holds_every_package() -> None:
    graph = import_graph()
    assert {layer(module) for module in graph} == set(PACKAGES)
    assert "mcpq.frontend.app" in graph["mcpq.frontend.entry"]
    assert "mcpq.shared.tools" in graph["mcpq"]


def test_mcpq_has_no_import_cycle() -> None:
    found = cycles(import_graph())
    assert found == [], "import cycles: " + "; ".join(" -> ".join(cycle) for cycle in found)


def test_a_cycle_is_found_and_named() -> None:
    graph: Graph = {"a": {"b"}, "b": {"c", "a"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}}
    assert cycles(graph) == [["a", "b", "a"], ["d", "e", "d"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def layer(module: str) -> str:
    """The layer of one of our modules (see ``PACKAGES``), or a third-party distribution's
    top-level name."""
    parts = module.split(".")
    if parts[0] != "mcpq":
        return parts[0]
    if len(parts) > 1 and parts[1] in SUBPACKAGES:
        return parts[1]
    if module in TOOL_MODULES:
        return "tools"
    if module == "mcpq.__main__":
        return "ops"  # the command line
    return "client" if module == "mcpq.client" else "api"


def offences(may_not: dict[str, set[str]]) -> list[str]:
    """``module -> imported`` for each import of a layer (a key) from what it may not import
    (its value: our packages or third-party distributions, by top-level name)."""
    return sorted(
        f"{module} -> {imported}"
        for module, imported_all in all_imports().items()
        for imported in imported_all
        if layer(imported) in may_not.get(layer(module), set())
    )


SERVER = set(SUBPACKAGES)
#: Falcon and Celery (with the libraries of Celery's own: kombu, billiard).
WEB, JOBS = {"falcon"}, {"celery", "kombu", "billiard"}


def test_the_web_tier_and_the_workers_never_import_each_other() -> None:
    # They meet through shared (the job contract and the task store), at import time and at
    # run time alike: a function-level import counts.
    assert offences({"frontend": {"workers"}, "workers": {"frontend"}}) == []


def test_shared_imports_neither_the_web_framework_nor_the_job_system() -> None:
    assert offences({"shared": WEB | JOBS | {"frontend", "workers", "ops"}}) == []


def test_the_client_imports_no_server_module_nor_their_frameworks() -> None:
    assert offences({"client": SERVER | WEB | JOBS}) == []


def test_the_public_api_is_made_of_shared_only() -> None:
    assert offences({"api": (SERVER - {"shared"}) | WEB | JOBS}) == []


def test_the_bundled_tool_modules_import_only_the_public_api_of_ours() -> None:
    # What a user's tool module may import, and both tiers load them (MCPQ_TOOLS): the web tier
    # lists and validates them, workers run them.
    assert offences({"tools": SERVER | {"client"} | WEB | JOBS}) == []


def test_nothing_imports_a_folder_by_its_repository_name() -> None:
    """``shared.x`` imports from a checkout (its root is on the path) but not from the wheel,
    and a user's own ``shared`` would shadow it: every import of ours names ``mcpq.``, the
    tests' too."""
    tests = [path for path in (REPO / "tests").rglob("*.py")]
    found = sorted(
        f"{path.relative_to(REPO)} -> {name}"
        for path in [*project_modules().values(), *tests]
        for name in imported_names("x", path, set())
        if name.partition(".")[0] in {*SUBPACKAGES, "tools"}
    )
    assert found == []


def test_the_layer_rules_catch_an_offence() -> None:
    # The checks above would pass for nothing if offences() could not see one: the web tier
    # does import falcon, and the workers celery.
    assert "mcpq.frontend.app -> falcon.asgi" in offences({"frontend": WEB})
    assert any(o.startswith("mcpq.workers.") for o in offences({"workers": JOBS}))
