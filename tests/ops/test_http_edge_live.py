"""Probes of a real ``mcpq web`` (gunicorn, mcpq's uvicorn worker, Falcon) over raw sockets: an
oversized head, too many headers, slow-header and slow-body clients, deep JSON, a foreign
``Host``, loopback ``Origin``s on a loopback and on a public bind, ``Retry-After`` while Redis is
down. Each gets a 4xx/503 (or, for a slow client, the connection closed in time) and the web's
log shows no traceback."""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx
import orjson
import pytest

from mcpq.ops.harness.children import Child
from mcpq.ops.harness.stack import Stack, http_ok
from mcpq.ops.runtime.processes import free_port
from tests.support.stacks import FAST_KNOBS, LiveStack

HEADER_TIMEOUT_S = 2.0
BODY_TIMEOUT_S = 2.0
PV = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"


@dataclass
class Edge:
    stack: Stack
    local_port: int  # `mcpq web --host 127.0.0.1`
    public_port: int  # `mcpq web --host 0.0.0.0` (MCPQ_AUTH=none)
    public: Child


@pytest.fixture(scope="module")
def edge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Edge]:
    knobs = {
        **FAST_KNOBS,
        "MCPQ_HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S),
        "MCPQ_BODY_TIMEOUT_S": str(BODY_TIMEOUT_S),
        "MCPQ_REDIS_TIMEOUT_S": "1",
    }
    stack = LiveStack("edge", tmp_path_factory.mktemp("edge-stack"), env=knobs)
    try:
        stack.start_redis()
        local = stack.start_web()
        port = free_port()
        argv = [
            sys.executable,
            "-m",
            "mcpq.ops.cli.main",
            "web",
            "--host",
            "0.0.0.0",
            "--port",
            str(port),
        ]
        public = stack.spawn("web-public", argv, stack.child_env(MCPQ_AUTH="none"))
        public.wait_for(partial(http_ok, f"http://127.0.0.1:{port}/healthz"), "/healthz", 45.0)
    except BaseException:
        stack.abort()
        raise
    yield Edge(stack, int(local.rsplit(":", 1)[1]), port, public)
    stack.close()


def discover(port: int, **headers: str) -> httpx.Response:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "server/discover",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": PV,
                "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
            }
        },
    }
    base = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PV,
        "Mcp-Method": "server/discover",
    }
    return httpx.post(
        f"http://127.0.0.1:{port}/mcp", content=orjson.dumps(message), headers={**base, **headers}
    )


def raw_exchange(
    port: int, chunks: list[bytes], *, pause: float = 0.0, wait: float = 10.0
) -> bytes:
    """Send ``chunks`` (``pause`` seconds apart) on one connection while reading; returns what
    the server sent before it closed the connection (or ``wait`` ran out)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=wait)
    received = bytearray()

    def feed() -> None:
        try:
            for chunk in chunks:
                sock.sendall(chunk)
                if pause:
                    time.sleep(pause)
        except OSError:
            pass  # the server closed the connection: what it said is read below

    sender = threading.Thread(target=feed, daemon=True)
    sender.start()
    try:
        while data := sock.recv(65536):
            received += data
    except (ConnectionResetError, TimeoutError):
        pass
    finally:
        sock.close()
    sender.join(timeout=wait)
    return bytes(received)


def status_of(response: bytes) -> int:
    assert response.startswith(b"HTTP/1.1 "), response[:200]
    return int(response[9:12])


def head(extra: bytes = b"", *, host: bytes = b"127.0.0.1") -> bytes:
    return (
        b"POST /mcp HTTP/1.1\r\nHost: " + host + b"\r\nContent-Type: application/json\r\n" + extra
    )


def assert_no_traceback(edge: Edge) -> None:
    for name, text in edge.stack.all_logs().items():
        if name.startswith("web"):
            assert "Traceback" not in text, f"{name}:\n{text[-3000:]}"
    assert not edge.stack.dead(), edge.stack.tails()


def test_an_8_mib_header_gets_431(edge: Edge) -> None:
    big = head(b"X-Big: " + b"a" * (8 * 1024 * 1024) + b"\r\n\r\n")
    chunks = [big[i : i + 65536] for i in range(0, len(big), 65536)]
    started = time.monotonic()
    reply = raw_exchange(edge.local_port, chunks)
    assert status_of(reply) == 431
    assert time.monotonic() - started < 5
    assert discover(edge.local_port).status_code == 200  # the worker serves on
    assert_no_traceback(edge)


def test_20000_headers_get_431(edge: Edge) -> None:
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(20_000))
    reply = raw_exchange(edge.local_port, [head(many + b"\r\n")])
    assert status_of(reply) == 431
    assert_no_traceback(edge)


def test_101_small_headers_get_431_and_100_do_not(edge: Edge) -> None:
    # The count, not the bytes: 101 tiny headers are far below MCPQ_MAX_HEADER_BYTES.
    def request(headers: int) -> bytes:  # Host, Content-Type, Content-Length, Connection + X-*
        extra = b"".join(b"X-%d: v\r\n" % i for i in range(headers - 4))
        return head(b"Content-Length: 2\r\nConnection: close\r\n" + extra + b"\r\n{}")

    assert status_of(raw_exchange(edge.local_port, [request(100)])) == 406  # past the edge
    assert status_of(raw_exchange(edge.local_port, [request(101)])) == 431


def test_a_slowloris_client_is_cut_off_within_the_header_timeout(edge: Edge) -> None:
    trickle = head(b"X-Slow: " + b"a" * 60 + b"\r\n\r\n")
    chunks = [trickle[i : i + 1] for i in range(len(trickle))]
    started = time.monotonic()
    reply = raw_exchange(edge.local_port, chunks, pause=0.2, wait=HEADER_TIMEOUT_S + 10)
    held = time.monotonic() - started
    assert HEADER_TIMEOUT_S - 0.5 < held < HEADER_TIMEOUT_S + 2, held
    assert status_of(reply) == 408
    assert_no_traceback(edge)


def test_an_idle_connection_is_closed_within_the_header_timeout(edge: Edge) -> None:
    started = time.monotonic()
    assert raw_exchange(edge.local_port, [], wait=HEADER_TIMEOUT_S + 10) == b""
    assert time.monotonic() - started < HEADER_TIMEOUT_S + 2


def test_a_slow_body_gets_408_within_the_body_timeout(edge: Edge) -> None:
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
    announced = head(b"Accept: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
    chunks = [announced] + [body[i : i + 1] for i in range(len(body))]
    started = time.monotonic()
    reply = raw_exchange(edge.local_port, chunks, pause=0.5, wait=BODY_TIMEOUT_S + 10)
    held = time.monotonic() - started
    assert status_of(reply) == 408
    assert BODY_TIMEOUT_S - 0.5 < held < BODY_TIMEOUT_S + 2, held
    assert_no_traceback(edge)


@pytest.mark.parametrize("levels", [255, 256, 1024, 5000])
def test_deep_json_gets_32600(edge: Edge, levels: int) -> None:
    nest = "[" * levels + "]" * levels
    body = f'{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"x":{nest}}}}}'
    reply = httpx.post(
        f"http://127.0.0.1:{edge.local_port}/mcp",
        content=body.encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == -32600
    assert_no_traceback(edge)


def test_a_foreign_host_gets_421(edge: Edge) -> None:
    for port in (edge.local_port, edge.public_port):
        reply = raw_exchange(port, [head(b"Content-Length: 2\r\n\r\n{}", host=b"attacker.example")])
        assert status_of(reply) == 421
        assert b"MCPQ_ALLOWED_HOSTS" in reply
    assert_no_traceback(edge)


def test_a_localhost_origin_on_a_loopback_bind_is_accepted(edge: Edge) -> None:
    reply = discover(edge.local_port, Origin="http://localhost:3000")
    assert reply.status_code == 200, reply.text


def test_a_localhost_origin_on_a_public_bind_is_refused(edge: Edge) -> None:
    assert discover(edge.public_port).status_code == 200
    for origin in ("http://localhost:3000", "http://127.0.0.1:8080", "http://[::1]:9000"):
        reply = discover(edge.public_port, Origin=origin)
        assert reply.status_code == 403, origin
    assert_no_traceback(edge)


def test_a_redis_outage_answers_503_with_retry_after(edge: Edge) -> None:
    edge.stack.stop_redis()
    try:
        task_id = "no-such-task"
        message = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tasks/get",
            "params": {
                "taskId": task_id,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": PV,
                    "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
                },
            },
        }
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "MCP-Protocol-Version": PV,
            "Mcp-Method": "tasks/get",
            "Mcp-Name": task_id,
        }
        url = f"http://127.0.0.1:{edge.local_port}"
        reply = httpx.post(f"{url}/mcp", content=orjson.dumps(message), headers=headers, timeout=10)
        assert reply.status_code == 503
        assert reply.headers["retry-after"] == "2"
        ready = httpx.get(f"{url}/readyz", timeout=10)
        assert ready.status_code == 503
        assert ready.headers["retry-after"] == "2"
    finally:
        edge.stack.start_redis_again()


def test_log_dir_is_the_stacks(edge: Edge) -> None:
    # The probes above read these logs: make sure there is one per web process.
    names = {Path(p).name for p in edge.stack.all_logs()}
    assert {"web0.log", "web-public.log"} <= names, names
