"""A run's message as kombu's Redis transport would push it, built on the web tier for the
create script to push (``create.lua``): exactly Celery's message, at a fraction of its cost.

Celery builds the message once per tool and queue, through a kombu Redis channel whose last
step (``_put``, the ``LPUSH``) hands the list key and the serialized message back instead of
pushing them. That first message becomes a template. Only a few of its fields differ from one
run to the next: the task id and root id (the ref), its ``argsrepr`` and body (the ref is the
only argument), the request id header, the correlation id and the delivery tag. Each later run
fills those in. Building every message with Celery cost a seventh of the web tier's CPU per
create.

The template is used only if it reproduces, for a second sample run, the message Celery built
for that run (delivery tag aside, which is random). If a Celery release changes its format,
every message is built by Celery again. The message is never pickled: JSON only, like every
Celery message here.
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from dataclasses import dataclass
from typing import Any

import orjson
from celery import Celery
from kombu import Producer as KombuProducer
from kombu.transport import redis as kombu_redis
from kombu.utils.json import dumps

from mcpq.shared.jobs import (
    REQUEST_ID_HEADER,
    TASK_TRACE_HEADER,
    TRACE_HEADER,
    Message,
    Run,
    send_run,
)

_captured = threading.local()


class _CapturingChannel(kombu_redis.Channel):
    """kombu's Redis channel, but the last step of a publish (``_put``: ``LPUSH`` of the
    serialized message onto the queue's list) hands the list and the message back instead."""

    def _put(self, queue: str, message: dict[str, Any], **_: Any) -> None:
        priority = self._get_message_priority(message, reverse=False)
        key = self._q_for_pri(queue, priority)  # type: ignore[attr-defined]  # (not in stubs)
        _captured.message = Message(key, dumps(message))


class CapturingTransport(kombu_redis.Transport):
    Channel = _CapturingChannel


@dataclass(frozen=True)
class _Template:
    key: str  # the queue's list
    fields: dict[str, Any]  # the message, as Celery built it for a placeholder run
    kwargs: Any  # of the body: [args, kwargs, embed]
    embed: Any


class RunMessages:
    """Messages of runs, for ``create.lua`` to push. ``open()`` once, off the event loop
    (kombu connects and pings when it opens the channel; never again, nothing is sent)."""

    def __init__(self, capture: Celery) -> None:
        self._capture = capture
        self._producer: KombuProducer | None = None
        self._templates: dict[tuple[str, str], _Template | None] = {}

    @property
    def opened(self) -> bool:
        return self._producer is not None

    def open(self) -> None:
        self._producer = KombuProducer(
            self._capture.connection_for_write().default_channel, auto_declare=False
        )

    def build(self, run: Run) -> Message:
        """The message of ``run`` (no I/O)."""
        key = (run.tool, run.queue)
        if key not in self._templates:
            self._templates[key] = self._template(run.tool, run.queue)
        template = self._templates[key]
        if template is None:
            return self._celery(run)
        # orjson, not kombu's json.dumps (the stdlib's): the same JSON values, a tenth of the
        # cost, twice per create (the body, then the message around it).
        filled = _fill(template, run, str(uuid.uuid4()))
        return Message(template.key, orjson.dumps(filled).decode())

    def _celery(self, run: Run) -> Message:
        _captured.message = None
        # declare=[]: no queue declaration through this channel (workers declare theirs; a list
        # is consumed whether declared or not).
        send_run(self._capture, run, producer=self._producer, declare=[])
        message: Message | None = _captured.message
        if message is None:
            raise RuntimeError("kombu did not hand the message back")
        return message

    def _template(self, tool: str, queue: str) -> _Template | None:
        first = self._celery(Run(tool, "0" * 32, queue, "template"))
        fields: dict[str, Any] = json.loads(first.body)
        _, kwargs, embed = json.loads(base64.b64decode(fields["body"]))
        template = _Template(first.key, fields, kwargs, embed)
        sample = Run(tool, "1f" * 16, queue, "sample-request")
        check = self._celery(sample)
        expected: dict[str, Any] = json.loads(check.body)
        tag = expected["properties"]["delivery_tag"]
        # The body is compared as JSON values: ours is encoded by orjson, Celery's by kombu.
        if check.key != first.key or _decoded(_fill(template, sample, tag)) != _decoded(expected):
            return None  # Celery's format is not the one this module knows
        return template


def _fill(template: _Template, run: Run, delivery_tag: str) -> dict[str, Any]:
    """The template with the fields of ``run`` (see the module's docstring)."""
    body = orjson.dumps([[run.ref], template.kwargs, template.embed])
    headers = {**template.fields["headers"], "id": run.ref, "root_id": run.ref}
    headers.update({"argsrepr": repr([run.ref]), REQUEST_ID_HEADER: run.request_id})
    headers[TRACE_HEADER] = run.trace
    headers[TASK_TRACE_HEADER] = run.task_trace
    properties = {**template.fields["properties"], "correlation_id": run.ref}
    properties["delivery_tag"] = delivery_tag
    message = {**template.fields, "headers": headers, "properties": properties}
    message["body"] = base64.b64encode(body).decode()
    return message


def _decoded(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with its body (base64 of JSON) decoded."""
    return {**message, "body": json.loads(base64.b64decode(message["body"]))}
