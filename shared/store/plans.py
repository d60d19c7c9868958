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
from typing import Any, Generic, NamedTuple, TypeVar

from redis.exceptions import NoScriptError

from shared.store import scripts
from shared.store.call_types import Arg, PipelineCall, ScriptCall
from shared.store.clock import RedisClock

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


class Step(Generic[T]):
    """A plan being driven: the op it waits on (``op``), until it is ``done`` with its
    ``result``. What a driver shares with every other: the generator's protocol."""

    __slots__ = ("_plan", "_result", "done", "op")

    _result: T
    op: Op

    def __init__(self, plan: Plan[T]) -> None:
        self._plan, self.done = plan, False
        self._advance(plan.send, None)

    def reply(self, value: Any) -> None:
        """Send the op's reply to the plan: it yields its next op, or ends."""
        self._advance(self._plan.send, value)

    def fail(self, error: Exception) -> None:
        """Raise ``error`` into the plan where it yielded the op; what the plan does not handle
        propagates from here."""
        self._advance(self._plan.throw, error)

    def _advance(self, step: Any, value: Any) -> None:
        try:
            self.op = step(value)
        except StopIteration as end:
            self.done, self._result = True, end.value

    @property
    def result(self) -> T:
        return self._result


class ScriptPlans:
    """Running a script: ``now`` for the scripts that use the clock (``lua/_clock.lua``), the
    reload of a script Redis forgot, and the write that replicas must confirm."""

    def __init__(self, clock: RedisClock) -> None:
        self.clock = clock

    def now_ms(self) -> Plan[int]:
        """Redis's time (``shared.store.clock``): a ``TIME`` round trip once in a while."""
        now = self.clock.now_ms()
        if now is None:
            readings = []
            for _ in range(self.clock.readings()):
                sent = time.monotonic()
                reply = yield TIME
                readings.append((sent, time.monotonic(), reply))
            now = self.clock.anchor_best(readings)
        return now

    def run(self, call: ScriptCall[T]) -> Plan[T]:
        """The script's parsed reply."""
        args = yield from self._args(call)
        reply = yield from self._reloading(Eval(call.script, call.keys, args))
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
        args = yield from self._args(call)
        op = EvalAndWait(call.script, call.keys, args, replicas, timeout_ms)
        reply, confirmed = yield from self._reloading(op)
        return call.parse(reply), int(confirmed)

    def _args(self, call: ScriptCall[Any]) -> Plan[list[Arg]]:
        """The script's ARGV (:func:`args_at`), Redis's time read if it uses the clock."""
        if not scripts.uses_clock(call.script):
            return list(call.args)
        return args_at(call, (yield from self.now_ms()))

    @staticmethod
    def _reloading(op: Eval | EvalAndWait) -> Plan[Any]:
        """``op``'s reply; done once more after loading its script when Redis answers
        ``NOSCRIPT``: a restarted Redis, or a replica just promoted, has an empty script cache,
        and the script did not run. (What redis-py's ``Script.__call__`` does.)"""
        try:
            return (yield op)
        except NoScriptError:
            yield Load(op.script)
            return (yield op)


def args_at(call: ScriptCall[Any], now_ms: int) -> list[Arg]:
    """The script's ARGV, with ``now_ms`` last when it uses the clock (``lua/_clock.lua``)."""
    if not scripts.uses_clock(call.script):
        return list(call.args)
    return [*call.args, now_ms]
