"""``RunContext``: the :class:`mcpq.shared.tools.ToolContext` a tool gets inside a worker.

Replay contract: a run may start again from the top (a parked task resumed, a crashed worker's
task recovered). Input keys are derived from the order of ``ask`` calls, so a replayed
``elicit``/``sample`` whose key was answered returns the answer at once, without asking again;
``step`` results are memoized in Redis. Everything else in the tool body runs again.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar, overload

from mcpq.shared import tracing
from mcpq.shared.elicitation import Elicited, form, one_model, url_result
from mcpq.shared.errors import ToolError
from mcpq.shared.flag import Flag
from mcpq.shared.resources import ResourceNotFound, TemplateArgumentsInvalid
from mcpq.shared.resources import read as read_resource
from mcpq.shared.store import InputPoll, Reply, TaskStatus, TaskStore
from mcpq.shared.store.wakeups import Watch
from mcpq.shared.tool_context import (
    DONE,
    Answer,
    Answers,
    Contents,
    Done,
    InputRequest,
    capability_names,
    elicitation,
    missing_capabilities,
    sampling,
    url_elicitation,
)
from mcpq.workers.interrupts import RunParked, raise_for
from mcpq.workers.reports import PendingReport, ReportFlusher
from mcpq.workers.run_reports import RunReports
from mcpq.workers.run_steps import RunSteps

T = TypeVar("T")
M = TypeVar("M")
#: A wait written once for both kinds of tool: yields how long to wait for a change, returns
#: the value (``RunContext.drive``; ``mcpq.workers.async_context``).
WaitPlan = Generator[float, None, T]
#: An input request, and what the client's answer to it becomes for the tool.
Question = tuple[InputRequest, Callable[[dict[str, Any]], Any]]
_STOPPED = {TaskStatus.CANCELLED, None}  # None: the task is gone (expired)
_KIND = {"elicitation/create": "elicit", "sampling/createMessage": "sample", "roots/list": "roots"}


class RunContext(RunReports, RunSteps):
    """The context of one run (``ToolContext``): its waits and questions; its reports and log
    messages come from :class:`~mcpq.workers.run_reports.RunReports`, its steps from
    :class:`~mcpq.workers.run_steps.RunSteps`."""

    def __init__(
        self,
        store: TaskStore,
        ref: str,
        gen: int,
        prelude: dict[str, Any],
        hold_s: float,
        on_state: Callable[[str], None] = lambda state: None,
        client_caps: dict[str, Any] | None = None,
        *,
        watch: Watch,
        max_step_bytes: int = 1024 * 1024,
        max_message_chars: int = 1000,
        reports: ReportFlusher | None = None,
        lease_ms: int = 30_000,
        keep_logs: bool = False,
        tool: str = "",
        resources: Callable[[str], Any] | None = None,
        trace: Any = None,
    ) -> None:
        self._store = store
        #: The run span's context (``tracing.current().capture()``): the parent of its steps'
        #: spans and where its questions' events go; None when tracing is off.
        self._trace = trace
        #: Reports are written late, by the process's flusher (None or no delay: at once).
        self._reports = reports if reports is not None and reports.delay_s > 0 else None
        self._pending = PendingReport(self._write_report, self.interrupt)
        #: Log messages go to the store only for a synchronous call (its stream sends them);
        #: numbered in the order this run makes them (a replay makes the same ones again).
        self._keep_logs, self._tool, self._logged = keep_logs, tool, 0
        #: Finds a resource of the served modules by URI (``Registry.find_resource``).
        self._resources = resources
        #: How the run learns that an answer or a cancel came while it waits
        #: (``mcpq.shared.store.wakeups``: the runs of a process share one connection).
        self._watch = watch
        self.ref, self.gen = ref, gen
        self._prelude = prelude
        self._hold_s = hold_s
        self._asked = 0
        self._on_state = on_state
        self._caps = client_caps
        self._max_step_bytes, self._max_message_chars = max_step_bytes, max_message_chars
        self._lease_ms = lease_ms  # begin_step keeps the lease at least half of it ahead
        self.cancel_seen = Flag()  # set by the heartbeat too
        self._stopped_by = Reply.TERMINAL  # why cancel_seen was set (see interrupt)
        # When the tool's own code last got control back from a context call; None while it is
        # inside one. One attribute, written only by the tool's thread and read whole by the
        # heartbeat's (see busy_for), so the two never see a half-made update.
        self._left_at: float | None = time.monotonic()
        self._depth = 0
        # An async tool's context calls run on a thread of their own while the tool's thread
        # may call report or cancelled (mcpq.workers.async_context): the count stays exact.
        self._depth_lock = threading.Lock()

    @property
    def watch(self) -> Watch:
        """How the run learns that an answer or a cancel came (``AsyncRunContext`` hooks it)."""
        return self._watch

    @property
    def trace(self) -> Any:
        """The run span's context (None when tracing is off)."""
        return self._trace

    def inside(self) -> AbstractContextManager[None]:
        """A context call is under way (see :meth:`busy_for`)."""
        return self._inside()

    # -- progress, as the heartbeat sees it ------------------------------------------------------
    def busy_for(self) -> float:
        """Seconds the tool has been running its own code since its last context call returned
        (0 while it is inside one: waiting in ``sleep`` or ``ask`` is the context's business)."""
        left_at = self._left_at
        return 0.0 if left_at is None else time.monotonic() - left_at

    @contextmanager
    def _inside(self) -> Iterator[None]:
        with self._depth_lock:
            self._depth += 1
            self._left_at = None
        try:
            yield
        finally:
            with self._depth_lock:
                self._depth -= 1
                if self._depth == 0:
                    self._left_at = time.monotonic()

    # -- ToolContext ----------------------------------------------------------------------------
    @property
    def cancelled(self) -> bool:
        with self._inside():
            if not self.cancel_seen.is_set():
                # The generation too: a run taken over (its lease lapsed, the task re-run
                # elsewhere) must stop as surely as a cancelled one, and not go on with the
                # tool's own effects believing it still runs the task.
                status, gen = self._store.run_state(self.ref)
                if status in _STOPPED:
                    self.cancel_seen.set()
                elif gen != self.gen:
                    self.interrupt(Reply.SUPERSEDED)
            return self.cancel_seen.is_set()

    @property
    def prelude(self) -> dict[str, Any]:
        return self._prelude

    def sleep(self, seconds: float) -> Done:
        with self._inside():
            if seconds <= 0:
                self.yield_point()
                return DONE
            self.drive(self.sleep_plan(seconds))
        return DONE

    def yield_point(self) -> None:
        """``sleep(0)``: a yield point, without a round trip: a cancel this worker knows of
        stops the tool here. The lease keeper learns of one within its renewal interval (at
        most 0.5 s) and interrupts the run (``interrupt``), so a tool that only ever calls
        sleep(0) still stops within the second the issue allows."""
        if self.cancel_seen.is_set():
            raise_for(self._stopped_by)

    def ask(self, *requests: InputRequest) -> Answers:
        with self._inside():
            return self.drive(self.ask_plan(requests))

    # -- waits as plans --------------------------------------------------------------------------
    # NOTE: a wait is written once, as a generator that does the round trips and yields how long
    # to wait for the task to change (an answer, a cancel) before it looks again. A sync tool's
    # thread drives it with a blocking wait (:meth:`drive`); an async tool's event loop drives
    # the same plan with an awaited one, its round trips on a shared pool
    # (``mcpq.workers.async_context``): no thread is held while a run waits.
    def drive(self, plan: WaitPlan[T]) -> T:
        """Run ``plan`` on this thread, blocking in each wait it yields."""
        try:
            seconds = next(plan)
            while True:
                self._wait(seconds)
                seconds = plan.send(None)
        except StopIteration as done:
            value: T = done.value
            return value

    def sleep_plan(self, seconds: float) -> WaitPlan[None]:
        deadline = time.monotonic() + seconds
        self._ready()  # a wait: subscribed before the state is read
        self._check()
        while (left := deadline - time.monotonic()) > 0:
            yield min(left, self._hold_s)
            self._check()

    def ask_plan(self, requests: tuple[InputRequest, ...]) -> WaitPlan[Answers]:
        self._require_capabilities(requests)
        keys = []
        for request in requests:
            self._asked += 1
            keys.append(f"{_KIND.get(str(request.get('method')), 'input')}-{self._asked}")
        outstanding = dict(zip(keys, requests, strict=True))
        self._ready()  # subscribed before the state is read: no answer can slip in between
        poll = self._poll(outstanding)
        if poll.missing:
            self._on_state(TaskStatus.INPUT_REQUIRED)  # a task event: Flower shows the MCP state
            # The keys only (elicit-1, sample-2): never a question's text or an answer.
            known = poll.answers or {}
            asked = {"mcpq.input.keys": ",".join(k for k in keys if k not in known)}
            tracing.current().event(self._trace, "input requested", asked)
        deadline = time.monotonic() + self._hold_s
        while poll.missing:
            left = deadline - time.monotonic()
            if left <= 0:
                self._park()
            else:
                yield left
            poll = self._poll(outstanding)
        answers = poll.answers or {}
        got = {"mcpq.input.keys": ",".join(keys)}
        tracing.current().event(self._trace, "input answered", got)
        return Answers(answers[key] for key in keys)

    # -- questions: the request, and what its answer becomes -------------------------------------
    def elicit_question(self, message: str, schema: Any, response_type: Any) -> Question:
        if isinstance(schema, dict) and response_type is None:
            return elicitation(message, schema), Answer
        asked = form(one_model(schema, response_type))
        return elicitation(message, asked.schema), asked.result

    def url_question(self, message: str, url: str, elicitation_id: str | None) -> Question:
        if elicitation_id is None:
            # Derived from the task and the question's place in the run: the same in a replay,
            # so the client sees one elicitation however often the run is re-made.
            seed = f"{self.ref}\x00url-{self._asked + 1}".encode()
            elicitation_id = hashlib.sha256(seed).hexdigest()[:32]
        return url_elicitation(message, url, elicitation_id), url_result

    @overload
    def elicit(self, message: str, schema: dict[str, Any]) -> Answer: ...
    @overload
    def elicit(self, message: str, schema: type[M]) -> Elicited[M]: ...
    @overload
    def elicit(self, message: str, *, response_type: type[M]) -> Elicited[M]: ...
    def elicit(self, message: str, schema: Any = None, *, response_type: Any = None) -> Any:
        return self._answer(self.elicit_question(message, schema, response_type))

    def elicit_url(
        self, message: str, url: str, elicitation_id: str | None = None
    ) -> Elicited[None]:
        answer: Elicited[None] = self._answer(self.url_question(message, url, elicitation_id))
        return answer

    def sample(self, messages: list[dict[str, Any]], max_tokens: int, **params: Any) -> Answer:
        return Answer(self.ask(sampling(messages, max_tokens, **params))[0])

    def read_resource(self, uri: str) -> Contents:
        with self._inside():
            self.yield_point()  # a call like any other: a cancel the worker knows of stops here
        found = self._resources(uri) if self._resources is not None else None
        try:
            return Contents(read_resource(found, uri))  # the resource's code: the tool's own time
        except ResourceNotFound:
            raise ToolError(f"No resource at {uri[:200]}") from None
        except TemplateArgumentsInvalid as exc:
            raise ToolError(f"Invalid resource URI {uri[:200]}: {exc}") from None

    def _answer(self, question: Question) -> Any:
        request, result = question
        return result(self.ask(request)[0])

    # -- internals ------------------------------------------------------------------------------
    def _ready(self) -> None:
        self._watch.ready()

    def _wait(self, seconds: float) -> None:
        """Until an answer or a cancel comes, or ``seconds`` pass; callers read the state
        again either way."""
        self._watch.wait(seconds)

    def interrupt(self, reply: Reply = Reply.TERMINAL) -> None:
        """The lease keeper saw the task end (``TERMINAL``: a cancel) or this run lose it
        (``SUPERSEDED``/``GONE``: taken over after its lease lapsed): wake the run wherever it
        waits; the wait then raises what ``raise_for`` would for that reply, so a run taken
        over ends ``superseded``, never ``cancelled`` (the task was not)."""
        self._stopped_by = reply
        self.cancel_seen.set()
        self._watch.notify()

    def _require_capabilities(self, requests: tuple[InputRequest, ...]) -> None:
        """Never ask what the creating client cannot answer (it declared its capabilities on
        the tools/call that created the task): the tool ends with a tool error instead of
        waiting forever in input_required."""
        if self._caps is None:
            return
        missing = missing_capabilities(requests, self._caps)
        if missing:
            names = ", ".join(f"'{name}'" for name in capability_names(missing))
            raise ToolError(f"The client did not declare the {names} capability this tool needs")

    def _check(self) -> None:
        if self.cancelled:
            raise_for(self._stopped_by)

    def _poll(self, requests: dict[str, InputRequest]) -> InputPoll:
        self._flush_report()
        poll = self._store.request_input(self.ref, self.gen, requests)
        if poll.reply is not Reply.OK:
            raise_for(poll.reply)
        return poll

    def _park(self) -> None:
        self._flush_report()
        reply = self._store.park(self.ref, self.gen)
        if reply is Reply.PARKED:
            raise RunParked()
        if reply is not Reply.ANSWERED:
            raise_for(reply)
