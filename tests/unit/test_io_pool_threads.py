"""The io pool (``mcpq.workers.io_pool``): jobs and their tools on the pool's own threads, and a job
let go of (``Slot.let_go``) when its tool ignores its cancel; ``ToolCall`` on the job's thread
(``mcpq.workers.execution``): abandoning it raises ``TaskCancelled`` into that thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from billiard.einfo import ExceptionWithTraceback
from celery.exceptions import Ignore

from mcpq.shared.errors import TaskCancelled
from mcpq.workers.execution import RunAbandoned, ToolCall
from mcpq.workers.io_pool import IoPool, Slot, current_slot


class Answers:
    """Celery's side of applied jobs: what each job's callback was given."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.got: list[Any] = []
        self.arrived = threading.Condition(self.lock)

    def callback(self, ret: Any) -> None:
        with self.arrived:
            self.got.append(ret)
            self.arrived.notify_all()

    def wait_for(self, count: int, timeout: float = 5.0) -> list[Any]:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.got) >= count, timeout), self.got
            return list(self.got)


def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


class App:
    """The pool's Celery app, as far as the pool uses it: it hands back the process's runs."""

    def __init__(self) -> None:
        self.handed_back = 0

    def hand_back_runs(self) -> None:
        self.handed_back += 1


@pytest.fixture
def pool() -> Iterator[IoPool]:
    app = App()
    io = IoPool(limit=1, app=app)
    io.start()
    yield io
    io.stop()
    assert app.handed_back == 1


def test_a_job_runs_on_a_pool_thread_with_its_slot_and_celery_hears_its_return(
    pool: IoPool,
) -> None:
    answers, seen = Answers(), {}

    def job(x: int) -> int:
        seen["thread"], seen["slot"] = threading.current_thread(), current_slot()
        return x * 2

    pool.apply_async(job, args=(21,), callback=answers.callback)
    assert answers.wait_for(1) == [42]
    assert seen["thread"] is not threading.current_thread()
    assert isinstance(seen["slot"], Slot)
    assert current_slot() is None  # outside a pool job


def test_a_job_let_go_of_frees_its_slot_and_its_late_return_is_dropped(pool: IoPool) -> None:
    answers, release, started = Answers(), threading.Event(), threading.Event()
    slots: list[Slot] = []

    def deaf() -> str:
        slots.append(current_slot())  # type: ignore[arg-type]
        started.set()
        release.wait(10)
        return "late"

    pool.apply_async(deaf, callback=answers.callback)
    assert started.wait(5)
    pool.apply_async(lambda: "next", callback=answers.callback)
    time.sleep(0.1)
    assert answers.got == []  # one slot, and it is taken

    assert slots[0].let_go() is True
    got = answers.wait_for(2)
    assert "next" in got  # served by the thread that took the slot's place
    (failed, info, _runtime) = next(g for g in got if g != "next")
    # What Celery's tracer returns for a job that raised Ignore (Request.on_success unwraps
    # it, then acks the message and stores nothing).
    exc = info.exception
    assert failed == 1 and isinstance(exc, ExceptionWithTraceback) and isinstance(exc.exc, Ignore)
    assert pool.threads == 2

    release.set()
    until(lambda: pool.threads == 1)  # the let-go thread left instead of serving again
    time.sleep(0.05)
    assert len(answers.got) == 2  # its "late" never reached Celery
    assert slots[0].let_go() is False


def test_a_job_that_ended_is_not_let_go_of(pool: IoPool) -> None:
    answers, slots = Answers(), []
    pool.apply_async(lambda: slots.append(current_slot()) or "done", callback=answers.callback)
    assert answers.wait_for(1) == ["done"]
    assert slots[0].let_go() is False
    assert pool.threads == 1 and answers.got == ["done"]


def test_threads_start_as_jobs_need_them_up_to_the_limit_then_jobs_wait_in_order() -> None:
    app = App()
    io = IoPool(limit=3, app=app)
    io.start()
    assert io.threads == 0
    answers, gate = Answers(), threading.Event()
    for i in range(3):
        io.apply_async(lambda i=i: gate.wait(5) and i, callback=answers.callback)
    for i in range(3, 5):
        io.apply_async(lambda i=i: i, callback=answers.callback)
    until(lambda: io.threads == 3)
    time.sleep(0.05)
    assert io.threads == 3 and answers.got == []  # the limit: two jobs wait for a slot
    gate.set()
    assert sorted(answers.wait_for(5)) == [0, 1, 2, 3, 4]
    assert io.threads == 3

    io.stop()
    assert app.handed_back == 1
    until(lambda: io.threads == 0)
    io.terminate()  # a second stop (a cold shutdown after a warm one) does nothing more
    assert app.handed_back == 1


def run_in_thread(call: ToolCall) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def body() -> None:
        try:
            outcome["value"] = call.here()
        except BaseException as exc:
            outcome["raised"] = exc

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, outcome


def test_abandoning_a_busy_tool_raises_into_its_thread_and_ends_the_run() -> None:
    spinning = threading.Event()

    def busy() -> None:
        spinning.set()
        while True:  # deaf to its cancel, but running Python: the exception lands
            time.sleep(0.001)

    call = ToolCall(busy)
    thread, outcome = run_in_thread(call)
    assert spinning.wait(5)
    assert call.abandon() is True
    thread.join(5)
    assert not thread.is_alive()
    assert isinstance(outcome["raised"], RunAbandoned | TaskCancelled)
    assert call.abandon() is False


def test_a_finished_call_is_not_abandoned_and_its_thread_gets_nothing_later() -> None:
    call = ToolCall(lambda: "ok")
    assert call.here() == "ok"
    assert call.abandon() is False
    time.sleep(0.01)  # nothing was raised into this thread: it goes on
    assert ToolCall(lambda: "next").here() == "next"


def test_a_call_abandoned_before_it_starts_never_runs() -> None:
    ran: list[bool] = []
    call = ToolCall(lambda: ran.append(True))
    assert call.abandon() is True
    with pytest.raises(RunAbandoned):
        call.here()
    assert ran == []


def test_an_async_tool_runs_on_the_calling_thread_and_interrupt_cancels_it() -> None:
    import asyncio

    where: dict[str, Any] = {}
    awaiting = threading.Event()

    async def waits() -> str:
        where["thread"] = threading.current_thread()
        awaiting.set()
        await asyncio.sleep(30)
        return "slept"

    call = ToolCall(waits)
    thread, outcome = run_in_thread(call)
    assert awaiting.wait(5)
    assert where["thread"] is thread
    call.interrupt()
    thread.join(5)
    assert isinstance(outcome["raised"], TaskCancelled)


def test_a_pool_thread_that_fails_gives_its_slot_back(pool: IoPool) -> None:
    answers = Answers()
    fail_once = [True]
    real_next = pool._next

    def next_job(me: Any) -> Any:
        if fail_once:
            fail_once.clear()
            raise RuntimeError("the pool's own fault")
        return real_next(me)

    pool._next = next_job  # type: ignore[method-assign]
    pool.apply_async(lambda: "first", callback=answers.callback)
    assert answers.wait_for(1) == ["first"]
    until(lambda: pool.threads == 0)  # its thread ended after the job, on the fault
    pool.apply_async(lambda: "second", callback=answers.callback)  # the only slot is free again
    assert answers.wait_for(2) == ["first", "second"]
