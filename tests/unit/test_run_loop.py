"""The io pool's run loop (``mcpq.workers.run_loop``): runs await on one loop thread, at most
``limit`` at once (one more waits on its caller's thread for a place), and ``stop`` cancels what
is left."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable

from mcpq.workers.run_loop import RunLoop


def test_a_full_loop_makes_the_next_run_wait_for_a_place() -> None:
    loop = RunLoop(limit=2)
    release = threading.Event()
    ran: list[int] = []

    def run(n: int) -> Callable[[], Awaitable[None]]:
        async def body() -> None:
            ran.append(n)
            while not release.is_set():
                await asyncio.sleep(0.01)

        return body

    loop.start(run(1))
    loop.start(run(2))
    third = threading.Thread(target=loop.start, args=(run(3),))
    third.start()
    time.sleep(0.2)
    assert third.is_alive() and sorted(ran) == [1, 2]  # waiting for a place
    assert loop.running == 2
    release.set()
    third.join(5)
    assert not third.is_alive()
    deadline = time.monotonic() + 5
    while (3 not in ran or loop.running) and time.monotonic() < deadline:
        time.sleep(0.01)  # (the third is scheduled when start returns: it runs a moment later)
    assert sorted(ran) == [1, 2, 3] and loop.running == 0
    loop.stop()


def test_stop_cancels_the_runs_left_and_gives_their_places_back() -> None:
    loop = RunLoop(limit=3)
    cancelled: list[int] = []

    def run(n: int) -> Callable[[], Awaitable[None]]:
        async def body() -> None:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.append(n)
                raise

        return body

    for n in range(3):
        loop.start(run(n))
    deadline = time.monotonic() + 5
    while loop.running < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    loop.stop()
    assert sorted(cancelled) == [0, 1, 2] and loop.running == 0


def test_a_run_that_fails_gives_its_place_back() -> None:
    loop = RunLoop(limit=1)

    async def broken() -> None:
        raise RuntimeError("boom")

    loop.start(broken)
    done = threading.Event()

    async def after() -> None:
        done.set()

    loop.start(after)  # would wait forever if the failed run kept its place
    assert done.wait(5)
    loop.stop()
