"""Helpers for the web-tier unit tests, without servers: the Falcon ASGI app over a fakeredis
task store (the real Lua scripts run in fakeredis' Lua, through lupa), a recording producer, a
fake worker that drives the store like a Celery worker would, and a small tool registry with one
tool of each mode."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import falcon.testing
import orjson
from falcon.util.sync import async_to_sync

from mcpq.shared.jobs import Run
from mcpq.shared.registry import Registry
from mcpq.shared.settings import Settings
from mcpq.shared.store import (
    AsyncTaskStore,
    Claim,
    InputPoll,
    Keys,
    SessionStore,
    TaskRecord,
    TaskStatus,
    WebStore,
    run_calls,
    task_ref,
)
from mcpq.shared.store import Reply as StoreReply
from mcpq.shared.store.api_keys import ApiKeys
from mcpq.shared.store.calls import ScriptCall
from mcpq.shared.tools import ToolContext, elicitation, sampling

T = TypeVar("T")
PV = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
OWNER = "anonymous"
CONFIRM_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}

# -- the test tool registry ----------------------------------------------------------------------
registry = Registry()


@registry.tool(task="optional", description="Echo text")
def echo(ctx: ToolContext, text: str, times: int = 1) -> str:
    return text * times


@registry.tool(task="required", ttl_ms=None, poll_interval_ms=250)
def forever(ctx: ToolContext, n: int = 0) -> int:
    """A task-only tool whose tasks never expire."""
    return n


@registry.tool(task="required", ttl_ms=60_000, queue="slow")
def slow(ctx: ToolContext) -> None:
    return None


@registry.tool(task="required", scopes=("deploy",))
def deploy(ctx: ToolContext) -> str:
    """A tool only callers granted the ``deploy`` scope may call."""
    return "deployed"


@registry.tool(task="never")
def quick(ctx: ToolContext, x: int = 0) -> int:
    return x


def _confirm(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"confirm": elicitation(f"Delete {arguments['target']}?", CONFIRM_SCHEMA)}


@registry.tool(task="optional", ask_first=_confirm)
def guarded(ctx: ToolContext, target: str) -> str:
    return f"deleted {target}"


def _survey(arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "color": elicitation("Favourite colour?", {"type": "object", "properties": {}}),
        "size": sampling([{"role": "user", "content": {"type": "text", "text": "size?"}}], 10),
    }


@registry.tool(task="optional", ask_first=_survey)
def survey(ctx: ToolContext) -> str:
    return "thanks"


# -- envelope and headers ------------------------------------------------------------------------
def meta(
    *, opt_in: bool = True, caps: dict[str, Any] | None = None, version: str = PV
) -> dict[str, Any]:
    capabilities: dict[str, Any] = dict(caps or {})
    if opt_in:
        capabilities["extensions"] = {**capabilities.get("extensions", {}), TASKS: {}}
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "unit", "version": "0"},
    }


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


_NAME_PARAM = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    content: bytes

    @property
    def streamed(self) -> bool:
        return self.headers.get("content-type", "").startswith("text/event-stream")

    @property
    def messages(self) -> list[Any]:
        """The JSON-RPC messages of an SSE reply, in order (keep-alive comments left out)."""
        assert self.streamed, self.headers
        text = self.content.decode()
        return [orjson.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]

    @property
    def keepalives(self) -> int:
        return sum(1 for line in self.content.decode().splitlines() if line.startswith(":"))

    @property
    def body(self) -> Any:
        """The JSON-RPC response: the JSON body, or the last message of an SSE reply."""
        if self.streamed:
            return self.messages[-1]
        return orjson.loads(self.content)

    @property
    def result(self) -> dict[str, Any]:
        body = self.body
        assert "error" not in body, body
        return body["result"]  # type: ignore[no-any-return]

    @property
    def error(self) -> dict[str, Any]:
        body = self.body
        assert "result" not in body, body
        return body["error"]  # type: ignore[no-any-return]

    def code(self) -> tuple[int, int]:
        """``(HTTP status, JSON-RPC error code)``."""
        return self.status, self.error["code"]


class ListHeaders:
    """ASGI middleware for tests: appends ``raw`` headers verbatim (falcon.testing strips
    values) and keeps the simulated client connected until the response is sent."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.raw: list[tuple[bytes, bytes]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = [(bytes(k), bytes(v)) for k, v in scope["headers"]]
            scope = {**scope, "headers": headers + self.raw}
            self.raw = []

        async def stay_connected() -> Any:
            # falcon.testing "disconnects" as soon as the body is sent; a real client waits
            # for its answer, and a real server then blocks receive() until the response.
            message = await receive()
            if message["type"] == "http.disconnect":
                await asyncio.Event().wait()
            return message

        await self.app(scope, stay_connected, send)


@dataclass
class Mcp:
    """A JSON-RPC client over ``falcon.testing.TestClient`` that sends correct headers unless
    told otherwise."""

    client: falcon.testing.TestClient
    shim: ListHeaders
    web: WebStore  # the app's store: one face per concern
    peek: Any  # a synchronous fakeredis client on the same server: white-box reads
    keys: Keys
    producer: FakeProducer
    worker: FakeWorker
    settings: Settings
    token: str | None = None  # sent as Authorization: Bearer (MCPQ_AUTH=apikey apps)

    @property
    def store(self) -> AsyncTaskStore:
        """The app's task store (what ``TaskService`` holds)."""
        return self.web.tasks

    @property
    def sessions(self) -> SessionStore:
        return self.web.sessions

    def api_key(self, name: str, *scopes: str) -> str:
        """A real API key in this app's (fake) Redis, as ``mcpq keys create`` makes one."""
        return ApiKeys(self.peek, self.keys).create(name, scopes)[1]

    def raw(
        self, body: bytes, headers: Any = None, method: str = "POST", verbatim: Any = ()
    ) -> Reply:
        """POST ``body``; ``verbatim`` ``(name, value)`` pairs reach the app untrimmed."""
        hdrs = headers if headers is not None else self.headers("tools/list", {})
        self.shim.raw = [(n.lower().encode(), v.encode("latin-1")) for n, v in verbatim]
        result = self.client.simulate_request(method, "/mcp", body=body, headers=hdrs)
        return Reply(result.status_code, dict(result.headers), result.content)

    def headers(self, method: str, params: dict[str, Any], **extra: Any) -> dict[str, str]:
        hdrs = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PV,
            "Mcp-Method": method,
        }
        if self.token is not None:
            hdrs["Authorization"] = f"Bearer {self.token}"
        param = _NAME_PARAM.get(method)
        if param is not None and isinstance(params.get(param), str):
            hdrs["Mcp-Name"] = params[param]
        for key, value in extra.items():
            name = key.replace("_", "-")
            for existing in [h for h in hdrs if h.lower() == name.lower()]:
                del hdrs[existing]
            if value is not None:
                hdrs[name] = value
        return hdrs

    def post(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        rid: Any = 1,
        opt_in: bool = True,
        caps: dict[str, Any] | None = None,
        with_meta: bool = True,
        verbatim: Any = (),
        **headers: Any,
    ) -> Reply:
        """``headers``: ``Mcp_Name="x"`` overrides, ``Mcp_Name=None`` omits."""
        params = dict(params or {})
        if with_meta:
            params.setdefault("_meta", meta(opt_in=opt_in, caps=caps))
        message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        hdrs = self.headers(method, params, **headers)
        return self.raw(orjson.dumps(message), hdrs, verbatim=verbatim)

    def call(self, tool: str, arguments: dict[str, Any] | None = None, **kw: Any) -> Reply:
        params: dict[str, Any] = {"name": tool}
        if arguments is not None:
            params["arguments"] = arguments
        params.update(kw.pop("extra", {}))
        return self.post("tools/call", params, **kw)

    def get(self, task_id: str, **kw: Any) -> Reply:
        return self.post("tasks/get", {"taskId": task_id}, **kw)

    def new_task(self, tool: str = "echo", arguments: dict[str, Any] | None = None) -> str:
        if arguments is None and tool == "echo":
            arguments = {"text": "hi"}
        reply = self.call(tool, arguments)
        assert reply.status == 200, reply.content
        return str(reply.result["taskId"])

    def record(self, task_id: str) -> TaskRecord | None:
        return self.record_by_ref(task_ref(task_id))

    def record_by_ref(self, ref: str) -> TaskRecord | None:
        stored = self.peek.hgetall(self.keys.task(ref))
        return TaskRecord.from_hash(ref, stored) if stored else None


# -- fakes ---------------------------------------------------------------------------------------
@dataclass
class FakeProducer:
    """Records every enqueue (and whether the task was already persisted then) and revoke."""

    peek: Any
    keys: Keys
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    request_ids: list[str] = field(default_factory=list)
    #: Each run's traceparent and the task's (the create's, when another request sent it).
    traces: list[tuple[str, str]] = field(default_factory=list)
    on_enqueue: Callable[[str, str, str], Awaitable[None]] | None = None
    fail: bool = False

    async def message(self, run: Run) -> None:
        """Like a producer on a broker other than the store's Redis: the run is published."""
        return None

    async def enqueue(self, run: Run) -> None:
        persisted = bool(self.peek.exists(self.keys.task(run.ref)))
        self.calls.append(("enqueue", run.tool, run.ref, run.queue, persisted))
        self.request_ids.append(run.request_id)
        self.traces.append((run.trace, run.task_trace))
        if self.fail:
            raise ConnectionError("broker down")
        if self.on_enqueue is not None:
            await self.on_enqueue(run.tool, run.ref, run.queue)

    async def revoke(self, ref: str) -> None:
        self.calls.append(("revoke", ref))

    @property
    def enqueues(self) -> list[tuple[Any, ...]]:
        return [c for c in self.calls if c[0] == "enqueue"]

    @property
    def revokes(self) -> list[str]:
        return [c[1] for c in self.calls if c[0] == "revoke"]


@dataclass
class FakeWorker:
    """A worker's side of the store, through the same Lua scripts (claim, ask, park, finish),
    run on the app's task store."""

    store: AsyncTaskStore
    keys: Keys

    async def run(self, call: ScriptCall[T]) -> T:
        return await self.store.io.drive(self.store.plans.run(call))

    async def claim(self, ref: str) -> Claim:
        return await self.run(run_calls.claim(self.keys, ref, 10_000))

    async def ask(self, ref: str, gen: int, requests: dict[str, Any]) -> InputPoll:
        return await self.run(run_calls.request_input(self.keys, ref, gen, requests))

    async def park(self, ref: str, gen: int) -> StoreReply:
        return await self.run(run_calls.park(self.keys, ref, gen))

    async def finish(
        self, ref: str, gen: int, status: str, payload: dict[str, Any], message: str = ""
    ) -> StoreReply:
        call = run_calls.finish(self.keys, ref, gen, TaskStatus(status), payload, message)
        reply, _ = await self.run(call)
        return reply

    def runs(
        self, outcome: Callable[[TaskRecord, dict[str, str]], tuple[str, dict[str, Any]]]
    ) -> Callable[[str, str, str], Awaitable[None]]:
        """An ``on_enqueue`` hook: claim the task at once and end it with ``outcome(record,
        answers)`` -> ``(status, payload)``; status ``"ask"`` asks ``payload`` and parks."""

        async def run(tool: str, ref: str, queue: str) -> None:
            claim = await self.claim(ref)
            assert claim.reply is StoreReply.OK and claim.record is not None, claim
            status, payload = outcome(claim.record, claim.answers or {})
            if status == "ask":
                poll = await self.ask(ref, claim.gen, payload)
                assert poll.reply is StoreReply.OK, poll
                assert await self.park(ref, claim.gen) == "PARKED"
                return
            message = str(payload.get("message", "")) if status == "failed" else ""
            assert await self.finish(ref, claim.gen, status, payload, message) == "OK"

        return run

    # synchronous wrappers, for driving the store between requests
    def claim_now(self, task_id: str) -> Claim:
        return async_to_sync(self.claim, task_ref(task_id))

    def ask_now(self, task_id: str, gen: int, requests: dict[str, Any]) -> InputPoll:
        return async_to_sync(self.ask, task_ref(task_id), gen, requests)

    def park_now(self, task_id: str, gen: int) -> StoreReply:
        return async_to_sync(self.park, task_ref(task_id), gen)

    def finish_now(
        self, task_id: str, gen: int, status: str, payload: dict[str, Any]
    ) -> StoreReply:
        message = str(payload.get("message", "")) if status == "failed" else ""
        return async_to_sync(self.finish, task_ref(task_id), gen, status, payload, message)


SETTINGS = Settings(
    secret="unit-test-secret-0123456789-abcdefghijklmnopqrstuvwxyz",
    key_prefix="unit",
    sync_timeout_s=2.0,
    tools=(),
    server_name="mcpq-unit",
    # A server as `mcpq dev` runs it (bound to loopback), addressed by falcon.testing's Host.
    allowed_hosts=("falconframework.org",),
    loopback_bind=True,
)
