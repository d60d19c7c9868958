"""The task store, synchronous flavour: what workers, the sweeper and ``mcpq status`` use.

Every state change is one Lua script (``lua/``); this class only says which call
(``run_calls``, ``create_calls``...: keys, arguments, reply parsing) or plan (``task_plans``: the
steps of a create, shared with the asyncio store) each method is, and runs it on its driver
(``sync_driver``), which maps Redis failures to :class:`~mcpq.shared.errors.StoreUnavailable`
(``errors``). Its Redis clients and key schema stay inside: callers get typed replies and
records, never a connection.
"""

from __future__ import annotations

import contextlib
import functools
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Concatenate, ParamSpec, TypeVar

import redis

from mcpq.shared.errors import StoreUnavailable
from mcpq.shared.store import rotation, run_calls, stats
from mcpq.shared.store.call_types import PipelineCall, ScriptCall
from mcpq.shared.store.keyspace import Keys, shard_index
from mcpq.shared.store.payloads import PLAIN, Payloads
from mcpq.shared.store.plans import Eval, Plan, args_at
from mcpq.shared.store.records import TaskRecord
from mcpq.shared.store.redis_errors import NotReplicated, store_errors
from mcpq.shared.store.run_calls import Claim, Due, InputPoll, Renewal, StepStart
from mcpq.shared.store.states import Reply, TaskStatus
from mcpq.shared.store.stats import StatsSnapshot
from mcpq.shared.store.sync_driver import SyncDriver
from mcpq.shared.store.tally import StatsTally
from mcpq.shared.store.task_plans import TaskPlans

P = ParamSpec("P")
T = TypeVar("T")


def blocking(
    plan: Callable[Concatenate[TaskPlans, P], Plan[T]],
) -> Callable[Concatenate[TaskStore, P], T]:
    """A method of :class:`TaskStore` that runs ``plan`` on its driver: same parameters, same
    documentation, its result returned."""

    @functools.wraps(plan)
    def method(store: TaskStore, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return store._io.drive(plan(store.plans, *args, **kwargs))

    return method


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
        min_replicas: int = 0,
        replica_wait_ms: int = 1000,
    ) -> None:
        self._redis = client
        self._io = SyncDriver(client)
        #: Where creates and finishes are counted (``mcpq.shared.store.tally``); ``None``: in the
        #: scripts themselves.
        self._tally = tally
        self._keys = keys or Keys()
        #: Runs of a task that may lose their worker before ``claim`` stops running it and
        #: ``sweep`` reports it poisoned (``MCPQ_MAX_RUNS``; 0: no limit).
        self.max_runs = max_runs
        #: Seals and opens payloads (``MCPQ_DATA_KEYS``; ``open_store`` passes them).
        self._payloads = payloads
        #: The steps this store shares with the asyncio one (and its clock: ``now_ms``).
        #: ``min_replicas``: a claim and a step's memo wait for them (``TaskPlans.durable``).
        self.plans = TaskPlans(
            self._keys,
            payloads,
            tally=tally,
            min_replicas=min_replicas,
            replica_wait_ms=replica_wait_ms,
        )
        #: When (monotonic) a call of this store last failed for want of Redis.
        self._unreachable_at: float | None = None

    def close(self) -> None:
        """Write the counts still tallied, and close the client (a store that owns it)."""
        if self._tally is not None:
            self._tally.close()
        self._redis.close()

    # -- the ways in: a script, a plain pipeline --------------------------------------------------
    now_ms = blocking(TaskPlans.now_ms)

    def run(self, call: ScriptCall[T]) -> T:
        try:
            return self._io.drive(self.plans.run(call))
        except StoreUnavailable:
            self._unreachable_at = time.monotonic()
            raise

    def _durable(self, call: ScriptCall[T]) -> T:
        """``call``, replicated when the deployment asks for it (``TaskPlans.durable``)."""
        try:
            return self._io.drive(self.plans.durable(call))
        except StoreUnavailable:
            self._unreachable_at = time.monotonic()
            raise

    def unreachable_at_ms(self) -> int:
        """When (Redis's clock, ms) this process last found the store unreachable; 0: never.
        A lease that lapsed after that moment's run last renewed is no evidence against its
        tool: the run may simply not have reached Redis (``judge_loss`` in ``_prelude.lua``)."""
        if self._unreachable_at is None:
            return 0
        return self.now_ms() - int((time.monotonic() - self._unreachable_at) * 1000)

    def run_many(self, many: Sequence[ScriptCall[T]]) -> list[T]:
        """Several script calls in one round trip (a pipeline, not a transaction: each script
        is atomic on its own)."""
        if not many:
            return []
        if self._io.cluster:
            # redis-py's cluster pipeline refuses scripts: one call after another, each routed
            # to its slot's node (redirections followed). Each script is atomic on its own
            # either way; only the round trips differ.
            return [self.run(call) for call in many]
        now = self.now_ms()  # one reading for the batch: they go in one round trip
        try:
            replies = self._io.eval_many([Eval(c.script, c.keys, args_at(c, now)) for c in many])
        except StoreUnavailable:
            self._unreachable_at = time.monotonic()
            raise
        return [call.parse(reply) for call, reply in zip(many, replies, strict=True)]

    def pipeline(self, call: PipelineCall[T]) -> T:
        return self._io.pipeline(call)

    # -- a worker's run --------------------------------------------------------------------------
    def claim(self, ref: str, lease_ms: int, peers: int = 0, *, alone: bool = True) -> Claim:
        """``peers``: the other runs this process holds; ``alone``: nothing else will run in
        this run's process (see ``run_calls.claim``)."""
        call = run_calls.claim(
            self._keys,
            ref,
            lease_ms,
            self._payloads,
            max_lost=self.max_runs,
            peers=peers,
            excuse_ms=self.unreachable_at_ms(),
            alone=alone,
        )
        try:
            return self._durable(call)
        except NotReplicated as refused:
            # The claim stands on the primary only: handed back at once, so its lease neither
            # holds the task nor lapses into a lost run; the sweeper sends it again.
            claimed = refused.result
            if isinstance(claimed, Claim) and claimed.reply is Reply.OK:
                with contextlib.suppress(StoreUnavailable):
                    self.release(ref, claimed.gen)
            raise

    def renew(self, ref: str, gen: int, lease_ms: int) -> Renewal:
        return self.run(run_calls.renew(self._keys, ref, gen, lease_ms))

    def renew_many(
        self, runs: Sequence[tuple[str, int]], lease_ms: int, min_peers: int = 0
    ) -> list[Renewal]:
        """Renew the leases of many runs (``(ref, gen)``) in one round trip. Renewed together,
        they would lapse together: each run learns it has ``len(runs) - 1`` peers (at least
        ``min_peers``: a run of its own counts its parent's group, ``mcpq.workers.solo``)."""
        peers = max(len(runs) - 1, min_peers)
        # One call of the script per shard and chunk, all in one pipeline (see renew.lua).
        by_shard: dict[int, list[int]] = {}
        shards = self._keys.shards
        for i, (ref, _) in enumerate(runs):
            by_shard.setdefault(shard_index(ref, shards), []).append(i)
        chunks = [
            members[start : start + run_calls.RENEW_CHUNK]
            for members in by_shard.values()
            for start in range(0, len(members), run_calls.RENEW_CHUNK)
        ]
        calls = [
            run_calls.renew_shard(self._keys, [runs[i] for i in chunk], lease_ms, peers)
            for chunk in chunks
        ]
        renewals: list[Renewal | None] = [None] * len(runs)
        for chunk, replies in zip(chunks, self.run_many(calls), strict=True):
            for i, renewal in zip(chunk, replies, strict=True):
                renewals[i] = renewal
        return [renewal for renewal in renewals if renewal is not None]

    def report(
        self,
        ref: str,
        gen: int,
        message: str | None,
        count: int = 1,
        at_ms: int | None = None,
        *,
        progress: float | None = None,
        total: float | None = None,
        logs: Sequence[Any] = (),
        first_log: int = 1,
    ) -> Reply:
        """``count``: how many reports this one stands for (the latest of several); ``at_ms``:
        when the tool made it (Redis's clock; default now); ``progress``/``total``:
        ``report_progress``'s numbers; ``logs``: the run's log messages numbered from
        ``first_log`` (kept only for a synchronous call); ``message`` None: only those."""
        call = run_calls.report(
            self._keys,
            ref,
            gen,
            message,
            self._payloads,
            count,
            at_ms,
            progress=progress,
            total=total,
            logs=logs,
            first_log=first_log,
        )
        return self.run(call)

    def request_input(self, ref: str, gen: int, requests: dict[str, Any]) -> InputPoll:
        return self.run(run_calls.request_input(self._keys, ref, gen, requests, self._payloads))

    def park(self, ref: str, gen: int) -> Reply:
        return self.run(run_calls.park(self._keys, ref, gen))

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
        call = run_calls.finish(
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

    def lost_alone(self, ref: str) -> bool:
        """A run of its own died while its parent lived: its lapse counts (``lost_alone.lua``)."""
        return self.run(run_calls.lost_alone(self._keys, ref))

    def release(self, ref: str, gen: int) -> Reply:
        return self.run(run_calls.release(self._keys, ref, gen))

    def save_step(self, ref: str, gen: int, name: str, value: Any) -> tuple[Reply, Any]:
        call = run_calls.save_step(self._keys, ref, gen, name, value, self._payloads)
        return self._durable(call)

    def begin_step(self, ref: str, gen: int, name: str, lease_ms: int) -> StepStart:
        """Before a step's ``fn``: its memoized value, or proof (in the same round trip) that
        this run still holds the task, its lease live for ``lease_ms`` at least half of it."""
        return self.run(run_calls.begin_step(self._keys, ref, gen, name, lease_ms, self._payloads))

    def step_value(self, ref: str, name: str) -> tuple[bool, Any]:
        """A memoized step's value, if stored: a plain read, for operators and benchmarks (a run
        reads it through ``begin_step``, fenced)."""
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

    def run_state(self, ref: str) -> tuple[TaskStatus | None, int]:
        """The task's status (``None`` once it is gone) and the generation running it, in one
        read: a run asks whether the task ended and whether it still holds it."""
        with store_errors():
            status, gen = self._redis.hmget(self._keys.task(ref), ["status", "gen"])
        return (None if status is None else TaskStatus(str(status))), int(gen or 0)

    def record(self, ref: str) -> TaskRecord | None:
        """The task as stored; ``None`` once it is gone (benchmarks and operators read it)."""
        with store_errors():
            stored = self._redis.hgetall(self._keys.task(ref))
        if not stored:
            return None
        return TaskRecord.from_hash(ref, stored, self._payloads)  # type: ignore[arg-type]

    def trace_of(self, ref: str) -> str:
        """The traceparent the task was created under (empty: none, or tracing was off). A
        worker reads it before a run's span, only when tracing is on."""
        with store_errors():
            stored = self._redis.hget(self._keys.task(ref), "trace")
        return str(stored or "")

    # -- the web tier's create, for tests and tools (the web runs it on the asyncio store) -------
    create = blocking(TaskPlans.create)

    # -- recovery: the sweeper ------------------------------------------------------------------
    def sweep(self, unclaimed_ms: int, batch: int = 100, lease_ms: int = 0) -> list[Due]:
        """Runs to enqueue again, and tasks to fail (``poisoned``: see ``max_runs``), from
        every shard in one round trip. ``batch`` bounds each index's due entries per call: a
        sharded store gives each shard its share (at least one), so a sweep (and the lock it
        holds) stays as short as with one shard."""
        shards, excuse = self._keys.all_shards, self.unreachable_at_ms()
        if len(shards) == 1:
            call = run_calls.sweep(shards[0], unclaimed_ms, batch, self.max_runs, lease_ms, excuse)
            return self.run(call)
        each = max(1, -(-batch // len(shards)))
        sweeps = [
            run_calls.sweep(s, unclaimed_ms, each, self.max_runs, lease_ms, excuse) for s in shards
        ]
        return [due for part in self.run_many(sweeps) for due in part]

    mark_enqueued = blocking(TaskPlans.mark_enqueued)
    #: A synchronous call's log messages (the web's streams read them; tests too).
    logs = blocking(TaskPlans.logs)

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
                self.run(run_calls.unlock(self._keys, name, token))

    def beat_worker(self, node: str) -> None:
        """Record that worker node ``node`` is alive (``/readyz`` and ``mcpq status`` read it)."""
        self.pipeline(stats.beat_worker(self._keys, node))

    # -- operators ------------------------------------------------------------------------------
    def stats(self, queues: list[str]) -> StatsSnapshot:
        return self.pipeline(stats.snapshot(self._keys, queues))

    def rotate_data(self, batch: int = 200) -> rotation.Rotation:
        """Re-encrypt every payload not under the current data key (``mcpq keys rotate-data``;
        see ``mcpq.shared.store.rotation``): ``batch`` keys per SCAN step and round trip."""
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
