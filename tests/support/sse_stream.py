"""The JSON-RPC messages of an open SSE response (``httpx``), read one at a time under a
deadline; everything read is kept for failure messages. Shared by the e2e tests that read
mcpq's streams raw (a call's, a session's GET stream, a ``subscriptions/listen`` stream)."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx


class EventStream:
    """``read_s``: the longest quiet spell the response's client allows (for the message when
    it passes); ``check``: refuse at once a response that is not a 200 event stream."""

    def __init__(
        self, response: httpx.Response, what: str, *, read_s: float, check: bool = False
    ) -> None:
        if check:
            kind = response.headers.get("content-type", "")
            if response.status_code != 200 or not kind.startswith("text/event-stream"):
                body = response.read()[:800]
                raise AssertionError(f"{what}: HTTP {response.status_code} {kind} {body!r}")
        self.what, self.read_s = what, read_s
        self.lines = response.iter_lines()
        self.seen: list[dict[str, Any]] = []
        self.comments = 0

    def __str__(self) -> str:
        shown = "\n  ".join(json.dumps(m)[:600] for m in self.seen)
        return f"{self.what}: {len(self.seen)} messages, {self.comments} comments:\n  {shown}"

    def next(self, deadline: float) -> dict[str, Any]:
        data: list[str] = []
        try:
            for line in self.lines:
                if line.startswith("data:"):
                    data.append(line[5:].removeprefix(" "))
                elif line.startswith(":"):
                    self.comments += 1  # a keep-alive
                elif line == "" and data:
                    message: dict[str, Any] = json.loads("\n".join(data))
                    self.seen.append(message)
                    return message
                if time.monotonic() > deadline:
                    raise AssertionError(f"deadline passed waiting on {self}")
        except httpx.ReadTimeout:
            raise AssertionError(f"nothing for {self.read_s:g} s on {self}") from None
        raise AssertionError(f"the stream ended on {self}")

    def until(self, deadline: float, done: Any) -> list[dict[str, Any]]:
        """Messages until (and with) the first for which ``done(message)`` holds."""
        got = []
        while True:
            message = self.next(deadline)
            got.append(message)
            if done(message):
                return got
