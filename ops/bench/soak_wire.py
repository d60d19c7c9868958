"""The soak's HTTP side: the replicas a client may send to, the retries, and both wires.

Every request goes to a random live replica (`Replicas`, which the fault injector keeps up to
date as a router would) and is sent again, to another random replica, on a 5xx or a connection
error (`Transient`), within a time budget. The ledger (`mcpq.ops.bench.soak_ledger.Ledger`) gets one
entry per logical request: its kind, when it started, how long it took with its retries, how
many attempts. `Modern` speaks 2026-07-28 through `ops.harness.mcp_client.McpClient`; `Legacy` is a
2025-11-25 Streamable HTTP session (``initialize``, ``Mcp-Session-Id``, tasks with
``params.task``, answers POSTed as JSON-RPC responses), which any replica serves.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import httpx

from mcpq.ops.bench.soak_ledger import Ledger
from mcpq.ops.harness.mcp_client import McpClient, Reply
from mcpq.shared.protocol import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
    TASKS_EXTENSION,
)

T = TypeVar("T")
LEGACY_VERSION = "2025-11-25"
JSON = "application/json"
BOTH = "application/json, text/event-stream"
#: How long a logical request may keep retrying (a replica restarting, Redis coming back).
RETRY_BUDGET_S = 30.0
Params = Mapping[str, Any] | Callable[[int], Mapping[str, Any]]


class Transient(Exception):
    """A reply worth sending again elsewhere: HTTP 5xx (the store away, a replica dying)."""


class Replicas:
    """The MCP endpoints of the live web replicas. A killed replica leaves the list once it is
    dead (clients that picked it meanwhile get connection errors and retry), its restarted
    successor joins it once it answers."""

    def __init__(self, urls: list[str]) -> None:
        self._lock = threading.Lock()
        self._urls = list(urls)

    def pick(self) -> str:
        deadline = time.monotonic() + RETRY_BUDGET_S
        while True:
            with self._lock:
                if self._urls:
                    return random.choice(self._urls)
            if time.monotonic() > deadline:
                raise Transient("no live replica")
            time.sleep(0.05)

    def add(self, url: str) -> None:
        with self._lock:
            self._urls.append(url)

    def remove(self, url: str) -> None:
        with self._lock:
            if url in self._urls:
                self._urls.remove(url)


def retrying(
    ledger: Ledger, kind: str, attempt: Callable[[int], T], budget_s: float = RETRY_BUDGET_S
) -> T | None:
    """``attempt(n)`` (``n`` from 1) until it returns without a transient failure; ``None``
    once ``budget_s`` has passed. One ledger entry, whatever the number of attempts."""
    started_wall, started = time.time(), time.monotonic()
    for n in itertools.count(1):
        try:
            value = attempt(n)
        except (Transient, httpx.TransportError):
            if time.monotonic() - started > budget_s:
                ledger.request(kind, started_wall, time.monotonic() - started, n, ok=False)
                return None
            time.sleep(min(0.05 * 2**n, 0.5) * random.uniform(0.5, 1.0))
            continue
        ledger.request(kind, started_wall, time.monotonic() - started, n, ok=True)
        return value
    raise AssertionError("unreachable")


def _params(params: Params, n: int) -> Mapping[str, Any]:
    return params(n) if callable(params) else params


class Modern:
    """One 2026-07-28 client (its own connections): every request to a random replica."""

    def __init__(self, replicas: Replicas, ledger: Ledger, name: str) -> None:
        self.replicas, self.ledger = replicas, ledger
        self.client = McpClient("", elicitation=True, client_name=name, timeout_s=30.0)

    def close(self) -> None:
        self.client.close()

    def send(
        self,
        kind: str,
        method: str,
        params: Params,
        budget_s: float = RETRY_BUDGET_S,
        tasks: bool | None = None,
    ) -> Reply | None:
        """``tasks``: whether this request declares the Tasks extension (default: yes)."""

        def attempt(n: int) -> Reply:
            self.client.url = self.replicas.pick()
            reply = self.client.request(method, _params(params, n), tasks=tasks)
            if reply.status >= 500:
                raise Transient(str(reply))
            return reply

        return retrying(self.ledger, kind, attempt, budget_s)

    def listen(
        self, url: str, task_ids: list[str], rid: int
    ) -> contextlib.AbstractContextManager[Stream]:
        """``subscriptions/listen`` on ``url``, as an open stream; raises `Transient` when it
        does not stream."""
        params = {
            "_meta": {
                META_PROTOCOL_VERSION: PROTOCOL_VERSION,
                META_CLIENT_INFO: self.client.client_info,
                META_CLIENT_CAPABILITIES: {"extensions": {TASKS_EXTENSION: {}}},
            },
            "notifications": {"taskIds": task_ids},
        }
        body = {"jsonrpc": "2.0", "id": rid, "method": "subscriptions/listen", "params": params}
        headers = {
            "Content-Type": JSON,
            "Accept": BOTH,
            "MCP-Protocol-Version": PROTOCOL_VERSION,
            "Mcp-Method": "subscriptions/listen",
        }
        return _open_stream(url, body, headers)


Stream = Iterator[dict[str, Any] | None]
"""The JSON-RPC messages of an open SSE reply as they arrive, ``None`` for each keep-alive
comment (so a reader checks its deadline on those too)."""


def _events(response: httpx.Response) -> Stream:
    data: list[str] = []
    for line in response.iter_lines():
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif line.startswith(":"):
            yield None
        elif line == "" and data:
            message = json.loads("\n".join(data))
            data = []
            if isinstance(message, dict):
                yield message


@contextlib.contextmanager
def _open_stream(url: str, body: Mapping[str, Any], headers: Mapping[str, str]) -> Iterator[Stream]:
    """POST ``body`` on a connection of its own, read as a stream (at most 15 s of silence: a
    replica sends keep-alives); `Transient` when the reply is not a stream."""
    timeout = httpx.Timeout(10.0, read=15.0)
    with (
        httpx.Client(timeout=timeout) as http,
        http.stream("POST", url, json=dict(body), headers=dict(headers)) as response,
    ):
        kind = response.headers.get("content-type", "")
        if response.status_code != 200 or not kind.startswith("text/event-stream"):
            response.read()
            raise Transient(f"no stream: HTTP {response.status_code} {response.text[:300]}")
        yield _events(response)


class Legacy:
    """One 2025-11-25 session, raw: ``initialize`` once, then every request (the session's
    headers) to a random replica."""

    def __init__(self, replicas: Replicas, ledger: Ledger, name: str) -> None:
        self.replicas, self.ledger, self.name = replicas, ledger, name
        self.http = httpx.Client(timeout=httpx.Timeout(30.0, connect=5.0))
        self.session_id = ""
        self._ids = itertools.count(1)

    def close(self) -> None:
        self.http.close()

    def headers(self, accept: str = JSON) -> dict[str, str]:
        headers = {"Accept": accept, "Content-Type": JSON, "MCP-Protocol-Version": LEGACY_VERSION}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        return headers

    def open(self) -> bool:
        """``initialize`` and ``notifications/initialized``; False when it could not."""
        params = {
            "protocolVersion": LEGACY_VERSION,
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": self.name, "version": "1.0.0"},
        }
        reply = self.post("initialize", "initialize", params)
        if reply is None:
            return False
        status, message, headers = reply
        if status != 200 or "result" not in message or not headers.get("mcp-session-id"):
            return False
        self.session_id = headers["mcp-session-id"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        return self.post_raw("notifications/initialized", note) == 202

    def post(
        self, kind: str, method: str, params: Params, budget_s: float = RETRY_BUDGET_S
    ) -> tuple[int, dict[str, Any], httpx.Headers] | None:
        """One request (a JSON reply asked for): (HTTP status, the JSON-RPC message, headers)."""

        def attempt(n: int) -> tuple[int, dict[str, Any], httpx.Headers]:
            body = {
                "jsonrpc": "2.0",
                "id": next(self._ids),
                "method": method,
                "params": dict(_params(params, n)),
            }
            response = self.http.post(self.replicas.pick(), json=body, headers=self.headers())
            if response.status_code >= 500:
                raise Transient(f"HTTP {response.status_code} {response.text[:300]}")
            return response.status_code, _json(response), response.headers

        return retrying(self.ledger, kind, attempt, budget_s)

    def post_raw(self, kind: str, message: Mapping[str, Any]) -> int | None:
        """POST a notification or a response to a server request: its HTTP status."""

        def attempt(_n: int) -> int:
            url = self.replicas.pick()
            response = self.http.post(url, json=dict(message), headers=self.headers())
            if response.status_code >= 500:
                raise Transient(f"HTTP {response.status_code}")
            return response.status_code

        return retrying(self.ledger, kind, attempt)

    def result_stream(self, task_id: str) -> contextlib.AbstractContextManager[Stream]:
        """``tasks/result`` on a random replica, as an open stream."""
        body = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": "tasks/result",
            "params": {"taskId": task_id},
        }
        return _open_stream(self.replicas.pick(), body, self.headers(BOTH))


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = json.loads(response.content or b"{}")
    except ValueError:
        return {"_raw": response.text[:500]}
    return body if isinstance(body, dict) else {"_raw": body}
