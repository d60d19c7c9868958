"""The task store, asyncio flavour: what the web tier uses (``redis.asyncio``).

The same calls as the synchronous store (``shared.store.calls``), awaited; plus the reads only
the web tier makes: ``tasks/get`` in one round trip, watching tasks change (pub/sub), sessions,
``tasks/list``, readiness.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, TypeVar

import redis.asyncio as aioredis
import redis.exceptions as rexc
from redis.asyncio.cluster import PipelineCommand
from redis.commands.core import AsyncScript

from shared.errors import StoreUnavailable, TaskNotFound
from shared.jobs import Message
from shared.store import apikeys, calls, listing, reads, scripts, sessions, stats
from shared.store.calls import Answered, Cancelled, NewTask, PipelineCall, ScriptCall
from shared.store.clock import RedisClock
from shared.store.errors import NotReplicated, store_errors
from shared.store.keys import Keys
from shared.store.listing import Listed, Position
from shared.store.payloads import PLAIN, Payloads
from shared.store.records import TaskRecord
from shared.store.sessions import Outgoing, Session
from shared.store.states import Reply
from shared.store.stats import StatsSnapshot
from shared.store.tally import StatsTally
from shared.store.wakeups import AsyncWakeups, AsyncWatch

T = TypeVar("T")


class AsyncTaskStore:
    def __init__(
        self,
        client: aioredis.Redis,
        keys: Keys | None = None,
        payloads: Payloads = PLAIN,
        *,
        min_replicas: int = 0,
        replica_wait_ms: int = 1000,
        tally: StatsTally | None = None,
    ) -> None:
        self._redis = client
        #: Where creates are counted (``shared.store.tally``); ``None``: in the create script.
        self._tally = tally
        #: Replicas that must confirm a create or an answer before it is acknowledged
        #: (``MCPQ_REDIS_MIN_REPLICAS``; 0: the primary's word is enough), and for how long
        #: the write waits for them (``MCPQ_REDIS_REPLICA_WAIT_MS``).
        self.min_replicas, self.replica_wait_ms = min_replicas, replica_wait_ms
        self._keys = keys or Keys()
        #: Seals and opens payloads (``MCPQ_DATA_KEYS``; ``open_async_store`` passes them).
        self._payloads = payloads
        self._wakeups = AsyncWakeups(client, self._keys)
        self._scripts = {
            name: client.register_script(scripts.source(name)) for name in scripts.NAMES
        }
        self._clock = RedisClock()
        #: Held while a Cluster's slot map is read again (``_relearn_slots``).
        self._relearning: asyncio.Lock | None = None

    async def aclose(self) -> None:
        """Close the shared watch connection and the client (tests; a server just exits)."""
        await self._wakeups.aclose()
        await self._redis.aclose()

    # -- the two ways in: a script, or a plain pipeline ----------------------------------------
    async def now_ms(self) -> int:
        """Redis's time (``shared.store.clock``): a ``TIME`` round trip once in a while."""
        now = self._clock.now_ms()
        if now is None:
            readings = []
            with store_errors():
                for _ in range(self._clock.readings()):
                    sent = time.monotonic()
                    reply = await self._redis.time()
                    readings.append((sent, time.monotonic(), reply))
            now = self._clock.anchor_best(readings)
        return now

    async def _args(self, call: ScriptCall[Any]) -> list[Any]:
        """The script's ARGV, with ``now`` last when it uses the clock (``lua/_clock.lua``)."""
        if not scripts.uses_clock(call.script):
            return list(call.args)
        return [*call.args, await self.now_ms()]

    async def run(self, call: ScriptCall[T]) -> T:
        args = await self._args(call)
        script = self._scripts[call.script]
        with store_errors():
            if isinstance(self._redis, aioredis.RedisCluster):
                reply = await script(keys=call.keys, args=args)  # routed by its keys' slot
            else:
                reply = await self._evalsha(script, call.keys, args)
        return call.parse(reply)

    async def _evalsha(self, script: AsyncScript, keys: Sequence[str], args: list[Any]) -> Any:
        """``script`` on one pooled connection: what ``script(keys=, args=)`` does, with
        redis-py's own connection, pool, parser and retry policy, minus its client's layers.

        NOTE: every request of the web tier runs one or two scripts, and on an idle process
        (a request now and then, the usual case) redis-py's generic command path costs more than
        the round trip itself: measured on a 2-core VM with 2 ms pauses between calls, a
        script call through ``Script.__call__`` took 312-347 µs, this path 226-245 µs, the
        bare round trip 90 µs. What it skips is command-generic: response callbacks (a script
        has none), the client's observability hooks, the HIMPORT branch. What it keeps: the
        pool (``BlockingConnectionPool``: waits for a free connection), the connection's
        health check, the client's retry policy (the connection is dropped before a retry,
        as the client does), ``NOSCRIPT`` → load and run again, as ``Script.__call__``."""
        pool = self._redis.connection_pool
        conn = await pool.get_connection()  # type: ignore[no-untyped-call]
        try:

            async def send() -> Any:
                await conn.send_command("EVALSHA", script.sha, len(keys), *keys, *args)
                return await conn.read_response()

            async def dropped(error: Exception) -> None:
                await conn.disconnect()

            try:
                return await conn.retry.call_with_retry(send, dropped)
            except rexc.NoScriptError:
                # A Redis that restarted (or a replica just promoted) has an empty script
                # cache: the script did not run. Load it, then run it once more.
                script.sha = await conn.retry.call_with_retry(
                    lambda: self._load(conn, script.script), dropped
                )
                return await conn.retry.call_with_retry(send, dropped)
        finally:
            await pool.release(conn)

    @staticmethod
    async def _load(conn: aioredis.Connection, source: Any) -> str:
        await conn.send_command("SCRIPT", "LOAD", source)
        return str(await conn.read_response())

    async def pipeline(self, call: PipelineCall[T]) -> T:
        with store_errors():
            async with self._redis.pipeline(transaction=False) as pipe:
                for queue in call.commands:
                    queue(pipe)
                replies = await pipe.execute()
        return call.parse(replies)

    async def _replicated(self, call: ScriptCall[T]) -> tuple[T, int]:
        """Run ``call``, then ``WAIT`` for ``min_replicas``: the script's reply and how many
        replicas confirmed every write of this connection so far, this one included.

        NOTE: one pipeline, so one round trip and one connection: ``WAIT`` counts the writes
        of the connection it runs on, so it must follow the script on the same one. A
        ``NOSCRIPT`` (a replica just promoted has an empty script cache) loads the script and
        sends both again: the script did not run, and ``WAIT`` alone wrote nothing. A parse
        that raises (``Refused``) means the script wrote nothing: then the count is moot."""
        script = self._scripts[call.script]
        args = await self._args(call)
        evalsha = ("EVALSHA", script.sha, len(call.keys), *call.keys, *args)
        wait = ("WAIT", self.min_replicas, self.replica_wait_ms)
        with store_errors():
            for _attempt in range(2):
                if isinstance(self._redis, aioredis.RedisCluster):
                    reply, replicas = await self._on_keys_node(call.keys[0], evalsha, wait)
                else:
                    async with self._redis.pipeline(transaction=False) as pipe:
                        pipe.execute_command(*evalsha)
                        pipe.execute_command(*wait)
                        reply, replicas = await pipe.execute(raise_on_error=False)
                if not isinstance(reply, rexc.NoScriptError):
                    break
                script.sha = await self._redis.script_load(script.script)
            for value in (reply, replicas):
                if isinstance(value, Exception):
                    raise value
        return call.parse(reply), int(replicas)

    async def _on_keys_node(self, key: str, *commands: tuple[Any, ...]) -> list[Any]:
        """``commands`` as one pipeline on one connection of the Cluster node that owns
        ``key``'s slot: their replies, an error reply as its exception.

        NOTE: redis-py's cluster pipeline sends a keyless ``WAIT`` to its default node, on
        another connection, which wrote nothing: ``WAIT`` there answers at once with every
        replica of that node, and a write no replica has would be acknowledged. So the script
        and its ``WAIT`` go to the key's node together, by hand. A redirect or a lost node (a
        failover, a resharding) is a 503 once the slot map is read again, so that the client's
        retry goes where the slot is now."""
        cluster = self._redis
        assert isinstance(cluster, aioredis.RedisCluster)
        await cluster.initialize()  # nothing to do once the slot map is known
        node = cluster.get_node_from_key(key)
        queued = [PipelineCommand(i, *args) for i, args in enumerate(commands)]
        try:
            await node.execute_pipeline(queued)
        except (rexc.ConnectionError, rexc.TimeoutError, OSError):
            await self._relearn_slots(cluster)
            raise
        replies = [command.result for command in queued]
        if any(isinstance(reply, (rexc.AskError, rexc.TryAgainError)) for reply in replies):
            await self._relearn_slots(cluster)
            raise StoreUnavailable()
        return replies

    async def _relearn_slots(self, cluster: aioredis.RedisCluster) -> None:
        """Read the Cluster's slot map again: once at a time (the calls that failed with this
        one need no reading of their own), and best effort (while a failover is under way no
        node may know yet; the next failed call reads it again)."""
        if self._relearning is None:
            self._relearning = asyncio.Lock()
        if self._relearning.locked():
            return
        async with self._relearning:
            with contextlib.suppress(rexc.RedisError, OSError):
                await cluster.nodes_manager.initialize()

    # -- the client's side of a task -------------------------------------------------------------
    async def create(
        self,
        task: NewTask,
        unclaimed_ms: int,
        admit: calls.Admission | None = None,
        message: Message | None = None,
        start_within_ms: int = 0,
    ) -> int | None:
        """Persist a new task (and push its run's ``message``, see :func:`calls.create`); its
        ``createdAt`` (ms), or ``None`` if the ref exists already. Raises
        :class:`~shared.store.calls.Refused` when ``admit`` refuses it (quota, rate, a replayed
        state): then nothing was written, and nothing sent."""
        if admit is not None and self._keys.shards > 1:
            # NOTE: two steps, because the principal's keys and the task's are on different
            # shards: admitted first (everything checked and spent there, atomically), created
            # second. A process that dies in between leaves a quota member without a task,
            # dropped after calls.ADMIT_GRACE_MS; a state marked used without a task (its
            # client's retry is refused as a replay, never run twice).
            await self._admit(task.ref, admit)
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
        if not self.min_replicas:
            created = await self.run(call)
        else:
            created, replicas = await self._replicated(call)
            if replicas < self.min_replicas:
                if created is not None:
                    self._count_created(task)  # it was created (and is withdrawn: cancelled)
                    await self._withdraw(task)
                raise NotReplicated(self.min_replicas, replicas)
        if created is not None:
            self._count_created(task)
        return created

    def _count_created(self, task: NewTask) -> None:
        if self._tally is not None:
            self._tally.add(self._keys.at(task.ref).stats, f"created:{task.tool}")

    async def _withdraw(self, task: NewTask) -> None:
        """Cancel a create the client is told failed (not replicated), so that its run, whose
        message went out with it, ends at its claim instead of running unknown to anyone; the
        client creates it again. Best effort: if Redis is gone too, a failover loses the task
        anyway, and if not, it runs to its end and expires with its TTL."""
        call = calls.cancel(self._keys, task.ref, task.owner, "not replicated", self._payloads)
        with contextlib.suppress(StoreUnavailable):
            await self.run(call)

    async def _admit(self, ref: str, admit: calls.Admission) -> None:
        """Admit ``ref`` on the principal's home shard (see :func:`calls.admit`): a full quota
        set is pruned of ended tasks (read on their own shards) and asked once more."""
        full = await self.run(calls.admit(self._keys, ref, admit))
        if full is not None:
            found = await self.pipeline(calls.statuses(self._keys, list(full.members)))
            ended = calls.ended_members(full, found)
            await self.run(calls.admit(self._keys, ref, admit, ended, may_ask=False))

    async def mark_enqueued(self, ref: str, start_within_ms: int) -> bool:
        return await self.run(calls.mark_enqueued(self._keys, ref, start_within_ms))

    async def answer(
        self, ref: str, owner: str, answers: dict[str, Any], unclaimed_ms: int
    ) -> Answered:
        call = calls.answer(self._keys, ref, owner, answers, unclaimed_ms, self._payloads)
        if not self.min_replicas:
            return await self.run(call)
        answered, replicas = await self._replicated(call)
        # An answer not replicated stays delivered (the run goes on with it); the client's
        # retry is harmless: answers to keys no longer outstanding are ignored.
        if replicas < self.min_replicas and answered.reply not in (Reply.NOTFOUND, Reply.IGNORED):
            raise NotReplicated(self.min_replicas, replicas)
        return answered

    async def cancel(self, ref: str, owner: str, message: str) -> Cancelled:
        return await self.run(calls.cancel(self._keys, ref, owner, message, self._payloads))

    async def get(
        self, ref: str, owner: str, *, watching: bool = False, call: bool = False
    ) -> tuple[TaskRecord, dict[str, Any]]:
        """The task and its outstanding input requests, in one round trip (one script, so the
        two are read at one instant). Another principal's task reads as unknown.
        ``watching``: the caller holds a :meth:`watch` of the task opened with ``mark=False``;
        this read marks the task watched (its changes are pushed from now on). ``call``: the
        record carries the call's arguments, capabilities and pre-answers too (else they are
        empty: a poll needs the task's state, and leaves them sealed in Redis)."""
        # The owner is compared inside Redis: unknown, expired and another principal's task
        # read exactly alike, in reply and in timing (an id must not reveal that it exists).
        found = await self.run(reads.read(self._keys, ref, owner, watching=watching, call=call))
        if found is None:
            raise TaskNotFound()
        task, inputs = found
        requests = self._payloads.load_entries(self._keys.inputs(ref), inputs)
        return TaskRecord.from_hash(ref, task, self._payloads), requests

    # -- push: the changes the scripts publish ---------------------------------------------------
    @contextlib.asynccontextmanager
    async def watch(
        self, refs: Sequence[str] = (), scopes: Sequence[str] = (), *, mark: bool = True
    ) -> AsyncIterator[AsyncWatch]:
        """Subscribe to the changes of tasks ``refs`` and of the tasks of listing ``scopes``.

        NOTE: subscribe first, read the task second: the scripts publish in the same step as the
        change, so nothing falls between the read and the first message (see ``publish`` in
        ``lua/_prelude.lua``). Messages can still be lost if the connection drops, so a watcher
        re-reads the task on a timer too.

        A task's changes are published only once it is marked watched: here, after subscribing
        (``mark``), or by the caller's first read (``get(..., watching=True)``, no round trip
        of its own: ``mark=False``). A task that ends is not marked (nothing more to push).
        """
        channels = [self._keys.events(ref) for ref in refs]
        channels += [self._keys.listing_events(scope) for scope in scopes]
        # Every watch of this process shares one connection (shared.store.wakeups): a thousand
        # waiting synchronous calls hold one Redis connection, not a thousand.
        async with self._wakeups.watch(channels) as watch:
            if mark and refs:
                # After the subscription is in place (the order the NOTE above needs).
                await asyncio.gather(*(self.run(c) for c in reads.mark_watched(self._keys, refs)))
            yield watch

    # -- 2025-era sessions ----------------------------------------------------------------------
    async def open_session(self, session: Session, ttl_ms: int) -> None:
        await self.pipeline(sessions.open_session(self._keys, session, ttl_ms, self._payloads))

    async def touch_session(self, sref: str, ttl_ms: int) -> Session | None:
        call = sessions.touch_session(self._keys, sref, ttl_ms, self._payloads)
        return await self.pipeline(call)

    async def end_session(self, sref: str) -> bool:
        return await self.pipeline(sessions.end_session(self._keys, sref))

    async def put_outgoing(self, sref: str, out_id: str, target: Outgoing, ttl_ms: int) -> None:
        await self.pipeline(sessions.put_outgoing(self._keys, sref, out_id, target, ttl_ms))

    async def take_outgoing(self, sref: str, out_id: str) -> Outgoing | None:
        return await self.pipeline(sessions.take_outgoing(self._keys, sref, out_id))

    async def put_call(self, sref: str, request_id: str, ref: str, ttl_ms: int) -> None:
        await self.pipeline(sessions.put_call(self._keys, sref, request_id, ref, ttl_ms))

    async def drop_call(self, sref: str, request_id: str) -> None:
        await self.pipeline(sessions.drop_call(self._keys, sref, request_id))

    async def find_call(self, sref: str, request_id: str) -> str | None:
        return await self.pipeline(sessions.find_call(self._keys, sref, request_id))

    # -- API keys ---------------------------------------------------------------------------------
    async def api_key(self, token: str) -> apikeys.ApiKey | None:
        """The live key ``token`` names, or ``None`` (malformed, unknown, wrong secret, revoked).
        Read on every request, never cached: a revocation holds on the next request."""
        parts = apikeys.split(token)
        if parts is None:
            return None
        with store_errors():
            fields = await self._redis.hgetall(self._keys.api_key(parts[0]))
        return apikeys.verify(parts[0], parts[1], fields) if fields else None

    # -- tasks/list (2025-11-25) ----------------------------------------------------------------
    async def list_add(
        self, scope: str, ref: str, task_id: str, created_ms: int, ttl_ms: int | None
    ) -> None:
        await self.run(listing.add(self._keys, scope, ref, task_id, created_ms, ttl_ms))

    async def listed(self, scope: str, ref: str, owner: str) -> Listed | None:
        """One task of a listing scope with its id, or ``None`` when it is gone or not there."""
        found, _ = await self.pipeline(listing.read(self._keys, scope, [ref], self._payloads))
        return found[0] if found and found[0].record.owner == owner else None

    async def list_page(
        self, scope: str, owner: str, after: Position | None, size: int
    ) -> tuple[list[Listed], Position | None]:
        """Up to ``size`` live tasks of ``scope`` after ``after``, and the position to go on
        from (``None`` at the end). Entries whose task is gone are dropped on the way."""
        page: list[Listed] = []
        while len(page) < size:
            candidates = await self.pipeline(listing.window(self._keys, scope, after, size))
            if not candidates:
                return page, None
            refs = [ref for ref, _ in candidates]
            found, gone = await self.pipeline(listing.read(self._keys, scope, refs, self._payloads))
            if gone:
                await self.pipeline(listing.forget(self._keys, scope, gone))
            for item in found:
                if item.record.owner == owner and len(page) < size:
                    page.append(item)
            last = page[-1].record if len(page) == size else None
            if last is not None:
                return page, Position(last.created_ms, last.ref)
            ref, created = candidates[-1]
            after = Position(created, ref)
        return page, None

    # -- operators ------------------------------------------------------------------------------
    async def live_workers(self, window_s: float) -> int:
        """Worker nodes with a heartbeat within the window; raises ``StoreUnavailable`` when
        Redis does not answer (``/readyz``)."""
        return await self.pipeline(stats.live_workers(self._keys, window_s))

    async def stats(self, queues: list[str]) -> StatsSnapshot:
        return await self.pipeline(stats.snapshot(self._keys, queues))
