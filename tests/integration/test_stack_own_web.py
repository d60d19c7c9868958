"""A stack's web process is ready only when its own process answers on its port: another
process that took the free port first (another test's web) must not pass for it (seen once: a
rotation test read a task through another stack's web and got "Task not found")."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mcpq.ops.harness.stack import own_http_ok


class _Ok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def answering() -> Iterator[int]:
    """A port this process listens on and answers 200 on."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_an_answer_counts_only_from_the_process_that_listens(answering: int) -> None:
    url = f"http://127.0.0.1:{answering}/healthz"
    assert own_http_ok(os.getpid(), answering, url)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not own_http_ok(other.pid, answering, url), "another process's answer"
    finally:
        other.kill()
        other.wait()
