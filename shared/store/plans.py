"""How the store's operations of more than one step go, written once for both stores (sans-IO).

A plan is a generator: it yields what it needs done on Redis (an *op*), is sent back the reply,
and returns its result; it does no I/O of its own. Each store runs plans with a driver that does
the ops on its client: ``sync_driver`` (redis-py: workers, the sweeper, ``mcpq``) and
``async_driver`` (redis.asyncio: the web tier). So a script's clock argument and its reload
after ``NOSCRIPT``, a write replicas must confirm, a create with its admission (``task_plans``)
and ``tasks/list``'s paging (``listing``) are each written once, and both stores take the same
steps in the same order; a driver only knows how to do one op on its client (a connection of its
pool, a Cluster's routing). An error doing an op (``StoreUnavailable``, a script's error reply)
is raised into the plan where it yielded that op: the plan handles it (a reload after
``NOSCRIPT``) or lets it propagate to the caller.

The ops, and what the plan is sent back:

- :class:`Eval`: a script's ``EVALSHA`` (on a Cluster, routed by its keys' slot): its reply;
- :class:`~shared.store.call_types.PipelineCall`: its commands in one pipeline: its parsed replies;
- :data:`TIME`: Redis's ``TIME``: its reply;
- :class:`Load`: ``SCRIPT LOAD`` of a script Redis forgot: nothing;
- :class:`EvalAndWait`: a script, then ``WAIT``, on one connection: [reply, replicas] (the
  asyncio store's replicated writes only).
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from typing import Any, NamedTuple, TypeVar

from redis.exceptions import NoScriptError

from mcpq.shared.store import scripts
from mcpq.shared.store.call_types import Arg, PipelineCall, ScriptCall
from mcpq.shared.store.clock import RedisClock

T = TypeVar("T")


class Eval(NamedTuple):
    """Run script ``script`` (``scripts.NAMES``) with these KEYS and ARGV."""

    script: str
    keys: Sequence[str]
    args: Sequence[Arg]


class EvalAndWait(NamedTuple):
    """Run a script, then ``WAIT`` up to ``timeout_ms`` for ``replicas`` replicas, on the one
    connection (``WAIT`` counts the writes of the connection it runs on)."""

    script: str
    keys: Sequence[str]
    args: Sequence[Arg]
    replicas: int
    timeout_ms: int


class Load(NamedTuple):
    """Load script ``script`` into Redis's script cache."""

    script: str


class ReadTime(NamedTuple):
    """Read Redis's ``TIME``."""


TIME = ReadTime()

Op = Eval | EvalAndWait | Load | ReadTime | PipelineCall[Any]
Plan = Generator[Op, Any, T]
"""A plan that returns a ``T``."""


class Done(NamedTuple):
    """A plan's end: what it returned."""

    result: Any


def resume(plan: Plan[Any], reply: Any = None, error: Exception | None = None) -> Op | Done:
    """The next op of ``plan`` once sent the ``reply`` to its last op, or once ``error`` is
    raised into it where it yielded that op (what it does not handle propagates from here); or,
    at its end, :class:`Done`. The first call starts it. What a driver's loop does between the
    ops it does itself, written once."""
    try:
        return plan.send(reply) if error is None else plan.throw(error)
    except StopIteration as end:
        return Done(end.value)


class ScriptPlans:
    """Running a script: ``now`` for the scripts that use the clock (``lua/_clock.lua``), the
    reload of a script Redis forgot, and the write that replicas must confirm."""

    def __init__(self, clock: RedisClock) -> None:
        self.clock = clock

    def now_ms(self) -> Plan[int]:
        """Redis's time (``mcpq.shared.store.clock``): a ``TIME`` round trip once in a while."""
        now = self.clock.now_ms()
        if now is None:
            now = yield from self._read_time()
        return now

    def _read_time(self) -> Plan[int]:
        """Anchor the clock on ``TIME`` (the clock's ``now_ms`` said this caller is to read it):
        Redis's time now."""
        readings = []
        for _ in range(self.clock.readings()):
            sent = time.monotonic()
            reply = yield TIME
            readings.append((sent, time.monotonic(), reply))
        return self.clock.anchor_best(readings)

    def run(self, call: ScriptCall[T]) -> Plan[T]:
        """The script's parsed reply."""
        # PERF: every request runs a script or two: no plan of its own for the clock or the
        # reload (each a generator more) unless it has to read TIME or load the script.
        args = call.args
        if scripts.uses_clock(call.script):
            now = self.clock.now_ms()
            if now is None:  # (then this caller, and no other, reads TIME: see RedisClock)
                now = yield from self._read_time()
            args = [*args, now]
        op = Eval(call.script, call.keys, args)
        try:
            reply = yield op
        except NoScriptError:
            reply = yield from self._reloaded(op)
        return call.parse(reply)

    def replicated(
        self, call: ScriptCall[T], replicas: int, timeout_ms: int
    ) -> Plan[tuple[T, int]]:
        """Run ``call``, then ``WAIT`` for ``replicas``: the script's reply and how many
        replicas confirmed every write of this connection so far, this one included.

        NOTE: one op, so one round trip on one connection: ``WAIT`` counts the writes of the
        connection it runs on, so it must follow the script on the same one. A ``NOSCRIPT`` (a
        replica just promoted has an empty script cache) loads the script and sends both again:
        the script did not run, and ``WAIT`` alone wrote nothing. A parse that raises
        (``Refused``) means the script wrote nothing: then the count is moot."""
        args = call.args
        if scripts.uses_clock(call.script):
            args = [*args, (yield from self.now_ms())]
        op = EvalAndWait(call.script, call.keys, args, replicas, timeout_ms)
        try:
            reply, confirmed = yield op
        except NoScriptError:
            reply, confirmed = yield from self._reloaded(op)
        return call.parse(reply), int(confirmed)

    @staticmethod
    def _reloaded(op: Eval | EvalAndWait) -> Plan[Any]:
        """``op``'s reply once its script is loaded: Redis answered ``NOSCRIPT`` (a restarted
        Redis, or a replica just promoted, has an empty script cache), so the script did not
        run. Loaded and done once more, as redis-py's ``Script.__call__`` does."""
        yield Load(op.script)
        return (yield op)


def args_at(call: ScriptCall[Any], now_ms: int) -> list[Arg]:
    """The script's ARGV, with ``now_ms`` last when it uses the clock (``lua/_clock.lua``)."""
    if not scripts.uses_clock(call.script):
        return list(call.args)
    return [*call.args, now_ms]
