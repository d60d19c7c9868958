"""The soak's traffic: client threads on both wires, push listeners, and the final reads.

Each client thread loops until the soak stops it: a synchronous call (`Plan.sync_share`) or a
task of ``soak_job`` (io pool) or ``soak_job_bulk`` (cpu pool) that sleeps, asks a question
(`Plan.ask_share`, answered after a random delay, so some runs park and resume) or is cancelled
(`Plan.cancel_share`, after a random delay), polled to its end. Every creating request carries
a tag of its own per attempt (``<base>.<attempt>``): a retried create whose first attempt did
land leaves an orphan task with another tag, never two tasks whose step records mix. Some of
the 2026-07-28 tasks are also watched by `Listener` threads on ``subscriptions/listen``, which
must show each watched task's terminal state.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from mcpq.ops.bench.bench_tools import SOAK, SOAK_BULK, soak_result
from mcpq.ops.bench.soak_ledger import Job, Ledger, SyncCall
from mcpq.ops.bench.soak_wire import Legacy, Modern, Replicas, Transient
from mcpq.ops.harness.mcp_client import text_of
from mcpq.shared.store import TERMINAL

MODERN, LEGACY = "2026-07-28", "2025-11-25"
#: A completed task whose finish is this much later than the cancel's acknowledgement did not
#: honour the cancel (the two clocks are this machine's and Redis's, on this machine).
CANCEL_SLACK_S = 0.1


@dataclass(frozen=True)
class Plan:
    """The traffic's mix and pace."""

    log_dir: str
    sync_share: float = 0.15
    ask_share: float = 0.4
    cancel_share: float = 0.1
    bulk_share: float = 0.3
    push_share: float = 0.5
    seconds: tuple[float, float] = (0.3, 1.5)
    answer_delay_s: tuple[float, float] = (0.0, 3.0)
    cancel_delay_s: tuple[float, float] = (0.1, 2.0)
    poll_s: float = 0.2
    #: How long a client follows one task before leaving it to the final reads.
    task_wait_s: float = 60.0


def word(tag: str) -> str:
    """The answer the soak gives to the question of the job tagged ``tag``."""
    return f"w-{tag}"


def expected(job: Job) -> str:
    return soak_result(job.tag, job.seconds, word(job.tag) if job.ask else None)


def _wall(iso: str) -> float | None:
    with contextlib.suppress(ValueError, TypeError):
        return datetime.fromisoformat(iso).timestamp()
    return None


class Client(threading.Thread):
    """One client thread on one wire (``era``), until ``stop`` is set."""

    def __init__(
        self,
        index: int,
        era: str,
        replicas: Replicas,
        ledger: Ledger,
        plan: Plan,
        stop: threading.Event,
        watch: deque[Job],
    ) -> None:
        super().__init__(name=f"soak-client-{index}", daemon=True)
        self.index, self.era, self.plan, self.stop = index, era, plan, stop
        self.ledger, self.watch = ledger, watch
        self.rng = random.Random(index)
        name = f"mcpq-soak-{index}"
        self.modern = Modern(replicas, ledger, name)
        self.legacy = Legacy(replicas, ledger, name)
        self._serial = itertools.count(1)

    def run(self) -> None:
        try:
            if self.era == LEGACY and not self.legacy.open():
                self.ledger.violation("unavailable", f"client {self.index}: no 2025 session")
                return
            while not self.stop.is_set():
                self.one()
        finally:
            self.modern.close()
            self.legacy.close()

    def one(self) -> None:
        plan, rng = self.plan, self.rng
        base = f"c{self.index}n{next(self._serial)}"
        seconds = round(rng.uniform(*plan.seconds), 2)
        tool = SOAK_BULK if rng.random() < plan.bulk_share else SOAK
        try:
            if rng.random() < plan.sync_share:
                self.sync_call(base, tool, seconds)
                return
            cancel = rng.uniform(*plan.cancel_delay_s) if rng.random() < plan.cancel_share else None
            job = Job(base, self.era, tool, seconds, rng.random() < plan.ask_share, cancel)
            self.task(job)
        except Exception as exc:  # any surprise is reported; the soak goes on
            self.ledger.violation("unexpected reply", f"client {self.index} {base}: {exc!r}")
            time.sleep(1.0)

    # -- arguments ----------------------------------------------------------------------------
    def _arguments(self, base: str, n: int, seconds: float, ask: bool) -> dict[str, Any]:
        tag = f"{base}.{n}"
        return {"tag": tag, "log_dir": self.plan.log_dir, "seconds": seconds, "ask": ask}

    # -- synchronous calls --------------------------------------------------------------------
    def sync_call(self, base: str, tool: str, seconds: float) -> None:
        tags: list[str] = []

        def params(n: int) -> dict[str, Any]:
            arguments = self._arguments(base, n, seconds, False)
            tags.append(arguments["tag"])
            return {"name": tool, "arguments": arguments}

        result: dict[str, Any] | None = None
        if self.era == MODERN:
            reply = self.modern.send("sync call", "tools/call", params, budget_s=120, tasks=False)
            if reply is not None:
                result = reply.result
        else:
            got = self.legacy.post("sync call", "tools/call", params, budget_s=120)
            if got is not None:
                result = _result_of(got[1], f"sync call {base}")
        if result is None:
            self.ledger.count("sync calls given up")
            return
        text = text_of(result)
        call = SyncCall(self.era, tags[-1], seconds, text, bool(result.get("isError")), len(tags))
        self.ledger.sync(call)
        if text != soak_result(tags[-1], seconds, None) or call.is_error:
            self.ledger.violation(
                "wrong sync result", f"{self.era} {tags[-1]}: {text!r} isError={call.is_error}"
            )

    # -- tasks ----------------------------------------------------------------------------------
    def task(self, job: Job) -> None:
        if not self._create(job):
            return
        deadline = time.monotonic() + self.plan.task_wait_s
        answer_due: float | None = None
        cancel_due = None if job.cancel_after is None else time.monotonic() + job.cancel_after
        while time.monotonic() < deadline:
            status, keys = self._poll(job)
            if status in TERMINAL:
                if self.era == LEGACY and status == "completed":
                    legacy_result(self.legacy, job)
                return
            now = time.monotonic()
            if status == "input_required" and keys and job.answered_at is None:
                answer_due = answer_due or now + self.rng.uniform(*self.plan.answer_delay_s)
                if now >= answer_due:
                    self._answer(job, keys)
            if cancel_due is not None and not job.cancel and now >= cancel_due:
                self._cancel(job)
            time.sleep(self.plan.poll_s * self.rng.uniform(0.5, 1.5))
        self.ledger.count("tasks left to the final reads")

    def _create(self, job: Job) -> bool:
        def params(n: int) -> dict[str, Any]:
            arguments = self._arguments(job.base, n, job.seconds, job.ask)
            job.tag = arguments["tag"]
            call: dict[str, Any] = {"name": job.tool, "arguments": arguments}
            if self.era == LEGACY:
                call["task"] = {"ttl": 3_600_000}
            return call

        task_id = ""
        if self.era == MODERN:
            reply = self.modern.send("create task", "tools/call", params, tasks=True)
            if reply is not None:
                result = reply.result
                if result.get("resultType") != "task":
                    raise AssertionError(f"create {job.base}: {result}")
                task_id = str(result["taskId"])
        else:
            got = self.legacy.post("create task", "tools/call", params)
            if got is not None:
                task_id = str(_result_of(got[1], f"create {job.base}")["task"]["taskId"])
        if not task_id:
            self.ledger.count("creates given up")
            return False
        job.task_id, job.acked_at = task_id, time.time()
        self.ledger.acked(job)
        if self.era == MODERN and self.rng.random() < self.plan.push_share:
            job.watched = True
            self.watch.append(job)
        return True

    def _poll(self, job: Job) -> tuple[str, list[str]]:
        """One ``tasks/get``: the status and the outstanding input keys (2025-11-25 shows none:
        its questions come on ``tasks/result``)."""
        if self.era == MODERN:
            reply = self.modern.send("tasks/get", "tasks/get", {"taskId": job.task_id})
            if reply is None:
                return "", []
            task = reply.result
            observe(self.ledger, job, task)
            return str(task["status"]), sorted(task.get("inputRequests") or {})
        got = self.legacy.post("tasks/get", "tasks/get", {"taskId": job.task_id})
        if got is None:
            return "", []
        task = _result_of(got[1], f"tasks/get {job.tag}")
        observe(self.ledger, job, task)
        status = str(task["status"])
        return status, ["(on tasks/result)"] if status == "input_required" else []

    def _answer(self, job: Job, keys: list[str]) -> None:
        if self.era == LEGACY:
            self._answer_legacy(job)
            return
        content = {"action": "accept", "content": {"word": word(job.tag)}}
        responses = {key: content for key in keys}
        params = {"taskId": job.task_id, "inputResponses": responses}
        reply = self.modern.send("tasks/update", "tasks/update", params)
        if reply is not None and reply.status == 200 and "result" in reply.body:
            job.answered |= set(keys)
            job.answered_at = time.time()

    def _answer_legacy(self, job: Job) -> None:
        """The question arrives on a ``tasks/result`` stream as ``elicitation/create``; the
        answer goes back as a POSTed response (202) to any replica."""
        try:
            with self.legacy.result_stream(job.task_id) as messages:
                for message in messages:
                    if message is None:
                        continue  # a keep-alive
                    if message.get("method") == "elicitation/create":
                        self._deliver(job, message)
                    return  # answered, or the task ended first (the stream's response)
        except (Transient, httpx.TransportError):
            self.ledger.count("tasks/result streams broken")

    def _deliver(self, job: Job, request: dict[str, Any]) -> None:
        asked = str(request.get("params", {}).get("message", ""))
        if job.tag not in asked:
            self.ledger.violation("wrong question", f"{job.tag} was asked {asked!r}")
        content = {"action": "accept", "content": {"word": word(job.tag)}}
        answer = {"jsonrpc": "2.0", "id": request.get("id"), "result": content}
        if self.legacy.post_raw("answer", answer) == 202:
            job.answered.add(str(request.get("id")))
            job.answered_at = time.time()

    def _cancel(self, job: Job) -> None:
        attempts = [0]
        if self.era == MODERN:

            def params(_n: int) -> dict[str, Any]:
                attempts[0] += 1
                return {"taskId": job.task_id}

            reply = self.modern.send("tasks/cancel", "tasks/cancel", params)
            job.cancel = "none" if reply is None else "acked"
        else:

            def legacy_params(_n: int) -> dict[str, Any]:
                attempts[0] += 1
                return {"taskId": job.task_id}

            got = self.legacy.post("tasks/cancel", "tasks/cancel", legacy_params)
            job.cancel = "none" if got is None else _legacy_cancel(got[1])
        job.cancel_at, job.cancel_attempts = time.time(), attempts[0]


def _result_of(message: dict[str, Any], what: str) -> dict[str, Any]:
    if not isinstance(message.get("result"), dict):
        raise AssertionError(f"{what}: {message}")
    return message["result"]  # type: ignore[no-any-return]


def legacy_result(session: Legacy, job: Job) -> None:
    """A completed 2025-11-25 task's result (``tasks/result``: ``tasks/get`` shows none)."""
    got = session.post("tasks/result", "tasks/result", {"taskId": job.task_id})
    if got is not None and isinstance(got[1].get("result"), dict):
        job.result = text_of(got[1]["result"])
        job.is_error = bool(got[1]["result"].get("isError"))


def _legacy_cancel(message: dict[str, Any]) -> str:
    """What a 2025-11-25 ``tasks/cancel`` answered: the task (cancelled) or -32602 (it had
    ended already)."""
    if isinstance(message.get("result"), dict):
        return "cancelled" if message["result"].get("status") == "cancelled" else "other"
    if message.get("error", {}).get("code") == -32602:
        return "terminal"
    return f"error {message.get('error')}"


def observe(ledger: Ledger, job: Job, task: dict[str, Any]) -> None:
    """One polled read: its status in the job's sequence (never backwards), and no question
    still or again outstanding once the client's answer to it was acknowledged."""
    status = str(task["status"])
    ledger.seen(job, status)
    asked = sorted(task.get("inputRequests") or {})
    if job.answered_at is not None and (asked or status == "input_required") and not job.reasked:
        job.reasked = True  # reported once per task
        ledger.violation(
            "asked again",
            f"{job.era} {job.tag}: {status} {asked or ''} after the answer to "
            f"{sorted(job.answered)} was acknowledged at {job.answered_at:.3f}",
        )
    if status in TERMINAL and not job.final:
        job.final = status
        job.ended_at = _wall(str(task.get("lastUpdatedAt", "")))
        job.message = str(task.get("statusMessage", ""))
        if isinstance(task.get("result"), dict):
            job.result = text_of(task["result"])
            job.is_error = bool(task["result"].get("isError"))
