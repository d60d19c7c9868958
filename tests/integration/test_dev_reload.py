"""`mcpq dev --reload`: an edited tool module is served within seconds, said in one line.

- A changed ``.py`` file of the folder `mcpq dev` runs in restarts the web and the workers (not
  Redis): ``tools/list`` shows the new description within 5 s of the save, and a task runs the
  new code;
- a change that breaks the module is its one-line error, and the running children keep serving.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_dev_launcher import (
    PROTOCOL,
    _kill_leftovers,
    executable_of,
    post,
    rpc,
)
from tests.integration.test_dev_quiet import start_dev
from tests.support.host_load import scaled_s
from tests.support.procs import OutputLines, descendant_pids, free_port, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

TOOL = """
from mcpq import ToolContext, tool


@tool(task="required", description="{description}")
def greet(ctx: ToolContext, name: str) -> str:
    return "{greeting} " + name
"""


def write_tool(folder: Path, description: str, greeting: str) -> None:
    (folder / "mytools.py").write_text(TOOL.format(description=description, greeting=greeting))


def tool_descriptions(port: int) -> dict[str, str] | None:
    """``tools/list``: tool name -> description; ``None`` while nothing answers."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}
    try:
        status, raw = post(port, body, "tools/list", None)
    except OSError:
        return None
    if status != 200:
        return None
    tools: list[dict[str, Any]] = json.loads(raw)["result"]["tools"]
    return {t["name"]: t.get("description", "") for t in tools}


def run_greet(port: int) -> str:
    created = rpc(port, "tools/call", {"name": "greet", "arguments": {"name": "Ada"}}, "greet")
    ref = {"taskId": created["taskId"]}
    done = wait_until(
        lambda: (t := rpc(port, "tasks/get", ref, ref["taskId"]))["status"] == "completed" and t,
        timeout=30,
        message="the task to complete",
    )
    text: str = done["result"]["content"][0]["text"]
    return text


def redis_pids(launcher_pid: int) -> set[int]:
    return {p for p in descendant_pids(launcher_pid) if "redis" in executable_of(p)}


def test_an_edited_tool_is_served_within_5_s_in_one_line(tmp_path: Path) -> None:
    write_tool(tmp_path, "Greets, first edition.", "hello")
    port = free_port()
    launcher = start_dev(tmp_path, port, "--reload", MCPQ_TOOLS="mytools")
    output = OutputLines(launcher)
    try:
        output.wait_for("; Ctrl-C stops", timeout=120)
        assert tool_descriptions(port) == {"greet": "Greets, first edition."}
        assert run_greet(port) == "hello Ada"
        redis_before = redis_pids(launcher.pid)
        assert redis_before, output.text[-3000:]
        shown = len(output.lines)

        # When the developer edits the tool's description (and what it says)
        write_tool(tmp_path, "Greets, second edition.", "good day")
        saved = time.monotonic()

        # Then tools/list shows the new description within 5 s
        def new_description() -> bool:
            return tool_descriptions(port) == {"greet": "Greets, second edition."}

        # 5 s on an idle host; stretched by the host's contention (tests.support.host_load)
        wait_until(
            new_description, timeout=scaled_s(5), interval=0.1, message="the new description"
        )
        took = time.monotonic() - saved
        # And the terminal said so in one line, and nothing else (the children's start-up
        # lines go to their log files, as at the first start)
        wait_until(lambda: len(output.lines) > shown, timeout=5, message="the reload line")
        said = [line.rstrip("\n") for line in output.lines[shown:]]
        assert said == ["mcpq | mytools.py changed, restarting web and workers"], said
        # And the workers run the new code, while Redis is the same process as before
        assert run_greet(port) == "good day Ada", output.text[-3000:]
        assert redis_pids(launcher.pid) == redis_before

        # When an edit breaks the module, then one line says why, and the server keeps serving
        shown = len(output.lines)
        (tmp_path / "mytools.py").write_text("def greet(:\n")
        line = output.wait_for("mytools.py changed; not restarting", timeout=20)
        assert line.startswith(
            "mcpq | mytools.py changed; not restarting: MCPQ_TOOLS=mytools: module 'mytools' "
            "failed to import: SyntaxError"
        ), line
        assert len(output.lines) == shown + 1, output.lines[shown:]
        assert tool_descriptions(port) == {"greet": "Greets, second edition."}
        assert "Traceback" not in output.text
        print(f"served the new description {took:.1f} s after the save")
    finally:
        _kill_leftovers(launcher, set())
