"""What both scenario scripts share (stdlib only: it runs inside each client's own venv).

- :class:`Wire` records every HTTP exchange the client makes, through httpx (or httpx2) event
  hooks: method, JSON-RPC method and id, ``params.task``, the MCP headers, the status and
  content type of the answer, and the body of any error answer (which the SDKs drop when they
  raise on an HTTP status).
- :class:`Report` is the one JSON line a script prints: ``ok``, ``observed`` (filled as the
  scenario goes, so a failure still shows how far it got), ``error`` and ``wire``.
- :func:`main` parses ``<url> <scenario> [json-args]``, runs the scenario under an overall
  deadline and always prints the report, whatever happened.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

WIRE_LIMIT = 300  # exchanges kept in the report
BODY_LIMIT = 800  # characters of an error answer kept
HEADERS = ("mcp-protocol-version", "mcp-session-id", "mcp-name", "last-event-id", "accept")


def _rpc_summary(body: bytes) -> dict[str, Any]:
    """The JSON-RPC shape of a request body: method/id, or response/error to an id."""
    try:
        message = json.loads(body) if body else None
    except ValueError:
        return {"rpc": "(not JSON)"}
    if isinstance(message, list):
        return {"rpc": "(batch)", "batch": [_one_message(m) for m in message]}
    return _one_message(message) if isinstance(message, dict) else {}


def _one_message(message: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"id": message.get("id")} if "id" in message else {}
    if "method" in message:
        out["rpc"] = message["method"]
        params = message.get("params")
        if isinstance(params, dict):
            if "task" in params:
                out["task"] = params["task"]
            if isinstance(params.get("_meta"), dict):
                out["meta"] = sorted(params["_meta"])
            for key in ("name", "taskId", "requestId"):
                if key in params:
                    out[key] = params[key]
            if message["method"] == "initialize":
                out["capabilities"] = params.get("capabilities")
            meta = params.get("_meta")
            if message["method"] in ("server/discover", "tools/call") and isinstance(meta, dict):
                # 2026-07-28 clients send their capabilities on every request
                out["client_capabilities"] = meta.get("io.modelcontextprotocol/clientCapabilities")
    elif "error" in message:
        out["rpc"] = "(error answer)"
        out["error"] = message["error"]
    else:
        out["rpc"] = "(result answer)"
        result = message.get("result")
        if isinstance(result, dict):
            out["result_keys"] = sorted(result)
    return out


class Wire:
    """HTTP exchanges, in order, recorded by event hooks (``install`` them on the client)."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.exchanges: list[dict[str, Any]] = []
        self._open: dict[int, dict[str, Any]] = {}

    def hooks(self) -> dict[str, list[Callable[[Any], Awaitable[None]]]]:
        return {"request": [self.on_request], "response": [self.on_response]}

    async def on_request(self, request: Any) -> None:
        entry: dict[str, Any] = {
            "t": round(time.monotonic() - self.started, 3),
            "http": request.method,
        }
        entry.update(_rpc_summary(bytes(request.content or b"")))
        headers = {}
        for name in HEADERS:
            value = request.headers.get(name)
            if value is not None:
                headers[name] = value if name != "mcp-session-id" else f"{value[:8]}..."
        entry["headers"] = headers
        self._open[id(request)] = entry
        if len(self.exchanges) < WIRE_LIMIT:
            self.exchanges.append(entry)

    async def on_response(self, response: Any) -> None:
        entry = self._open.pop(id(response.request), None)
        if entry is None:
            return
        entry["status"] = response.status_code
        entry["content_type"] = response.headers.get("content-type", "")
        if response.headers.get("mcp-session-id"):
            entry["session_id_set"] = True
        if response.status_code >= 400:
            try:
                await response.aread()
                entry["body"] = response.text[:BODY_LIMIT]
            except Exception as exc:  # a body we cannot read is still worth a note
                entry["body"] = f"(unreadable: {exc!r})"

    def error_bodies(self) -> list[str]:
        return [str(e["body"]) for e in self.exchanges if "body" in e]


def leaf_exceptions(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, or the exception itself."""
    if isinstance(exc, BaseExceptionGroup):
        leaves: list[BaseException] = []
        for inner in exc.exceptions:
            leaves.extend(leaf_exceptions(inner))
        return leaves
    return [exc]


def describe_exception(exc: BaseException) -> tuple[str, int | None]:
    """A one-line description of what went wrong, and a JSON-RPC error code if one is known."""
    parts: list[str] = []
    code: int | None = None
    for leaf in leaf_exceptions(exc):
        error = getattr(leaf, "error", None)  # mcp's McpError carries ErrorData
        leaf_code = getattr(error, "code", None)
        if isinstance(leaf_code, int) and code is None:
            code = leaf_code
        parts.append(f"{type(leaf).__name__}: {leaf}")
    return " | ".join(parts), code


def server_error(bodies: list[str]) -> tuple[str, int | None]:
    """The first JSON-RPC error among error answers (the SDKs raise on the HTTP status and
    drop the body), as text and code."""
    for body in bodies:
        try:
            message = json.loads(body)
        except ValueError:
            continue
        error = message.get("error") if isinstance(message, dict) else None
        if isinstance(error, dict):
            code = error.get("code")
            text = f"server answered {code}: {error.get('message')}"
            return text, code if isinstance(code, int) else None
    return "", None


class Report:
    def __init__(self, scenario: str, args: dict[str, Any]) -> None:
        self.started = time.monotonic()
        self.scenario = scenario
        self.args = args
        self.observed: dict[str, Any] = {}
        self.wire = Wire(self.started)

    def elapsed(self) -> float:
        return round(time.monotonic() - self.started, 3)

    def emit(self, error: BaseException | None) -> None:
        out: dict[str, Any] = {"ok": error is None, "scenario": self.scenario}
        out["observed"] = self.observed
        if error is not None:
            text, code = describe_exception(error)
            said, said_code = server_error(self.wire.error_bodies())
            out["error"] = f"{text} ({said})" if said else text
            out["error_code"] = code if code is not None else said_code
            out["server_error_bodies"] = self.wire.error_bodies()
            out["traceback"] = "".join(traceback.format_exception(error))[-3000:]
        out["elapsed_s"] = self.elapsed()
        out["wire"] = self.wire.exchanges
        print(json.dumps(out, default=str), flush=True)


Scenario = Callable[[str, dict[str, Any], Report], Awaitable[None]]


def main(
    scenarios: dict[str, Scenario], run: Callable[[Callable[[], Awaitable[None]]], None]
) -> int:
    """``<url> <scenario> [json-args]``: run it (``run`` is anyio.run or asyncio.run), print the
    report; exit 0 when the scenario finished, 1 when it raised, 2 on bad arguments."""
    if len(sys.argv) < 3 or sys.argv[2] not in scenarios:
        print(f"usage: {sys.argv[0]} URL {{{','.join(scenarios)}}} [JSON-ARGS]", file=sys.stderr)
        return 2
    url, name = sys.argv[1], sys.argv[2]
    args = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    report = Report(name, args)
    deadline = float(args.get("deadline_s", 100))
    error: BaseException | None = None

    async def scenario() -> None:
        await scenarios[name](url, args, report)

    try:
        run(lambda: _with_deadline(scenario, deadline))
    except BaseException as exc:  # report anything, even KeyboardInterrupt, as the outcome
        error = exc
    report.emit(error)
    return 0 if error is None else 1


async def _with_deadline(scenario: Callable[[], Awaitable[None]], seconds: float) -> None:
    try:
        await asyncio.wait_for(scenario(), seconds)
    except TimeoutError as exc:
        raise TimeoutError(f"scenario did not finish within {seconds} s") from exc
