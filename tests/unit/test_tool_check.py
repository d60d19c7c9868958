"""``mcpq web`` and ``mcpq worker`` refuse a tool module that is not there in one line, looking
where the servers will (the current folder included), without running any module."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mcpq.ops.cli.main import main
from mcpq.ops.runtime.tool_check import missing_module


def test_a_missing_module_is_named_with_where_modules_are_found() -> None:
    assert missing_module(["json", "nosuchmod_xyz"]) == (
        "MCPQ_TOOLS=json,nosuchmod_xyz: no module named 'nosuchmod_xyz' here: tool modules are "
        "found in the current folder and on PYTHONPATH"
    )
    assert missing_module(["nosuchpkg_xyz.tools"]) is not None  # its package is missing


def test_a_module_in_the_current_folder_is_found_and_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "here_tools_xyz.py").write_text("raise RuntimeError('must not run')\n")
    monkeypatch.chdir(tmp_path)
    path = list(sys.path)
    assert missing_module(["here_tools_xyz"]) is None
    assert "here_tools_xyz" not in sys.modules
    assert sys.path == path  # the search path is left as it was


@pytest.mark.parametrize("command", [["worker"], ["web", "--host", "127.0.0.1"]])
def test_web_and_worker_refuse_a_missing_tool_module_in_one_line(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"MCPQ_TOOLS": "nosuchmod_xyz", "MCPQ_DATA_KEYS": "plaintext"}
    with pytest.raises(SystemExit) as exited:
        main(command, environ=env, execute=lambda *_: pytest.fail("must not exec"))
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "mcpq: error: MCPQ_TOOLS=nosuchmod_xyz: no module named 'nosuchmod_xyz' here: tool "
        "modules are found in the current folder and on PYTHONPATH"
    )
