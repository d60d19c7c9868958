"""A 2025-11-25 session opened on replica A whose elicitation answer is POSTed to replica B.

Raw httpx (an SDK cannot be made to split one session over two URLs): initialize on A, POST
``notifications/initialized``, POST ``tools/call ask_color`` on A and read its SSE stream; when
``elicitation/create`` arrives, POST the JSON-RPC response to B with the same ``Mcp-Session-Id``
(expect 202); A's stream must then end with the tool result. Every step is recorded, so a failure
shows how far the exchange got and what the server said.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from mcpq.ops.harness.mcp_client import sse_messages
from mcpq.ops.harness.stack import Stack

pytestmark = [pytest.mark.clients, pytest.mark.timeout(120)]

VERSION = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
READ_S = 30.0  # longest quiet spell on a stream (the stack sends keep-alives every 2 s)


class Exchange:
    """The steps taken so far, for assertion messages."""

    def __init__(self) -> None:
        self.steps: list[str] = []

    def note(self, text: str) -> None:
        self.steps.append(text)

    def __str__(self) -> str:
        return "steps so far:\n  " + "\n  ".join(self.steps)

    __repr__ = __str__  # pytest shows an assertion message object by its repr


def first_answer(response: httpx.Response, request_id: int) -> dict[str, Any] | None:
    """The answer to ``request_id`` from a JSON or SSE response body."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for message in sse_messages(response):
            if message.get("id") == request_id and "method" not in message:
                return message
        return None
    message = json.loads(response.read())
    return message if isinstance(message, dict) else None


def session_headers(session_id: str) -> dict[str, str]:
    return {
        "Accept": ACCEPT,
        "Content-Type": "application/json",
        "Mcp-Session-Id": session_id,
        "MCP-Protocol-Version": VERSION,
    }


def initialize(client: httpx.Client, url: str, log: Exchange) -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": VERSION,
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "mcpq-cross-replica-test", "version": "0"},
        },
    }
    headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
    with client.stream("POST", url, json=body, headers=headers) as response:
        answer = first_answer(response, 1)
        session_id = str(response.headers.get("mcp-session-id") or "")
        log.note(f"initialize on A -> HTTP {response.status_code}, session {session_id}: {answer}")
    assert answer is not None and "result" in answer, log
    assert answer["result"]["protocolVersion"] == VERSION, log
    assert session_id, f"no Mcp-Session-Id on the initialize answer\n{log}"
    done = client.post(
        url,
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers=session_headers(session_id),
    )
    log.note(f"notifications/initialized on A -> HTTP {done.status_code} {done.text[:300]}")
    assert done.status_code == 202, log
    return session_id


def test_elicitation_answer_posted_to_the_other_replica(stack: Stack) -> None:
    url_a, url_b = stack.url(0), stack.url(1)
    log = Exchange()
    timeout = httpx.Timeout(10.0, read=READ_S)
    with httpx.Client(timeout=timeout) as client_a, httpx.Client(timeout=timeout) as client_b:
        session_id = initialize(client_a, url_a, log)
        headers = session_headers(session_id)
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "ask_color", "arguments": {}},
        }
        result: dict[str, Any] | None = None
        answered = False
        with client_a.stream("POST", url_a, json=call, headers=headers) as stream:
            kind = stream.headers.get("content-type", "")
            log.note(f"tools/call ask_color on A -> HTTP {stream.status_code} {kind}")
            if not kind.startswith("text/event-stream"):
                log.note(f"body: {stream.read()[:500]!r}")
            assert stream.status_code == 200 and kind.startswith("text/event-stream"), log
            for message in sse_messages(stream):
                log.note(f"A stream: {json.dumps(message)[:400]}")
                if message.get("method") == "elicitation/create":
                    assert not answered, f"a second elicitation/create\n{log}"
                    reply = {
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "result": {"action": "accept", "content": {"color": "red"}},
                    }
                    posted = client_b.post(url_b, json=reply, headers=headers)
                    log.note(f"answer on B -> HTTP {posted.status_code} {posted.text[:300]}")
                    assert posted.status_code == 202, log
                    answered = True
                elif message.get("id") == 2 and "method" not in message:
                    result = message
                    break
        client_a.delete(url_a, headers=headers)  # end the session; 405 is fine too
    assert answered, f"no elicitation/create on A's stream\n{log}"
    assert result is not None and "result" in result, f"no tool result on A's stream\n{log}"
    texts = [c.get("text") for c in result["result"].get("content", [])]
    assert texts == ["colour: red"], log
    assert not result["result"].get("isError"), log
