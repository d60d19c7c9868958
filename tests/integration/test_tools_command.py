"""``mcpq tools``, run as a user runs it (``python -m mcpq tools``): what the modules declare,
for a terminal and as JSON; a module that does not load, or a declaration mcpq refuses, is one
line on stderr and exit status 1, the same line `mcpq dev` prints (``tool_check``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcpq.ops.dev.state import record_state
from mcpq.ops.runtime.tool_check import ToolImportError, check_tool_modules

pytestmark = pytest.mark.timeout(120)

BAD_TYPE = """from mcpq import tool


class Point:
    pass


@tool
def locate(label: str, p: Point) -> str:
    return label
"""
BAD_SYNTAX = """from mcpq import tool


@tool
def broken(a: int) -> int
    return a
"""


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPQ_")}
    return {**env, **extra}


def mcpq_tools(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpq", "tools", *args],
        cwd=cwd,
        env=environment(**env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_demo_tools_are_listed_for_a_terminal(tmp_path: Path) -> None:
    done = mcpq_tools(tmp_path, "mcpq.demo")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    out = done.stdout
    assert "build_report  task: optional  queue: bulk  module: mcpq.demo" in out
    assert "approve_deployment  task: required  queue: mcpq (default)  module: mcpq.demo" in out
    assert "summarize  task: optional  queue: mcpq (default)  module: mcpq.demo" in out
    assert '"topic": {' in out and "input schema:" in out
    _, _, served = out.partition("3 tools\n")
    assert served, out
    assert served.strip().splitlines() == [
        "1 resource:",
        "    demo://deployments/policy  deployment_policy  text/markdown",
        "",
        "1 resource template:",
        "    demo://deployments/{service}  current_deployment",
        "",
        "1 prompt:",
        "    deployment_request(service, version, reason?)",
    ]


def test_json_lists_name_task_queue_and_schema_of_the_setting_s_modules(tmp_path: Path) -> None:
    done = mcpq_tools(tmp_path, "--json", MCPQ_TOOLS="mcpq.demo")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert [(t["name"], t["task"], t["queue"]) for t in listed] == [
        ("build_report", "optional", "bulk"),
        ("approve_deployment", "required", "mcpq"),  # the default queue, by its name
        ("summarize", "optional", "mcpq"),
    ]
    assert listed[0]["inputSchema"]["required"] == ["topic"]
    assert "ctx" not in listed[0]["inputSchema"]["properties"]


def test_a_refused_declaration_is_one_line_and_status_1(tmp_path: Path) -> None:
    (tmp_path / "bad_type.py").write_text(BAD_TYPE)
    done = mcpq_tools(tmp_path, "bad_type")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "mcpq tools: tool 'locate', parameter 'p': pydantic cannot build a JSON schema for its "
        "type Point: use a JSON-ready type (str, int, float, bool, list, dict, a pydantic "
        f"model, a dataclass or a TypedDict) ({tmp_path / 'bad_type.py'}:8)"
    ]


def test_a_syntax_error_is_one_line_at_the_users_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "bad_syntax.py").write_text(BAD_SYNTAX)
    done = mcpq_tools(tmp_path, MCPQ_TOOLS="mcpq.demo,bad_syntax")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "mcpq tools: MCPQ_TOOLS=mcpq.demo,bad_syntax: module 'bad_syntax' failed to import: "
        f"SyntaxError: expected ':' ({tmp_path / 'bad_syntax.py'}:5)"
    ]


def test_a_missing_module_is_one_line(tmp_path: Path) -> None:
    done = mcpq_tools(tmp_path, "nosuchmod_xyz")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "mcpq tools: no module named 'nosuchmod_xyz' here: tool modules are found in the "
        "current folder and on PYTHONPATH"
    ]


def test_a_module_without_tools_is_a_warning_not_a_refusal(tmp_path: Path) -> None:
    (tmp_path / "no_tools.py").write_text("VALUE = 1\n")
    done = mcpq_tools(tmp_path, "mcpq.demo", "no_tools", "--json")
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)) == 3
    assert done.stderr.splitlines() == [
        "mcpq tools: warning: module 'no_tools' declares no tool, resource or prompt: mark its "
        "functions with @tool (a tool imported from another module counts only there)"
    ]


def test_mcpq_dev_s_check_prints_the_same_line_naming_the_setting(tmp_path: Path) -> None:
    (tmp_path / "bad_syntax.py").write_text(BAD_SYNTAX)
    with pytest.raises(ToolImportError) as failed:
        check_tool_modules(["bad_syntax"], env=environment(), cwd=str(tmp_path))
    assert str(failed.value) == (
        "MCPQ_TOOLS=bad_syntax: module 'bad_syntax' failed to import: SyntaxError: expected "
        f"':' ({tmp_path / 'bad_syntax.py'}:5)"
    )
    found = check_tool_modules(["mcpq.demo"], env=environment(), cwd=str(tmp_path))
    assert found.tools == ["approve_deployment", "build_report", "summarize"]
    assert found.queues == ["bulk"] and found.warnings == []


def test_without_modules_it_lists_the_running_mcpq_dev_s_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No module named and no MCPQ_TOOLS: the tools of the `mcpq dev` that runs (its state
    file: its modules, found in its folder), not the bundled defaults."""
    project, elsewhere, runtime = tmp_path / "project", tmp_path / "elsewhere", tmp_path / "run"
    for folder in (project, elsewhere, runtime):
        folder.mkdir()
    (project / "mytools.py").write_text(
        "from mcpq import tool\n\n\n@tool\ndef shout(text: str) -> str:\n    return text.upper()\n"
    )
    monkeypatch.chdir(project)  # the launcher records the folder it runs in
    record_state(
        {"XDG_RUNTIME_DIR": str(runtime)},
        redis_url="redis://127.0.0.1:6379/0",
        redis_shown="redis://127.0.0.1:6379/0",
        web_url="http://127.0.0.1:8000/mcp",
        tools=["mytools"],
    )  # written with this process's pid: a live launcher
    done = mcpq_tools(elsewhere, XDG_RUNTIME_DIR=str(runtime))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("shout  task: optional  queue: mcpq (default)  module: mytools")
    assert "build_report" not in done.stdout  # not the bundled defaults


def test_an_app_is_listed_by_module_and_name(tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(
        "from mcpq import App\n\napp = App('shop')\n\n\n@app.tool\n"
        "def add(a: int, b: int) -> int:\n    return a + b\n"
    )
    done = mcpq_tools(tmp_path, "shop:app")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("add  task: optional  queue: mcpq (default)  module: shop")
    wrong = mcpq_tools(tmp_path, "shop:nothing")
    assert wrong.returncode == 1
    assert wrong.stderr.strip() == (
        "mcpq tools: shop:nothing: module 'shop' has no App named 'nothing' (nor a FastMCP or "
        "MCPServer server): name one (app = App(...)) or list the module alone"
    )
