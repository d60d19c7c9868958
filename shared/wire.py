"""The results mcpq emits, as typed models (pydantic), serialised in one way: :meth:`Result.dump`.

Field names are snake_case here and camelCase on the wire. A field is on the wire when it was
given, ``None`` included (``ttlMs: null`` means unlimited and must be sent), and absent when it
was not: the spec forbids some fields in some states (``result`` outside ``completed``), so
"not given" is how a model says "must not appear".
"""

from __future__ import annotations

import functools
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from mcpq.shared.errors import INTERNAL_ERROR, McpError
from mcpq.shared.store.records import TaskRecord
from mcpq.shared.store.states import TaskStatus

JsonObject = dict[str, Any]


def iso(ms: int) -> str:
    """ISO 8601 UTC with milliseconds, e.g. ``2026-11-30T04:52:00.891Z``."""
    seconds, millis = divmod(ms, 1000)
    return "%s.%03dZ" % (_iso_second(seconds), millis)  # noqa: UP031


@functools.lru_cache(maxsize=256)
def _iso_second(seconds: int) -> str:
    """``2026-11-30T04:52:00``. Every task a client reads formats two timestamps, mostly of the
    same few seconds (a task's creation and its last update, the tasks created or polled in
    the last moments): each second is formatted once, with gmtime and %-formatting (half the
    cost of strftime, a third less than an f-string's six format specs)."""
    t = time.gmtime(seconds)
    return "%04d-%02d-%02dT%02d:%02d:%02d" % (  # noqa: UP031
        t.tm_year,
        t.tm_mon,
        t.tm_mday,
        t.tm_hour,
        t.tm_min,
        t.tm_sec,
    )


class Result(BaseModel):
    """A JSON-RPC ``result``; every one carries its ``resultType``."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    result_type: Literal["complete", "task", "input_required"] = "complete"

    def dump(self) -> JsonObject:
        # exclude_unset, not exclude_none: see the module docstring. resultType is always sent.
        return {
            "resultType": self.result_type,
            **self.model_dump(by_alias=True, exclude_unset=True),
        }


class Ack(Result):
    """An empty result (``tasks/update``, ``tasks/cancel``)."""


class CallToolResult(Result):
    """What a tool call produced (``content`` and, maybe, ``structuredContent``, ``isError``);
    a tool may return more fields of its own, which pass through."""

    model_config = ConfigDict(extra="allow")

    content: list[JsonObject] = []
    structured_content: Any = None
    is_error: bool = False
    meta: JsonObject | None = Field(default=None, alias="_meta")


class Task(Result):
    """The spec's flat ``DetailedTask``: the task, and exactly the field its status allows."""

    task_id: str
    status: TaskStatus
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int
    status_message: str | None = None
    input_requests: dict[str, JsonObject] | None = None
    result: JsonObject | None = None
    error: JsonObject | None = None

    @classmethod
    def of(
        cls, record: TaskRecord, task_id: str, inputs: dict[str, JsonObject] | None = None
    ) -> Task:
        """The task as ``tasks/get`` shows it: ``inputRequests`` only while ``input_required``,
        ``result`` only once ``completed``, ``error`` only once ``failed``."""
        fields: dict[str, Any] = {}
        if record.message:
            fields["status_message"] = record.message
        if record.status is TaskStatus.INPUT_REQUIRED:
            fields["input_requests"] = inputs or {}
        elif record.status is TaskStatus.COMPLETED:
            fields["result"] = record.result or {"resultType": "complete", "content": []}
        elif record.status is TaskStatus.FAILED:
            fields["error"] = record.error or {"code": INTERNAL_ERROR, "message": "Task failed"}
        return cls(
            task_id=task_id,
            status=record.status,
            created_at=iso(record.created_ms),
            last_updated_at=iso(record.updated_ms),
            ttl_ms=record.ttl_ms,
            poll_interval_ms=record.poll_ms,
            **fields,
        )


class InputRequiredResult(Result):
    """MRTR: questions for the client, and the signed state to echo with the answers."""

    result_type: Literal["input_required"] = "input_required"
    input_requests: dict[str, JsonObject]
    request_state: str


class ToolsList(Result):
    tools: list[JsonObject]
    ttl_ms: int
    cache_scope: Literal["private", "public"]


class Listing(Result):
    """A page of a list method (``resources/list``...): ``next_cursor`` when more follow, and on
    2026-07-28 the caching hints (SEP-2549)."""

    next_cursor: str | None = None
    ttl_ms: int | None = None
    cache_scope: Literal["private", "public"] | None = None


class ResourcesList(Listing):
    resources: list[JsonObject]


class ResourceTemplatesList(Listing):
    resource_templates: list[JsonObject]


class PromptsList(Listing):
    prompts: list[JsonObject]


class ReadResourceResult(Result):
    contents: list[JsonObject]
    ttl_ms: int | None = None
    cache_scope: Literal["private", "public"] | None = None


class GetPromptResult(Result):
    messages: list[JsonObject]
    description: str | None = None


class CompleteResult(Result):
    completion: JsonObject


class Discovery(Result):
    supported_versions: list[str]
    capabilities: JsonObject
    instructions: str
    ttl_ms: int
    cache_scope: Literal["private", "public"]


# -- the 2025-11-25 tasks wire (SEP-1686): the same task record, its other view ------------------
class LegacyTask(Result):
    """The 2025-11-25 ``Task``: ``ttl``/``pollInterval`` names, no result or input requests in
    it (those come from ``tasks/result``), and a tool result with ``isError`` reads ``failed``
    (2026-07-28 reports it ``completed``)."""

    task_id: str
    status: TaskStatus
    created_at: str
    last_updated_at: str
    ttl: int | None
    poll_interval: int
    status_message: str | None = None

    @classmethod
    def of(cls, record: TaskRecord, task_id: str) -> LegacyTask:
        status = record.status
        if status is TaskStatus.COMPLETED and (record.result or {}).get("isError") is True:
            status = TaskStatus.FAILED
        fields: dict[str, Any] = {}
        if record.message:
            fields["status_message"] = record.message
        return cls(
            task_id=task_id,
            status=status,
            created_at=iso(record.created_ms),
            last_updated_at=iso(record.updated_ms),
            ttl=record.ttl_ms,
            poll_interval=record.poll_ms,
            **fields,
        )


class CreateTaskResult(Result):
    """The 2025-11-25 answer to a task-augmented ``tools/call``: the task, nested."""

    task: JsonObject


class ListTasksResult(Result):
    tasks: list[JsonObject]
    next_cursor: str | None = None


class LegacyToolsList(Result):
    tools: list[JsonObject]


class Initialized(Result):
    """The ``initialize`` result of a 2025-era session."""

    protocol_version: str
    capabilities: JsonObject
    server_info: JsonObject
    instructions: str


def legacy_dump(result: Result) -> JsonObject:
    """A result as 2025-era clients read it: no ``resultType`` (a 2026-07-28 field)."""
    dumped = result.dump()
    dumped.pop("resultType", None)
    return dumped


def call_outcome(record: TaskRecord) -> CallToolResult:
    """What a call whose task ended returns: its result, or its error raised (``failed``, and
    ``cancelled``, which a call reports as an error)."""
    if record.status is TaskStatus.COMPLETED:
        return CallToolResult.model_validate(record.result or {"content": []})
    if record.status is TaskStatus.FAILED:
        error = record.error or {}
        code, message = int(error.get("code", INTERNAL_ERROR)), str(error.get("message", ""))
        raise McpError(code, message, error.get("data"))
    raise McpError(INTERNAL_ERROR, "Tool call was cancelled")


def created_task(
    task_id: str, created_ms: int, ttl_ms: int | None, poll_ms: int, *, legacy: bool
) -> Result:
    """The answer to a call that created a task: the 2026-07-28 ``CreateTaskResult``, or the
    2025-11-25 one (the task, nested, in that wire's view): ``working``, never updated."""
    stamp = iso(created_ms)
    fresh: dict[str, Any] = {
        "task_id": task_id,
        "status": TaskStatus.WORKING,
        "created_at": stamp,
        "last_updated_at": stamp,
    }
    if legacy:
        task = LegacyTask(**fresh, ttl=ttl_ms, poll_interval=poll_ms)
        return CreateTaskResult(task=legacy_dump(task))
    return Task(result_type="task", **fresh, ttl_ms=ttl_ms, poll_interval_ms=poll_ms)
