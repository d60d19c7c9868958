"""The interface a running tool sees (``ToolContext``) and the input requests it builds.

One context type serves both kinds of tool. A plain ``def`` tool calls it and gets values; an
``async def`` tool awaits the same calls (``await ctx.elicit(...)``), and the worker runs the
blocking ones off its event loop (``mcpq.workers.async_context``). For one annotation to
type-check both ways under ``mypy --strict``, what a blocking call returns is also awaitable:
:class:`Answer` is a dict, :class:`Answers` a list and :data:`DONE` nothing, each of which an
``await`` turns into itself (a sync tool never needs to await them).
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Generator, Iterable
from typing import Any, Literal, Protocol, TypeVar, overload

from mcpq.shared.elicitation import Elicited

InputRequest = dict[str, Any]
#: The levels of ``notifications/message`` (RFC 5424's, as MCP names them), least severe first.
LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
LOG_LEVELS: tuple[LogLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
T = TypeVar("T")
M = TypeVar("M")


class Answer(dict[str, Any]):
    """The client's answer to one input request (an ``ElicitResult``, a
    ``CreateMessageResult``): a dict, and awaitable to itself so that ``await ctx.elicit(...)``
    type-checks in an async tool."""

    def __await__(self) -> Generator[Any, None, Answer]:
        return self
        yield  # a generator that never yields: awaiting it returns at once


class Answers(list[dict[str, Any]]):
    """The answers to several input requests (``ctx.ask``), in order; awaitable like
    :class:`Answer`."""

    def __await__(self) -> Generator[Any, None, Answers]:
        return self
        yield


class Contents(list[dict[str, Any]]):
    """A resource's contents (``ctx.read_resource``); awaitable like :class:`Answer`."""

    def __await__(self) -> Generator[Any, None, Contents]:
        return self
        yield


class Done:
    """What a context call with nothing to return gives: awaiting it does nothing more (the
    call has happened), so ``ctx.report(...)`` and ``await ctx.report(...)`` both work."""

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield


DONE = Done()


class ToolContext(Protocol):
    """What a running tool may do. Every call also observes cancellation: once the task is
    cancelled, the next call raises :class:`mcpq.shared.errors.TaskCancelled`.

    In an ``async def`` tool, await ``sleep``, ``ask``, ``elicit``, ``elicit_url``, ``sample``
    and a ``step`` whose ``fn`` is async: they wait off the tool's event loop, one at a time in
    the order they were made. ``report``, ``report_progress``, ``log`` (and ``debug``,
    ``info``, ``warning``, ``error``), ``cancelled``, ``prelude`` and ``step_key`` need no
    ``await`` (they only record; awaiting what they return is harmless, and is how FastMCP's
    and the SDK's tools are written)."""

    @property
    def cancelled(self) -> bool: ...

    @property
    def prelude(self) -> dict[str, Any]:
        """Answers gathered by MRTR before the task was created (``ask_first``)."""
        ...

    def report(self, message: str) -> Done:
        """Set the task's ``statusMessage`` (progress for the client). Written
        ``MCPQ_REPORT_DELAY_MS`` later, the latest of several in one write, and not at all when
        the run ends first (its end replaces the message); a cancel the worker already knows
        of raises here, like at any other call."""
        ...

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> Done:
        """Report numeric progress (FastMCP's and the MCP SDK's call): ``notifications/progress``
        on a synchronous call's stream when its request carried a ``progressToken`` (sent only
        when ``progress`` grew: the spec wants it to increase), and the task's
        ``statusMessage`` (``message``, or ``"3/10"`` without one). Written like :meth:`report`:
        a moment late, the latest of several in one write."""
        ...

    def log(self, level: LogLevel, data: Any, *, logger_name: str | None = None) -> Done:
        """Log to the client: ``notifications/message`` on a synchronous call's stream (a
        2025-era session, or a 2026-07-28 request that set a log level, at or above it), never
        for a task (the Tasks extension has no stream for it); always the worker's log
        (logger ``mcpq.tool``). ``data`` is any JSON value. Like questions, a run's messages are
        numbered in the order it makes them: a replay does not send them twice."""
        ...

    def debug(self, data: Any, *, logger_name: str | None = None) -> Done:
        """:meth:`log` at ``debug``."""
        ...

    def info(self, data: Any, *, logger_name: str | None = None) -> Done:
        """:meth:`log` at ``info``."""
        ...

    def warning(self, data: Any, *, logger_name: str | None = None) -> Done:
        """:meth:`log` at ``warning``."""
        ...

    def error(self, data: Any, *, logger_name: str | None = None) -> Done:
        """:meth:`log` at ``error``."""
        ...

    def sleep(self, seconds: float) -> Done:
        """Sleep, waking at once if the task is cancelled. ``sleep(0)`` is a yield point that
        costs no round trip: it raises for a cancel the worker knows of (its lease keeper
        learns of one within half a second)."""
        ...

    def ask(self, *requests: InputRequest) -> Answers:
        """Ask the client several things at once; returns the answers in order."""
        ...

    # A JSON schema gives the raw ``ElicitResult``; a model (``schema=Model``, or FastMCP's
    # ``response_type=Model``) a typed one (``mcpq.shared.elicitation``).
    @overload
    def elicit(self, message: str, schema: dict[str, Any]) -> Answer: ...
    @overload
    def elicit(self, message: str, schema: type[M]) -> Elicited[M]: ...
    @overload
    def elicit(self, message: str, *, response_type: type[M]) -> Elicited[M]: ...
    def elicit(self, message: str, schema: Any = None, *, response_type: Any = None) -> Any:
        """Ask the user to fill a form. With a JSON schema, returns the ``ElicitResult``; with
        a model, an :class:`~mcpq.shared.elicitation.Elicited` whose ``data`` is the validated
        model (``None`` when declined or cancelled)."""
        ...

    def elicit_url(
        self, message: str, url: str, elicitation_id: str | None = None
    ) -> Elicited[None]:
        """Send the user to ``url`` (URL-mode elicitation, 2025-11-25: credentials, OAuth,
        payments: what must not pass through the client). Returns whether they agreed to go
        (``action``); what they do there happens out of band. The client must declare
        ``elicitation.url``. ``elicitation_id`` defaults to one derived from the task and the
        question's place in the run, the same in a replay."""
        ...

    def read_resource(self, uri: str) -> Contents:
        """Read one of this server's resources (``@app.resource``): its contents, as
        ``resources/read`` answers them (each a dict: ``uri``, ``mimeType``, ``text`` or
        ``blob``). It runs the resource's function in this process, in the tool's run (no
        scopes: it is the server's own code). ``ToolError`` for a URI nothing serves."""
        ...

    def sample(self, messages: list[dict[str, Any]], max_tokens: int, **params: Any) -> Answer:
        """Ask the client's model; returns the ``CreateMessageResult``."""
        ...

    # An async ``fn`` (an async tool's) makes the step awaitable; a plain one returns its value.
    @overload
    def step(self, name: str, fn: Callable[[], Awaitable[T]]) -> Awaitable[T]: ...
    @overload
    def step(self, name: str, fn: Callable[[], T]) -> T: ...
    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` once per task; later runs (replays) get its memoized JSON result.

        A run calls ``fn`` only after proving, in the round trip that finds no memo, that it
        still holds the task: a run that was taken over stops instead. ``fn`` runs a second
        time only when its run died (or was taken over) after that proof and before its value
        was stored; give the outside system ``step_key(name)`` so that second call does
        nothing twice."""
        ...

    def step_key(self, name: str) -> str:
        """The idempotency key of step ``name`` of this task: the same in every run of the task
        (a replay, a recovered run), different for every other task or step, and derived from
        neither the taskId nor anything secret. Pass it to payment APIs, mail services or
        databases as their idempotency key (53 characters: ``mcpq-`` and 48 hex digits)."""
        ...


def step_key(ref: str, name: str) -> str:
    """``ToolContext.step_key``: a digest of the task's storage ref and the step's name (the
    ref is itself a one-way digest of the taskId), short enough for every common API's key
    (64 characters is the tightest in wide use)."""
    digest = hashlib.sha256(f"{ref}\x00{name}".encode()).hexdigest()
    return f"mcpq-{digest[:48]}"


def elicitation(message: str, schema: dict[str, Any]) -> InputRequest:
    """An ``elicitation/create`` (form mode) input request."""
    params = {"mode": "form", "message": message, "requestedSchema": schema}
    return {"method": "elicitation/create", "params": params}


def url_elicitation(message: str, url: str, elicitation_id: str) -> InputRequest:
    """An ``elicitation/create`` (URL mode, 2025-11-25) input request."""
    params = {"mode": "url", "message": message, "url": url, "elicitationId": elicitation_id}
    return {"method": "elicitation/create", "params": params}


def sampling(messages: list[dict[str, Any]], max_tokens: int, **params: Any) -> InputRequest:
    """A ``sampling/createMessage`` input request."""
    body = {"messages": messages, "maxTokens": max_tokens, **params}
    return {"method": "sampling/createMessage", "params": body}


_CAPABILITY = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


def missing_capabilities(
    requests: Iterable[InputRequest], client_caps: dict[str, Any]
) -> dict[str, Any]:
    """The client capabilities these input requests need and the client did not declare, as a
    ``requiredCapabilities`` object (empty when nothing is missing)."""
    missing: dict[str, Any] = {}
    for request in requests:
        name = _CAPABILITY.get(str(request.get("method")))
        if name and name not in client_caps:
            missing[name] = {}
        elif name == "elicitation" and _mode(request) == "url":
            # URL mode is a capability of its own: ``elicitation: {"url": {}}`` (2025-11-25); a
            # client that declared only forms cannot follow a link it is never shown.
            declared = client_caps.get("elicitation")
            if not (isinstance(declared, dict) and "url" in declared):
                missing.setdefault("elicitation", {})["url"] = {}
    return missing


def capability_names(missing: dict[str, Any]) -> list[str]:
    """``missing_capabilities``' answer as names for people: ``elicitation.url`` for a URL
    question's sub-capability, ``sampling`` for a whole one."""
    names = []
    for name, sub in missing.items():
        names += [f"{name}.{part}" for part in sub] if isinstance(sub, dict) and sub else [name]
    return names


def _mode(request: InputRequest) -> str:
    params = request.get("params")
    return str(params.get("mode", "form")) if isinstance(params, dict) else "form"
