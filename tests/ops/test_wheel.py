"""mcpq's wheel, built from this checkout the way the docs build it: what it holds and what the
build printed.

It holds one top-level package, ``mcpq`` (the distribution is ``mcpq-server``), with every
module of the checkout's packages but the ones that run from a checkout only (the test harness,
the benchmarks, CI's tools), none of which the rest imports; and the files the docs promise:
the Grafana dashboard, the store's Lua scripts, ``py.typed``. The build, and an editable one,
print no warning: a deprecated setting in ``pyproject.toml`` fails here, not on the day
setuptools drops it.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.ops.install_envs import REPO, Built, build_wheel, checkout_copy

pytestmark = [pytest.mark.ops, pytest.mark.timeout(300)]

#: Run from a checkout only: left out of the wheel (pyproject's ``packages.find`` exclude).
CHECKOUT_ONLY = ("mcpq.ops.harness", "mcpq.ops.bench", "mcpq.ops.ci")
#: A line of a build that is a warning, or a deprecation whatever it is called.
WARNING = re.compile(r"warning|deprecat", re.IGNORECASE)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build_wheel(sys.executable, tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def names(built: Built) -> list[str]:
    with zipfile.ZipFile(built.wheel) as wheel:
        return wheel.namelist()


def checkout_only(dotted: str) -> bool:
    return any(dotted == package or dotted.startswith(f"{package}.") for package in CHECKOUT_ONLY)


def checkout_modules() -> set[str]:
    """The installed package's modules as files, from the checkout: every ``.py`` under
    ``mcpq/`` (following its links to the top-level folders) outside the checkout-only ones."""
    found = set()
    for folder, subfolders, files in os.walk(REPO / "mcpq", followlinks=True):
        subfolders[:] = [name for name in subfolders if name != "__pycache__"]
        for name in files:
            relative = (Path(folder) / name).relative_to(REPO)
            dotted = ".".join(relative.with_suffix("").parts)
            if name.endswith(".py") and not checkout_only(dotted):
                found.add(relative.as_posix())
    return found


def test_the_build_prints_no_warning(built: Built) -> None:
    warnings = [line for line in built.output.splitlines() if WARNING.search(line)]
    assert not warnings, "\n".join(warnings)


def test_an_editable_build_prints_no_deprecation(tmp_path: Path) -> None:
    # The editable build's notice about folders named like the package in the working directory
    # is information (setuptools says so), not a deprecation: only deprecations fail here.
    source = checkout_copy(tmp_path / "src")
    script = "import sys; from setuptools import build_meta; build_meta.build_editable(sys.argv[1])"
    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", script, str(tmp_path / "dist")],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    deprecated = [line for line in output.splitlines() if re.search("deprecat", line, re.I)]
    assert not deprecated, "\n".join(deprecated)


def test_the_wheel_holds_one_package_and_its_metadata(built: Built, names: list[str]) -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    version = project["version"]
    assert built.wheel.name == f"mcpq_server-{version}-py3-none-any.whl"
    top = {name.split("/")[0] for name in names}
    assert top == {"mcpq", f"mcpq_server-{version}.dist-info"}, top
    with zipfile.ZipFile(built.wheel) as wheel:
        info = f"mcpq_server-{version}.dist-info"
        metadata = wheel.read(f"{info}/METADATA").decode()
        entry_points = wheel.read(f"{info}/entry_points.txt").decode()
    assert re.search(r"^Name: mcpq-server$", metadata, re.M), metadata[:500]
    assert re.search(rf"^License-Expression: {project['license']}$", metadata, re.M)
    assert re.search(r"^mcpq = mcpq\.ops\.cli\.main:main$", entry_points, re.M), entry_points


def test_the_wheel_holds_every_module_but_the_checkout_only_ones(names: list[str]) -> None:
    modules = {name for name in names if name.endswith(".py")}
    for package in CHECKOUT_ONLY:
        folder = package.replace(".", "/") + "/"
        assert not [name for name in names if name.startswith(folder)], package
    assert not [name for name in names if name.startswith(("tests/", "mcpq/tests/"))]
    expected = checkout_modules()
    assert modules == expected, {
        "missing": sorted(expected - modules),
        "unexpected": sorted(modules - expected),
    }


def test_the_wheel_ships_what_the_docs_promise(names: list[str]) -> None:
    assert "mcpq/ops/grafana/mcpq.json" in names
    assert "mcpq/py.typed" in names
    scripts = sorted((REPO / "shared" / "store" / "lua").glob("*.lua"))
    assert scripts
    missing = [p.name for p in scripts if f"mcpq/shared/store/lua/{p.name}" not in names]
    assert not missing, missing


def test_no_installed_module_imports_a_checkout_only_one(built: Built, names: list[str]) -> None:
    found = []
    with zipfile.ZipFile(built.wheel) as wheel:
        for name in names:
            if not name.endswith(".py"):
                continue
            tree = ast.parse(wheel.read(name), filename=name)
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    targets = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    targets = [node.module]
                else:
                    continue
                found += [f"{name}: {t}" for t in targets if checkout_only(t)]
    assert not found, found
