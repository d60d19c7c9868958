"""io-pool tool calls on reused threads (``workers.tool_threads``), and abandoning one
(``workers.execution.ToolCall``): a thread that was told to stop never runs another call."""

from __future__ import annotations

import threading
import time

import pytest

from shared.errors import TaskCancelled
from workers.execution import RunAbandoned, ToolCall
from workers.tool_threads import ToolThreads


def run_on(pool: ToolThreads, fn: object) -> tuple[int, threading.Event]:
    seen: dict[str, int] = {}
    done = threading.Event()

    def body() -> bool:
        seen["ident"] = threading.get_ident()
        fn()  # type: ignore[operator]
        done.set()
        return False

    pool.run(body)
    assert done.wait(5)
    return seen["ident"], done


def test_a_finished_call_leaves_its_thread_for_the_next() -> None:
    pool = ToolThreads()
    first, _ = run_on(pool, lambda: None)
    deadline = time.monotonic() + 5
    while pool.idle == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    second, _ = run_on(pool, lambda: None)
    assert first == second and first != threading.get_ident()


def test_concurrent_calls_get_threads_of_their_own() -> None:
    pool = ToolThreads()
    gate, idents = threading.Barrier(3), set()

    def body() -> bool:
        idents.add(threading.get_ident())
        gate.wait(5)
        return False

    for _ in range(2):
        pool.run(body)
    gate.wait(5)
    assert len(idents) == 2


def test_an_idle_thread_leaves_after_its_wait() -> None:
    pool = ToolThreads(idle_s=0.05)
    run_on(pool, lambda: None)
    deadline = time.monotonic() + 5
    while pool.idle and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool.idle == 0


def test_an_abandoned_call_stops_its_tool_and_its_thread_is_never_reused() -> None:
    started, stopped = threading.Event(), threading.Event()
    where: dict[str, threading.Thread] = {}

    def deaf_tool() -> None:  # ignores its cancel: never calls its context
        where["thread"] = threading.current_thread()
        started.set()
        try:
            while True:
                time.sleep(0.001)
        except TaskCancelled:
            stopped.set()
            raise

    call = ToolCall(deaf_tool, "deaf")

    def the_job() -> None:
        with pytest.raises(RunAbandoned):
            call.in_thread()

    job = threading.Thread(target=the_job)
    job.start()
    assert started.wait(5)
    call.abandon()
    job.join(5)
    assert not job.is_alive()  # the job let go at once
    assert stopped.wait(5)  # TaskCancelled reached the tool's thread
    # ... and that thread ended instead of waiting for another call (a reused one would idle
    # for a minute). (Not compared by ident: Linux hands a dead thread's ident to a new one.)
    where["thread"].join(5)
    assert not where["thread"].is_alive()
    after = ToolCall(lambda: threading.current_thread(), "next")
    assert after.in_thread() is not where["thread"]


def test_abandoning_a_finished_call_raises_nothing_anywhere() -> None:
    call = ToolCall(lambda: "ok", "quick")
    assert call.in_thread() == "ok"
    call.abandon()  # too late: no exception may reach the thread, which runs other calls now
    for _ in range(20):
        assert ToolCall(lambda: "fine", "next").in_thread() == "fine"
