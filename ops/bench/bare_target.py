"""The bare server (``mcpq.ops.bench.bare_server``) as a deployment to measure: gunicorn with
uvicorn's worker serving it, on a private Redis. The host's floor under the end-to-end latency,
for ``mcpq.ops.bench.floor`` and ``mcpq.ops.bench.throughput --peer``.

Apart from the server's module, which imports only what it serves with."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

from mcpq.ops.bench.loadgen import Target
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import free_port, listening, wait_until
from mcpq.shared.settings import DEFAULT_TOOLS


@contextlib.contextmanager
def bare_target(workdir: Path) -> Iterator[Target]:
    """The bare server on a private Redis, one gunicorn worker of uvicorn's, listening."""
    stack = Stack("floor", workdir, tools=DEFAULT_TOOLS)
    try:
        stack.start_redis()
        port = free_port()
        worker_class = "uvicorn_worker.UvicornWorker"  # httptools and uvloop, as mcpq's web
        argv = [sys.executable, "-m", "gunicorn", "-w", "1", "-k", worker_class]
        argv += ["-b", f"127.0.0.1:{port}", "mcpq.ops.bench.bare_server:create_app()"]
        server = stack.spawn("bare-web", argv)
        wait_until(lambda: listening(port), timeout=60, interval=0.2, message="the bare server")
        yield Target(stack, f"http://127.0.0.1:{port}/mcp", [server])
    finally:
        stack.close()
