"""The task store, synchronous flavour: what workers, the sweeper and ``mcpq status`` use.

Every state change is one Lua script (``lua/``); this class only runs the calls that
``shared.store.calls`` builds (keys, arguments, reply parsing) and maps Redis failures to
:class:`~shared.errors.StoreUnavailable` (``errors``). Its Redis clients and key schema stay
inside: callers get typed replies and records, never a connection.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import redis
import redis.cluster
import redis.exceptions
from redis.commands.core import Script

from shared.jobs import Message
from shared.store import calls, rotation, scripts, stats
from shared.store.calls import (
    Admission,
    Claim,
    Due,
    InputPoll,
    NewTask,
    PipelineCall,
    Renewal,
    ScriptCall,
)
from shared.store.clock import RedisClock
from shared.store.errors import store_errors
from shared.store.keys import Keys
from shared.store.payloads import PLAIN, Payloads
from shared.store.records import TaskRecord
from shared.store.states import Reply, TaskStatus
from shared.store.stats import StatsSnapshot
from shared.store.tally import StatsTally

T = TypeVar("T")


class TaskStore:
    """Short calls only: nothing here blocks waiting for a change (``shared.store.wakeups``)."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys | None = None,
        payloads: Payloads = PLAIN,
        *,
        max_runs: int = 0,
        tally: StatsTally | None = None,
    ) -> None:
        self._redis = client
        #: Where creates and finishes are counted (``shared.store.tally``); ``None``: in the
        #: scripts themselves.
        self._tally = tally
        self._keys = keys or Keys()
        #: Runs of a task that may lose their worker before ``claim`` stops running it and
        #: ``sweep`` reports it poisoned (``MCPQ_MAX_RUNS``; 0: no limit).
        self.max_runs = max_runs
        #: Seals and opens payloads (``MCPQ_DATA_KEYS``; ``open_store`` passes them).
        self._payloads = payloads
        self._scripts = {
            name: client.register_script(scripts.source(name)) for name in scripts.NAMES
        }
        self._clock = RedisClock()

    def close(self) -> None:
        """Write the counts still tallied, and close the client (a store that owns it)."""
        if self._tally is not None:
            self._tally.close()
        self._redis.close()

    # -- the two ways in: a script, or a plain pipeline ----------------------------------------
    def now_ms(self) -> int:
        """Redis's time (``shared.store.clock``): a ``TIME`` round trip once in a while."""
        now = self._clock.now_ms()
        if now is None:
            readings = []
            with store_errors():
                for _ in range(self._clock.readings()):
                    sent = time.monotonic()
                    reply = self._redis.time()
                    readings.append((sent, time.monotonic(), reply))
            now = self._clock.anchor_best(readings)
        return now

    def _args(self, call: ScriptCall[Any], now: int | None = None) -> list[Any]:
        """The script's ARGV, with ``now`` last when it uses the clock (``lua/_clock.lua``)."""
        if not scripts.uses_clock(call.script):
            return list(call.args)
        return [*call.args, self.now_ms() if now is None else now]

    def run(self, call: ScriptCall[T]) -> T:
        args = self._args(call)
        script = self._scripts[call.script]
        with store_errors():
            if isinstance(self._redis, redis.cluster.RedisCluster):
                reply = script(keys=call.keys, args=args)  # routed by its keys' slot
            else:
                reply = self._evalsha(script, call.keys, args)
        return call.parse(reply)

    def _evalsha(self, script: Script, keys: Sequence[str], args: list[Any]) -> Any:
        """``script`` on one pooled connection: ``script(keys=, args=)`` minus redis-py's
        command-generic client layers (``AsyncTaskStore._evalsha`` says what is kept and why:
        here the claim and the finish of every run; after an idle moment a script call through
        ``Script.__call__`` measured 240-344 µs on a 2-core VM, this path 145-214 µs)."""
        pool = self._redis.connection_pool
        conn = pool.get_connection()
        try:

            def send() -> Any:
                conn.send_command("EVALSHA", script.sha, len(keys), *keys, *args)  # type: ignore[no-untyped-call]
                return conn.read_response()

            def dropped(error: Exception) -> None:
                conn.disconnect()  # type: ignore[no-untyped-call]

            try:
                return conn.retry.call_with_retry(send, dropped)
            except redis.exceptions.NoScriptError:
                # An empty script cache (a restarted Redis, a promoted replica): the script
                # did not run. Load it, then run it once more.
                script.sha = conn.retry.call_with_retry(lambda: _load(conn, script.script), dropped)
                return conn.retry.call_with_retry(send, dropped)
        finally:
            pool.release(conn)

    def run_many(self, many: Sequence[ScriptCall[T]]) -> list[T]:
        """Several script calls in one round trip (a pipeline, not a transaction: each script
        is atomic on its own)."""
        if not many:
            return []
        if isinstance(self._redis, redis.cluster.RedisCluster):
            # redis-py's cluster pipeline refuses scripts: one call after another, each routed
            # to its slot's node (redirections followed). Each script is atomic on its own
            # either way; only the round trips differ.
            return [self.run(call) for call in many]
        now = self.now_ms()  # one reading for the batch: they go in one round trip
        with store_errors():
            pipe = self._redis.pipeline(transaction=False)
            for call in many:
                args = self._args(call, now)
                self._scripts[call.script](keys=call.keys, args=args, client=pipe)
            replies = pipe.execute()
        return [call.parse(reply) for call, reply in zip(many, replies, strict=True)]

    def pipeline(self, call: PipelineCall[T]) -> T:
        with store_errors():
            pipe = self._redis.pipeline(transaction=False)
            for queue in call.commands:
                queue(pipe)
            replies = pipe.execute()
        return call.parse(replies)

    # -- a worker's run --------------------------------------------------------------------------
    def claim(self, ref: str, lease_ms: int) -> Claim:
        call = calls.claim(self._keys, ref, lease_ms, self._payloads, max_lost=self.max_runs)
        return self.run(call)

    def renew(self, ref: str, gen: int, lease_ms: int) -> Renewal:
        return self.run(calls.renew(self._keys, ref, gen, lease_ms))

    def renew_many(self, runs: Sequence[tuple[str, int]], lease_ms: int) -> list[Renewal]:
        """Renew the leases of many runs (``(ref, gen)``) in one round trip."""
        return self.run_many([calls.renew(self._keys, ref, gen, lease_ms) for ref, gen in runs])

    def report(
        self, ref: str, gen: int, message: str, count: int = 1, at_ms: int | None = None
    ) -> Reply:
        """``count``: how many reports this one stands for (the latest of several); ``at_ms``:
        when the tool made it (Redis's clock; default now)."""
        call = calls.report(self._keys, ref, gen, message, self._payloads, count, at_ms)
        return self.run(call)

    def request_input(self, ref: str, gen: int, requests: dict[str, Any]) -> InputPoll:
        return self.run(calls.request_input(self._keys, ref, gen, requests, self._payloads))

    def park(self, ref: str, gen: int) -> Reply:
        return self.run(calls.park(self._keys, ref, gen))

    def finish(
        self,
        ref: str,
        gen: int,
        status: TaskStatus,
        payload: dict[str, Any],
        message: str = "",
        *,
        poisoned: bool = False,
    ) -> Reply:
        tally = None if poisoned else self._tally  # (the sweeper's poisoned finish: rare)
        call = calls.finish(
            self._keys,
            ref,
            gen,
            status,
            payload,
            message,
            self._payloads,
            poisoned=poisoned,
            count=tally is None,
        )
        reply, tool = self.run(call)
        if tally is not None and reply is Reply.OK:  # fenced out: nothing to count
            tally.add(self._keys.at(ref).stats, f"{TaskStatus(status).value}:{tool}")
        return reply

    def release(self, ref: str, gen: int) -> Reply:
        return self.run(calls.release(self._keys, ref, gen))

    def save_step(self, ref: str, gen: int, name: str, value: Any) -> tuple[Reply, Any]:
        return self.run(calls.save_step(self._keys, ref, gen, name, value, self._payloads))

    def step_value(self, ref: str, name: str) -> tuple[bool, Any]:
        """A memoized step's value, if stored (a plain read: the step's writer is fenced)."""
        # NOTE: a value read here may be stale only if another run stored it meanwhile, and
        # save_step keeps the first value stored: both runs end up with the same one.
        key = self._keys.steps(ref)
        with store_errors():
            raw = self._redis.hget(key, name)
        return (False, None) if raw is None else (True, self._payloads.load(str(raw), key, name))

    def status(self, ref: str) -> TaskStatus | None:
        """The task's status; ``None`` once it is gone (expired)."""
        with store_errors():
            value = self._redis.hget(self._keys.task(ref), "status")
        return None if value is None else TaskStatus(str(value))

    def record(self, ref: str) -> TaskRecord | None:
        """The task as stored; ``None`` once it is gone (benchmarks and operators read it)."""
        with store_errors():
            stored = self._redis.hgetall(self._keys.task(ref))
        if not stored:
            return None
        return TaskRecord.from_hash(ref, stored, self._payloads)  # type: ignore[arg-type]

    # -- the web tier's create, for tests and tools (the web runs it on the asyncio store) -------
    def create(
        self,
        task: NewTask,
        unclaimed_ms: int,
        admit: Admission | None = None,
        message: Message | None = None,
        start_within_ms: int = 0,
    ) -> int | None:
        """See ``AsyncTaskStore.create``."""
        if admit is not None and self._keys.shards > 1:
            self._admit(task.ref, admit)
            admit = None
        tally = self._tally
        call = calls.create(
            self._keys,
            task,
            unclaimed_ms,
            admit,
            message,
            start_within_ms,
            self._payloads,
            count=tally is None,
        )
        created = self.run(call)
        if tally is not None and created is not None:
            tally.add(self._keys.at(task.ref).stats, f"created:{task.tool}")
        return created

    def _admit(self, ref: str, admit: Admission) -> None:
        full = self.run(calls.admit(self._keys, ref, admit))
        if full is not None:
            found = self.pipeline(calls.statuses(self._keys, list(full.members)))
            ended = calls.ended_members(full, found)
            self.run(calls.admit(self._keys, ref, admit, ended, may_ask=False))

    # -- recovery: the sweeper ------------------------------------------------------------------
    def sweep(self, unclaimed_ms: int, batch: int = 100) -> list[Due]:
        """Runs to enqueue again, and tasks to fail (``poisoned``: see ``max_runs``), from
        every shard in one round trip. ``batch`` bounds each index's due entries per call: a
        sharded store gives each shard its share (at least one), so a sweep (and the lock it
        holds) stays as short as with one shard."""
        shards = self._keys.all_shards
        if len(shards) == 1:
            return self.run(calls.sweep(shards[0], unclaimed_ms, batch, self.max_runs))
        each = max(1, -(-batch // len(shards)))
        found = self.run_many([calls.sweep(s, unclaimed_ms, each, self.max_runs) for s in shards])
        return [due for part in found for due in part]

    def mark_enqueued(self, ref: str, start_within_ms: int) -> bool:
        return self.run(calls.mark_enqueued(self._keys, ref, start_within_ms))

    @contextmanager
    def lock(self, name: str, ttl_ms: int) -> Iterator[bool]:
        """Try to hold the deployment-wide lock ``name`` for the block (kombu's ``Mutex`` is the
        model): yields whether this caller got it. Taking it is one ``SET NX PX``; the TTL
        bounds how long a holder that died keeps everyone else out. Released on exit, by
        compare-and-delete, only if still held by this caller."""
        token = uuid.uuid4().hex
        with store_errors():
            held = bool(self._redis.set(self._keys.lock(name), token, nx=True, px=ttl_ms))
        try:
            yield held
        finally:
            if held:
                self.run(calls.unlock(self._keys, name, token))

    def beat_worker(self, node: str) -> None:
        """Record that worker node ``node`` is alive (``/readyz`` and ``mcpq status`` read it)."""
        self.pipeline(stats.beat_worker(self._keys, node))

    # -- operators ------------------------------------------------------------------------------
    def stats(self, queues: list[str]) -> StatsSnapshot:
        return self.pipeline(stats.snapshot(self._keys, queues))

    def rotate_data(self, batch: int = 200) -> rotation.Rotation:
        """Re-encrypt every payload not under the current data key (``mcpq keys rotate-data``;
        see ``shared.store.rotation``): ``batch`` keys per SCAN step and round trip."""
        report = rotation.Rotation()
        with store_errors():  # the SCAN steps and the reads (run_many maps its own)
            for found in rotation.scan(self._redis, self._keys, batch):
                held = [key for key in found if rotation.sealed_fields(self._keys, key) is not None]
                pipe = self._redis.pipeline(transaction=False)
                for key in held:
                    pipe.hgetall(key)
                stored = dict(zip(held, pipe.execute(), strict=True))
                writes = rotation.plan(self._payloads, self._keys, stored, report)
                for call, written in zip(writes, self.run_many(writes), strict=True):
                    report.resealed += written
                    report.changed += len(call.args) // 3 - written
        return report


def _load(conn: redis.Connection, source: Any) -> str:
    conn.send_command("SCRIPT", "LOAD", source)  # type: ignore[no-untyped-call]
    return str(conn.read_response())
