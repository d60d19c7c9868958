"""Python MCP clients that cannot live in the project venv, each in a venv of its own.

The project venv has the official ``mcp`` 2.x (2026-07-28 wire), so the 1.x SDK (2025-11-25
wire) and ``fastmcp-tasks`` (which pins its own mcp 2.x line) are installed with
``python -m venv`` + ``pip install -r tests/clients/py/requirements-<name>.txt`` into
``<repo>/.cache/clients/<name>`` (or ``$MCPQ_CLIENTS_DIR/<name>``), once. The sha256 of the
requirements file is written into the venv after a successful install; a venv whose stored hash
differs (or is missing: a half-finished install) is removed and built again.

Tests drive a client through a scenario script (``tests/clients/py/*_scenarios.py``) run with the
venv's python: ``<script> <url> <scenario> [json-args]``. The script prints one JSON line
(``{"ok": ..., "observed": {...}, "error": ..., "wire": [...]}``) as its last line of stdout;
:func:`run_scenario` returns it parsed, with the process's output kept for assertion messages.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PY_DIR = Path(__file__).resolve().parent / "py"
REQUIREMENTS = {
    "mcp1": PY_DIR / "requirements-mcp1.txt",
    "fastmcp": PY_DIR / "requirements-fastmcp.txt",
}
SCRIPTS = {
    "mcp1": PY_DIR / "mcp1_scenarios.py",
    "fastmcp": PY_DIR / "fastmcp_scenarios.py",
}
HASH_FILE = "mcpq-requirements.sha256"  # inside the venv: the hash of what was installed
INSTALL_TIMEOUT_S = 600
SCENARIO_TIMEOUT_S = 120
TAIL_CHARS = 4000


class ClientInstallError(RuntimeError):
    """A client venv could not be created or its requirements could not be installed."""


def default_clients_dir() -> Path:
    return Path(os.environ.get("MCPQ_CLIENTS_DIR") or REPO / ".cache" / "clients")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


@contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    """One installer at a time per venv (parallel pytest processes share the cache)."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run_install_step(command: list[str], what: str) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise ClientInstallError(f"{what}: still running after {INSTALL_TIMEOUT_S} s") from exc
    if done.returncode != 0:
        output = (done.stderr.strip() or done.stdout.strip())[-TAIL_CHARS:]
        raise ClientInstallError(f"{what} failed ({done.returncode}): {output}")


def ensure_installed(name: str, clients_dir: Path | None = None) -> Path:
    """The venv of client ``name`` with its requirements installed; built (again) only when the
    requirements file's hash differs from the one stored in the venv. Returns the venv's python."""
    requirements = REQUIREMENTS[name]
    venv = (clients_dir or default_clients_dir()) / name
    wanted = _sha256(requirements)
    stamp = venv / HASH_FILE
    with _locked(venv.parent / f"{name}.lock"):
        if stamp.exists() and stamp.read_text().strip() == wanted and venv_python(venv).exists():
            return venv_python(venv)
        if venv.exists():
            shutil.rmtree(venv)
        _run_install_step([sys.executable, "-m", "venv", str(venv)], f"python -m venv {venv}")
        pip = [str(venv_python(venv)), "-m", "pip", "install", "--disable-pip-version-check"]
        _run_install_step([*pip, "-q", "-r", str(requirements)], f"pip install -r {requirements}")
        stamp.write_text(wanted + "\n")  # last: a half-finished install is redone next time
    return venv_python(venv)


@dataclass
class ScenarioRun:
    """One scenario script run: its JSON report (``data``) and what the process printed."""

    client: str
    scenario: str
    args: Mapping[str, Any]
    returncode: int | None
    stdout: str = field(repr=False)
    stderr: str = field(repr=False)
    data: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return bool(self.data.get("ok"))

    @property
    def observed(self) -> dict[str, Any]:
        observed = self.data.get("observed")
        return observed if isinstance(observed, dict) else {}

    @property
    def error(self) -> str | None:
        error = self.data.get("error")
        return str(error) if error else None

    @property
    def wire(self) -> list[dict[str, Any]]:
        wire = self.data.get("wire")
        return [e for e in wire if isinstance(e, dict)] if isinstance(wire, list) else []

    def describe(self) -> str:
        """Everything a failing assertion should show: the error, what was observed, the HTTP
        exchanges, the traceback, and whatever else the process printed."""
        observed = json.dumps(self.observed, default=str)
        other_stdout = "\n".join(
            line for line in self.stdout.splitlines() if not line.startswith("{")
        )
        parts = [
            f"{self.client} scenario {self.scenario} {json.dumps(dict(self.args))} "
            f"(exit {self.returncode}, {self.data.get('elapsed_s')} s)",
            f"error: {self.error}",
            f"observed: {observed[-TAIL_CHARS:]}",
            "wire:",
            *(f"  {_exchange(e)}" for e in self.wire),
        ]
        if self.data.get("traceback"):
            parts.append(f"traceback (tail):\n{str(self.data['traceback'])[-1500:]}")
        if other_stdout.strip():
            parts.append(f"stdout (tail):\n{other_stdout[-TAIL_CHARS:]}")
        if self.stderr.strip():
            parts.append(f"stderr (tail):\n{self.stderr[-TAIL_CHARS:]}")
        return "\n".join(parts)


def _exchange(entry: Mapping[str, Any]) -> str:
    """One HTTP exchange of a report's wire log, on one line."""
    rpc = entry.get("rpc") or ""
    details = {k: entry[k] for k in ("id", "name", "taskId", "requestId", "task") if k in entry}
    line = f"{entry.get('t')}s {entry.get('http')} {rpc} {json.dumps(details, default=str)}"
    line += f" headers={json.dumps(entry.get('headers', {}))}"
    line += f" -> {entry.get('status', '(no answer)')} {entry.get('content_type', '')}"
    if "body" in entry:
        line += f" body={entry['body']}"
    return line


def last_json_line(stdout: str) -> dict[str, Any]:
    """The last line of ``stdout`` that is a JSON object: a scenario script's report."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                parsed = json.loads(line)
            except ValueError:
                continue
            if isinstance(parsed, dict):
                return parsed
    return {}


def run_scenario(
    client: str,
    url: str,
    scenario: str,
    args: Mapping[str, Any] | None = None,
    *,
    timeout: float = SCENARIO_TIMEOUT_S,
    clients_dir: Path | None = None,
) -> ScenarioRun:
    """Run ``scenario`` of client ``client`` against ``url`` in the client's venv."""
    python = ensure_installed(client, clients_dir)
    args = dict(args or {})
    command = [str(python), str(SCRIPTS[client]), url, scenario, json.dumps(args)]
    # The script must see only its venv: no project paths, no inherited interpreter settings.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # no __pycache__ in tests/clients/py
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env=env, cwd=PY_DIR
        )
    except subprocess.TimeoutExpired as exc:
        stdout = _text(exc.stdout)
        stderr = _text(exc.stderr)
        data = last_json_line(stdout) or {"ok": False}
        data.setdefault("error", f"scenario script still running after {timeout} s; killed")
        return ScenarioRun(client, scenario, args, None, stdout, stderr, data)
    data = last_json_line(done.stdout)
    if not data:
        data = {"ok": False, "error": "the scenario script printed no JSON report"}
    return ScenarioRun(client, scenario, args, done.returncode, done.stdout, done.stderr, data)


def _text(output: str | bytes | None) -> str:
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""
