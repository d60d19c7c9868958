"""``mcpq web`` and ``mcpq worker`` refuse a tool module mcpq cannot serve before they start
their server: one line naming ``MCPQ_TOOLS``, the cause and the user's file and line, and no
traceback (the same line as ``mcpq dev`` and ``mcpq tools``)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from mcpq.ops.runtime.processes import free_port
from mcpq.shared.sealing import new_data_key

pytestmark = pytest.mark.timeout(120)

MODULES = {
    "broken": (
        "from mcpq import tool\n\n\n@tool\ndef add(a: int, b: int) -> int\n    return a + b\n",
        "MCPQ_TOOLS=broken: module 'broken' failed to import: SyntaxError: expected ':' ({}:5)",
    ),
    "twice": (
        "from mcpq import tool\n\n\n@tool(name='add')\ndef one(a: int) -> int:\n    return a\n\n\n"
        "@tool(name='add')\ndef two(a: int) -> int:\n    return a\n",
        "MCPQ_TOOLS=twice: two tools are named add: twice.one ({}:4) and twice.two ({}:9): "
        "rename one with @tool(name=...)",
    ),
}


def start(command: list[str], cwd: Path, module: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPQ_")}
    env.update(
        MCPQ_TOOLS=module,
        REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",  # never reached: refused before
        MCPQ_SECRET=secrets.token_urlsafe(48),
        MCPQ_DATA_KEYS=new_data_key(),
    )
    return subprocess.run(
        [sys.executable, "-m", "mcpq", *command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("module", sorted(MODULES))
@pytest.mark.parametrize(
    "command", [["web", "--port", str(free_port())], ["worker"]], ids=["web", "worker"]
)
def test_a_tool_module_mcpq_cannot_serve_is_one_line_before_the_server_starts(
    tmp_path: Path, module: str, command: list[str]
) -> None:
    source, line = MODULES[module]
    path = tmp_path / f"{module}.py"
    path.write_text(source)
    done = start(command, tmp_path, module)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr + done.stdout
    expected = line.format(path, path)
    assert expected in done.stderr.splitlines()[-1], done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2, done.stderr  # argparse's usage line
