"""The io pool's event loop for ``async def`` tools (``MCPQ_ASYNC_RUNS``): a run whose tool
awaits holds no thread while it waits.

Without it, an ``async def`` tool's run holds its job's pool thread for its whole life, with an
event loop of its own on it (``mcpq.workers.execution``): a thousand waiting runs are a thousand
threads. With ``MCPQ_ASYNC_RUNS`` set, an io pool process has one more thread, running one event
loop, and a claimed run of an async tool is handed to it (``mcpq.workers.detached``): its job's
thread returns at once, and the run awaits on the loop, up to ``MCPQ_ASYNC_RUNS`` of them; one
more waits on its job's thread for a place (so the pool, and then Celery's prefetch, take no more
messages meanwhile).

Why the job may end before its run (Celery acks the message, Flower shows it succeeded): a
run's durability is the task store's, never the message's. The run holds its lease (the
process's lease keeper renews every held run in one round trip), a lost process's runs are
replayed by the sweeper once their leases lapse, and a stopping process hands them back
(``LeaseKeeper.hand_back_all``) before the loop's tasks are cancelled. Everything a run writes
is fenced by its generation, so a run cancelled late writes nothing.

**A tool that blocks the loop** (a ``time.sleep``, a blocking HTTP client, a long computation)
would stall every run on it, and asyncio cannot preempt it. So every step a task takes on the
loop is timed (the loop's task factory wraps each coroutine: ``mcpq.workers.loop_lanes``), and
a watcher thread looks at the step running now. Once one run's step has held the loop for
``MCPQ_LOOP_STALL_S`` (1 s):

- the loop's thread is left to that run: it goes on there alone, as it would on a thread of its
  own, and ends there;
- every other run on that loop moves to a new loop (a new thread) and starts again from its
  start, as a replay does: its steps are memoized, its questions found by their number, its
  lease and generation unchanged. Its old turn never takes another step (the wrapper throws
  ``CancelledError`` into it instead) and its tasks are cancelled once the old loop wakes;
- the tool is named in one warning, with the line that blocked, and its later runs in this
  process each get a thread, as without the loop (:meth:`RunLoop.blocks`).

A step that is importing a module (its first import in the process: a tool's ``import`` in its
body, a library's lazy import) is not a stall until it has held the loop ``IMPORT_GRACE`` (10)
times as long: it happens once, and it would otherwise cost the tool the loop for the process's
life.

Why move the others rather than the run that blocked: the blocked one cannot be moved (its
thread is inside the blocking call), and the others, parked at an ``await``, can always start
again: replay is what every run is built for (a lost worker's runs are replayed the same way).
Waiting for the blocking call instead would stall them for as long as it lasts, which has no
bound; detecting the call before it blocks would need every library's blocking calls known.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import threading
import time

from mcpq.workers.loop_lanes import TURN, Clock, Lane, LoopRun, Turn, blocked_at, importing

log = logging.getLogger("mcpq.worker")

#: How long one step of a run may hold the loop before the loop is left to it (MCPQ_LOOP_STALL_S).
DEFAULT_STALL_S = 1.0
#: A step importing a module holds the loop up to this many times MCPQ_LOOP_STALL_S before it
#: counts as a stall (see ``RunLoop._watch``).
IMPORT_GRACE = 10


class RunLoop:
    """Event loops on threads of their own, where up to ``limit`` runs await at once: one loop,
    and one more for each loop a run stalled (left to that run until it ends)."""

    def __init__(self, limit: int, stall_s: float = DEFAULT_STALL_S) -> None:
        self.limit = limit
        self.stall_s = stall_s
        self._places = threading.BoundedSemaphore(limit)
        self._lock = threading.Lock()
        self._made = 0
        self._clock = Clock()
        self._lanes: list[Lane] = []
        self._lane = self._new_lane()
        self._blocking: set[str] = set()
        self._stopped = False
        if stall_s > 0:
            threading.Thread(target=self._watch, name="mcpq-run-loop-watch", daemon=True).start()

    def _new_lane(self) -> Lane:
        self._made += 1
        lane = Lane(self._made, self._clock)
        self._lanes.append(lane)
        return lane

    @property
    def running(self) -> int:
        """Runs on the loop now."""
        with self._lock:
            return sum(len(lane.turns) for lane in self._lanes)

    @property
    def loops(self) -> int:
        """Loops with runs on them, or taking new ones."""
        with self._lock:
            return len(self._lanes)

    def blocks(self, tool: str) -> bool:
        """``tool`` has held this loop (a blocking call): its runs in this process each get a
        thread instead."""
        return tool in self._blocking

    def start(self, run: LoopRun) -> None:
        """Run ``run`` on the loop; waits (on the caller's thread) while the loop is full.

        NOTE: the place is taken before the run is scheduled and given back when it ends,
        whatever ends it (its own end, a cancel at stop), never when it moves: a full loop
        makes the io pool's threads wait here, and so Celery takes no more messages than the
        loop can hold."""
        self._places.acquire()
        try:
            with self._lock:
                if self._stopped:
                    raise RuntimeError("the run loop is stopped")
                turn = Turn(run, self._lane)
                turn.lane.turns.add(turn)
            try:
                self._begin(turn)
            except BaseException:
                with self._lock:
                    turn.lane.turns.discard(turn)
                raise
        except BaseException:  # nothing will give the place back
            self._places.release()
            raise

    def _begin(self, turn: Turn) -> None:
        turn.lane.loop.call_soon_threadsafe(self._schedule, turn)

    def _schedule(self, turn: Turn) -> None:
        """(On the turn's loop.) Its task, in a context naming the turn: the tasks the tool
        starts are the turn's too."""
        if turn.moved:
            return
        context = contextvars.copy_context()
        context.run(TURN.set, turn)
        turn.lane.loop.create_task(self._held(turn), context=context)

    async def _held(self, turn: Turn) -> None:
        try:
            await turn.run.turn(turn)
        except asyncio.CancelledError:
            pass  # the loop stops (the run was handed back already), or the run moved
        except Exception:
            log.exception("a run on the run loop failed")
        finally:
            self._ended(turn)

    def _ended(self, turn: Turn) -> None:
        lane = turn.lane
        with self._lock:
            if turn.moved:
                return  # its run goes on on another loop, in the same place
            lane.turns.discard(turn)
            done = lane.retired and not lane.turns
            if done:
                self._lanes.remove(lane)
        self._places.release()
        if done:  # the run that stalled this loop has ended: so does its thread
            lane.cancel_all()
            lane.stop_soon()

    # -- stalls -----------------------------------------------------------------------------------
    def _watch(self) -> None:
        period = min(self.stall_s / 4, 0.1)
        clock = self._clock
        while not self._stopped:
            slept = time.monotonic()
            time.sleep(period)
            now = time.monotonic()
            late = now - slept - period
            if late > 0.005:  # (a sleep overruns by a little anyway)
                clock.starved += late
            lane = self._lane
            step = lane.step
            if step is None:
                continue
            turn, since, starved = step
            held = now - since - (clock.starved - starved)  # see Clock
            # (A step of no run's is mcpq's own, which never blocks.)
            if held < self.stall_s or turn is None or turn.moved:
                continue
            # NOTE: a module's first import (a tool's `import` inside its body, a library's
            # lazy import on its first call) happens once in a process and cannot be awaited
            # off the loop; it is waited out, up to IMPORT_GRACE times the limit, rather than
            # taken for a blocking call: moving every other run and giving the tool threads for
            # the process's life cost more than a one-off wait. (Seen: an HTTP client's first
            # request, its imports compiled on a loaded host, held the loop 1 s, and the tool's
            # 2,000 runs then went to the pool's 100 threads.)
            if held < IMPORT_GRACE * self.stall_s and importing(lane.thread.ident):
                continue
            self._abandon(lane, turn, held)

    def _abandon(self, lane: Lane, culprit: Turn, held: float) -> None:
        """``culprit``'s step has held ``lane`` for ``held`` seconds: leave the loop to it, and
        move every other run on it to a new loop (see the module's doc)."""
        where = blocked_at(lane.thread.ident)
        with self._lock:
            if lane is not self._lane or self._stopped or culprit not in lane.turns:
                return
            fresh = self._new_lane()
            self._lane = fresh
            lane.retired = True
            leaving = [turn for turn in lane.turns if turn is not culprit]
            for turn in leaving:
                turn.moved = True  # first: from now on none of their steps runs on ``lane``
            lane.turns = {culprit}
            moves = []
            for turn in leaving:
                follower = Turn(turn.run, fresh)
                fresh.turns.add(follower)
                moves.append((turn, follower))
            first = culprit.run.tool not in self._blocking
            self._blocking.add(culprit.run.tool)
        if first:
            log.warning(
                "tool %s held the run loop for %.1f s (MCPQ_LOOP_STALL_S) at %s: it goes on "
                "on that loop's thread, and its later runs here each get a thread; run a "
                "blocking call with `await asyncio.to_thread(...)`",
                culprit.run.tool,
                held,
                where,
                extra={"tool": culprit.run.tool, "moved": len(moves)},
            )
        for old, new in moves:
            try:
                old.run.moved(old)
            except Exception:
                log.exception("a run moving off a stalled loop failed to let go of its turn")
            self._begin(new)
        with contextlib.suppress(RuntimeError):
            lane.loop.call_soon_threadsafe(lane.cancel_moved)
        log.info("%d runs moved off a stalled run loop", len(moves), extra={"moved": len(moves)})

    def stop(self, wait_s: float = 5.0) -> None:
        """Cancel every run on the loops (their leases were handed back first) and stop them."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            lanes = list(self._lanes)
        for lane in lanes:
            with contextlib.suppress(RuntimeError):  # the loop is gone already
                lane.loop.call_soon_threadsafe(lane.cancel_all)
        deadline = time.monotonic() + wait_s
        while self.running and time.monotonic() < deadline:
            time.sleep(0.01)
        for lane in lanes:
            lane.stop_soon()
        for lane in lanes:
            lane.thread.join(max(deadline - time.monotonic(), 0.1))


_loop: tuple[int, RunLoop] | None = None
_made = threading.Lock()


def run_loop(limit: int, stall_s: float = DEFAULT_STALL_S) -> RunLoop:
    """This process's run loop, made at its first use (a forked process makes its own)."""
    global _loop
    with _made:
        if _loop is None or _loop[0] != os.getpid():
            _loop = (os.getpid(), RunLoop(limit, stall_s))
        return _loop[1]


def current() -> RunLoop | None:
    """This process's run loop, if it made one."""
    held = _loop
    return held[1] if held is not None and held[0] == os.getpid() else None
