"""The peer of ``mcpq.ops.bench.throughput --peer``: fastmcp-tasks (FastMCP on Docket/Redis, the
best operational peer), installed into a cached venv and deployed as its README does."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from mcpq.ops.bench.loadgen import Target
from mcpq.ops.harness.children import REPO
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import free_port, listening, wait_until
from mcpq.shared.settings import DEFAULT_TOOLS

PEER_VERSION = "4.1.4"
PEER_VENV = REPO / ".cache" / "peer-venv"
#: The same no-op tool on the peer, served the way its README deploys it: the server (whose
#: tasks extension runs an embedded worker of concurrency 10) plus one dedicated worker.
#: Written into the run's folder: it imports fastmcp, which mcpq does not depend on.
PEER_SERVER = """\
import asyncio
import os

from fastmcp import FastMCP
from fastmcp_tasks import TasksExtension

mcp = FastMCP("peer")
mcp.add_extension(TasksExtension(url=os.environ["FASTMCP_DOCKET_URL"]))


@mcp.tool(task=True)
async def slow_compute(seconds: float, label: str = "result") -> str:
    await asyncio.sleep(seconds)
    return f"{label}: computed in {seconds:g}s"


if __name__ == "__main__":
    mcp.run(transport="http", host="127.0.0.1", port=int(os.environ["PORT"]), show_banner=False)
"""


def peer_python() -> Path:
    """The Python of a cached venv with fastmcp-tasks installed (made on first use)."""
    python = PEER_VENV / "bin" / "python"
    probe = "import importlib.metadata as m; print(m.version('fastmcp-tasks'))"
    if python.exists():
        found = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
        if found.stdout.strip() == PEER_VERSION:
            return python
    print(f"installing fastmcp-tasks {PEER_VERSION} into {PEER_VENV}", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"fastmcp-tasks=={PEER_VERSION}"], check=True
    )
    return python


@contextlib.contextmanager
def peer_target(workdir: Path) -> Iterator[Target]:
    """The peer deployed and listening, for ``loadgen.measure``; stopped on exit."""
    python = peer_python()
    stack = Stack("peer", workdir, tools=DEFAULT_TOOLS)
    try:
        stack.start_redis()
        server_py = workdir / "peer_server.py"
        server_py.write_text(PEER_SERVER)
        port = free_port()
        env = stack.child_env(FASTMCP_DOCKET_URL=stack.redis_url, PORT=str(port))
        server = stack.spawn("peer-server", [str(python), str(server_py)], env)
        worker_argv = [str(python), "-m", "fastmcp_tasks.worker_cli", "worker", str(server_py)]
        worker = stack.spawn("peer-worker", worker_argv, env)
        url = f"http://127.0.0.1:{port}/mcp"
        wait_until(lambda: listening(port), timeout=60, interval=0.2, message="the peer")
        yield Target(stack, url, [server, worker])
    finally:
        stack.close()
