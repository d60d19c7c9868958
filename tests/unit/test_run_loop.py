"""The io pool's run loop (``mcpq.workers.run_loop``): runs await on one loop thread, at most
``limit`` at once (one more waits on its caller's thread for a place), ``stop`` cancels what
is left, and a run that blocks the loop is left the loop while the others move to a new one."""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from mcpq.workers.loop_lanes import Turn
from mcpq.workers.run_loop import RunLoop


class Run:
    """A run of tool ``tool``: ``body(turn_number)`` awaited on each turn it gets."""

    def __init__(self, body: Callable[[int], Awaitable[None]], tool: str = "t") -> None:
        self.tool = tool
        self._body = body
        self.turns: list[Turn] = []
        self.moved_turns: list[Turn] = []

    def turn(self, turn: Turn) -> Awaitable[None]:
        self.turns.append(turn)
        return self._body(len(self.turns))

    def moved(self, turn: Turn) -> None:
        self.moved_turns.append(turn)


def until(check: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_full_loop_makes_the_next_run_wait_for_a_place() -> None:
    loop = RunLoop(limit=2)
    release = threading.Event()
    ran: list[int] = []

    def run(n: int) -> Run:
        async def body(_: int) -> None:
            ran.append(n)
            while not release.is_set():
                await asyncio.sleep(0.01)

        return Run(body)

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
    # (the third is scheduled when start returns: it runs a moment later)
    assert until(lambda: 3 in ran and not loop.running)
    assert sorted(ran) == [1, 2, 3] and loop.running == 0
    loop.stop()


def test_stop_cancels_the_runs_left_and_gives_their_places_back() -> None:
    loop = RunLoop(limit=3)
    cancelled: list[int] = []
    waiting: list[int] = []

    def run(n: int) -> Run:
        async def body(_: int) -> None:
            try:
                waiting.append(n)
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.append(n)
                raise

        return Run(body)

    for n in range(3):
        loop.start(run(n))
    assert until(lambda: len(waiting) == 3)
    loop.stop()
    assert sorted(cancelled) == [0, 1, 2] and loop.running == 0


def test_a_run_that_fails_gives_its_place_back() -> None:
    loop = RunLoop(limit=1)

    async def broken(_: int) -> None:
        raise RuntimeError("boom")

    loop.start(Run(broken))
    done = threading.Event()

    async def after(_: int) -> None:
        done.set()

    loop.start(Run(after))  # would wait forever if the failed run kept its place
    assert done.wait(5)
    loop.stop()


def blocking_tool(gate: threading.Event, child: bool = False) -> Run:
    """Awaits once, then blocks the loop (a blocking call) until ``gate`` opens; ``child``:
    the blocking call is in a task the tool started, not in the tool's own."""

    async def blocks() -> None:
        await asyncio.sleep(0.05)
        gate.wait(10)  # the point: a blocking call on the loop

    async def body(_: int) -> None:
        if child:
            await asyncio.gather(asyncio.sleep(0.01), blocks())
        else:
            await blocks()

    return Run(body, tool="blocker")


def waiting_tool(ticks: dict[int, list[float]]) -> Run:
    """Ticks every 20 ms, recording each tick under its turn's number."""

    async def body(number: int) -> None:
        while True:
            ticks.setdefault(number, []).append(time.monotonic())
            await asyncio.sleep(0.02)

    return Run(body, tool="waiter")


@pytest.mark.parametrize("child", [False, True], ids=["in the tool", "in a task it started"])
def test_a_run_that_blocks_the_loop_is_left_the_loop_and_the_others_move(
    child: bool, caplog: pytest.LogCaptureFixture
) -> None:
    loop = RunLoop(limit=20, stall_s=0.3)
    gate = threading.Event()
    ticks = [dict[int, list[float]]() for _ in range(10)]
    waiters = [waiting_tool(t) for t in ticks]
    try:
        for waiter in waiters:
            loop.start(waiter)
        assert until(lambda: all(1 in t for t in ticks))
        blocker = blocking_tool(gate, child)
        with caplog.at_level(logging.INFO, logger="mcpq.worker"):
            loop.start(blocker)
            # Every other run gets a second turn, on a new loop, while the blocker still blocks.
            assert until(lambda: all(len(t.get(2, [])) >= 5 for t in ticks), timeout=5)
        moved_at = min(t[2][0] for t in ticks)
        assert not gate.is_set()
        for waiter in waiters:
            assert len(waiter.turns) == 2 and waiter.moved_turns == waiter.turns[:1]
            assert waiter.turns[0].lane is not waiter.turns[1].lane
        assert len(blocker.turns) == 1 and not blocker.moved_turns
        assert loop.blocks("blocker") and not loop.blocks("waiter")
        assert loop.running == 11 and loop.loops == 2
        warning = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warning) == 1
        text = warning[0].getMessage()
        assert "tool blocker held the run loop" in text
        assert "test_run_loop.py" in text and "in blocks" in text  # the line that blocked
        gate.set()
        # The old turns never took another step once moved, not even when the old loop woke.
        time.sleep(0.3)
        for t in ticks:
            assert all(tick < moved_at for tick in t[1])
        # The blocker ends on its loop, whose thread then stops: one loop is left.
        assert until(lambda: loop.loops == 1 and loop.running == 10)
        assert not any(t.name == "mcpq-run-loop-1" for t in threading.enumerate())
    finally:
        gate.set()
        loop.stop()
    assert loop.running == 0


def test_places_are_kept_across_a_move_and_all_given_back() -> None:
    loop = RunLoop(limit=4, stall_s=0.2)
    gate, release = threading.Event(), threading.Event()

    async def short_wait(_: int) -> None:
        while not release.is_set():
            await asyncio.sleep(0.01)

    try:
        for _ in range(3):
            loop.start(Run(short_wait))
        loop.start(blocking_tool(gate))
        assert until(lambda: loop.loops == 2)
        assert loop.running == 4
        fifth = threading.Thread(target=loop.start, args=(Run(short_wait),))
        fifth.start()
        time.sleep(0.2)
        assert fifth.is_alive()  # the moved runs kept their places: the loop is still full
        gate.set()
        fifth.join(5)
        release.set()
        assert until(lambda: loop.running == 0 and loop.loops == 1)
        for _ in range(4):  # every place is back
            loop.start(Run(short_wait))
        assert until(lambda: loop.running == 0)
    finally:
        gate.set()
        release.set()
        loop.stop()


def test_a_busy_loop_is_no_stall() -> None:
    """Many short steps that keep the loop busy for longer than the limit move nobody: only one
    step holding it does."""
    loop = RunLoop(limit=200, stall_s=0.3)
    ended = threading.Event()
    count = [0]

    async def busy(_: int) -> None:
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            time.sleep(0.002)  # a short step: 2 ms
            await asyncio.sleep(0)
        count[0] += 1
        if count[0] == 100:
            ended.set()

    try:
        for _ in range(100):
            loop.start(Run(busy))
        assert ended.wait(120)
        assert loop.loops == 1 and not loop.blocks("t")
    finally:
        loop.stop()


def test_a_process_starved_of_the_gil_is_no_stall() -> None:
    """A step that waited for the GIL (another thread held it, as a garbage collection of many
    runs' objects does) did not block the loop itself: nobody moves."""
    loop = RunLoop(limit=10, stall_s=0.3)
    stop = threading.Event()
    steps = [0]

    async def stepping(_: int) -> None:
        while not stop.is_set():
            time.sleep(0.001)  # lets the GIL go, and must get it back to end the step
            steps[0] += 1
            await asyncio.sleep(0)

    try:
        loop.start(Run(stepping))
        assert until(lambda: steps[0] > 50)
        started = time.monotonic()
        sum(range(100_000_000))  # C code that keeps the GIL throughout: seconds of it
        held = time.monotonic() - started
        assert held > 0.6, held  # (well past the limit: else the test shows nothing)
        time.sleep(0.5)
        assert loop.loops == 1 and not loop.blocks("t")
    finally:
        stop.set()
        loop.stop()


def importing_tool(tmp_path: Path, name: str, seconds: float) -> Run:
    """Imports a module of its own (``name``, written to ``tmp_path``, on ``sys.path``) whose
    import takes ``seconds``: a first import, on the loop."""
    (tmp_path / f"{name}.py").write_text(f"import time\ntime.sleep({seconds})\n")

    async def body(_: int) -> None:
        await asyncio.sleep(0.05)
        importlib.import_module(name)  # the point: the module's first import, on the loop

    return Run(body, tool="importer")


def test_a_first_import_is_waited_out_not_taken_for_a_stall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A step importing a module holds the loop longer than the limit, within the import's grace
    (10 times the limit): nobody moves, and the tool keeps the loop for its later runs."""
    monkeypatch.syspath_prepend(str(tmp_path))
    loop = RunLoop(limit=20, stall_s=0.2)
    ticks = [dict[int, list[float]]() for _ in range(5)]
    waiters = [waiting_tool(t) for t in ticks]
    try:
        for waiter in waiters:
            loop.start(waiter)
        assert until(lambda: all(1 in t for t in ticks))
        importer = importing_tool(tmp_path, "mcpq_test_slow_import_a", 1.0)
        with caplog.at_level(logging.INFO, logger="mcpq.worker"):
            started = time.monotonic()
            loop.start(importer)
            assert until(lambda: loop.running == 5, timeout=10)  # the importer ended
            assert time.monotonic() - started > 1.0  # (it held the loop: past the limit)
        assert loop.loops == 1 and not loop.blocks("importer")
        assert all(len(w.turns) == 1 and not w.moved_turns for w in waiters)
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        mark = time.monotonic()  # the waiters go on on the same loop
        assert until(lambda: all(t[1][-1] > mark for t in ticks))
    finally:
        loop.stop()


def test_an_import_past_its_grace_is_a_stall_named_at_the_tool_s_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    loop = RunLoop(limit=20, stall_s=0.1)  # a grace of 1 s
    ticks = [dict[int, list[float]]() for _ in range(3)]
    waiters = [waiting_tool(t) for t in ticks]
    try:
        for waiter in waiters:
            loop.start(waiter)
        assert until(lambda: all(1 in t for t in ticks))
        with caplog.at_level(logging.INFO, logger="mcpq.worker"):
            loop.start(importing_tool(tmp_path, "mcpq_test_slow_import_b", 2.5))
            assert until(lambda: all(len(t.get(2, [])) >= 3 for t in ticks), timeout=5)
        assert loop.blocks("importer")
        warning = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warning) == 1 and "tool importer held the run loop" in warning[0]
        # The line that blocked (the imported module's sleep), never importlib's frozen frames.
        assert "mcpq_test_slow_import_b.py:2 in <module>" in warning[0], warning
        assert "<frozen" not in warning[0], warning
    finally:
        loop.stop()
