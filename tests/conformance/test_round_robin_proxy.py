"""The harness's round-robin proxy (``mcpq.ops.harness.round_robin_proxy``), which the conformance
suite runs through: every request to the next backend, whatever connection it came on, with
its body, its ``Host`` and its streamed response passed on as they are."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from mcpq.ops.harness.round_robin_proxy import RoundRobinProxy

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]


class _Backend(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/stream":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()  # no length: the response ends when the connection does
            for n in range(3):
                self.wfile.write(f"data: {n}\n\n".encode())
                self.wfile.flush()
                time.sleep(0.05)
            self.close_connection = True
            return
        seen = {
            "backend": self.server.server_address[1],
            "host": self.headers.get("Host"),
            "connection": self.headers.get("Connection"),
            "body": body.decode(),
        }
        reply = json.dumps(seen).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


@pytest.fixture
def backends() -> Iterator[list[str]]:
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Backend) for _ in range(2)]
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    yield [f"http://127.0.0.1:{s.server_address[1]}" for s in servers]
    for server in servers:
        server.shutdown()
        server.server_close()


def test_each_request_goes_to_the_next_backend(backends: list[str]) -> None:
    ports = [int(url.rsplit(":", 1)[1]) for url in backends]
    with RoundRobinProxy(backends) as proxy, httpx.Client(base_url=proxy.url) as client:
        seen = [client.post("/mcp", content=f"request {n}").json() for n in range(4)]
        chunked = client.post("/mcp", content=iter([b"in ", b"chunks"])).json()
        own_host = client.post("/mcp", content=b"x", headers={"Host": "evil.example.com"}).json()
    # One keep-alive connection of the client's, yet the backends took turns.
    assert [s["backend"] for s in seen] == [ports[0], ports[1], ports[0], ports[1]]
    assert [s["body"] for s in seen] == [f"request {n}" for n in range(4)]
    assert all(s["connection"] == "close" for s in seen)
    assert seen[0]["host"] == proxy.url.removeprefix("http://")
    assert chunked["body"] == "in chunks"
    assert own_host["host"] == "evil.example.com"
    assert proxy.served == [3, 3]


def test_a_stream_is_passed_on_as_it_comes(backends: list[str]) -> None:
    with (
        RoundRobinProxy(backends[:1]) as proxy,
        httpx.Client(base_url=proxy.url) as client,
        client.stream("POST", "/stream", content=b"{}") as response,
    ):
        assert response.headers["content-type"] == "text/event-stream"
        events = [line for line in response.iter_lines() if line]
    assert events == ["data: 0", "data: 1", "data: 2"]
