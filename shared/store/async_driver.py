"""The asyncio store's I/O: plans (``plans``) run on a ``redis.asyncio`` client (the web tier).

Each op a plan yields is done here: a script on one pooled connection (``_command``, the lean
path: see its NOTE), routed by redis-py on a Cluster; a pipeline; ``TIME``; a script load; and a
script with its ``WAIT`` on the connection that ran it (by hand on a Cluster: ``_on_keys_node``).
A Redis failure becomes ``StoreUnavailable`` here (``errors``) and is raised into the plan, as
any other error of an op.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, TypeVar

import redis.asyncio as aioredis
import redis.exceptions as rexc
from redis.asyncio.cluster import PipelineCommand

from mcpq.shared import tracing
from mcpq.shared.errors import StoreUnavailable
from mcpq.shared.store import script_spans, scripts
from mcpq.shared.store.call_types import PipelineCall
from mcpq.shared.store.plans import Done, Eval, EvalAndWait, Op, Plan, ReadTime, resume
from mcpq.shared.store.redis_errors import as_store_error, store_errors

T = TypeVar("T")


class AsyncDriver:
    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client
        self._cluster = isinstance(client, aioredis.RedisCluster)
        self._server = script_spans.where(client)
        self._scripts = {
            name: client.register_script(scripts.source(name)) for name in scripts.NAMES
        }
        #: Held while a Cluster's slot map is read again (``_relearn_slots``).
        self._relearning: asyncio.Lock | None = None

    async def drive(self, plan: Plan[T]) -> T:
        """Run ``plan`` to its end: every op it yields done here, the op's reply sent back to
        it, or the op's error raised into it."""
        op = resume(plan)
        while not isinstance(op, Done):
            try:
                reply = await self._do(op)
            except Exception as error:
                op = resume(plan, None, as_store_error(error))
            else:
                op = resume(plan, reply)
        return op.result  # type: ignore[no-any-return]

    async def pipeline(self, call: PipelineCall[T]) -> T:
        """``call``'s commands, one pipeline (no transaction): its parsed replies."""
        with store_errors():
            return await self._pipeline(call)

    async def _do(self, op: Op) -> Any:
        traced = tracing.current()
        if traced.on and isinstance(op, Eval | EvalAndWait):  # a script: a CLIENT span
            with traced.client_span(*script_spans.described(op, self._server)):
                return await self._op(op)
        return await self._op(op)

    async def _op(self, op: Op) -> Any:
        if isinstance(op, Eval):
            script = self._scripts[op.script]
            if self._cluster:
                return await script(keys=op.keys, args=op.args)  # routed by its keys' slot
            return await self._command("EVALSHA", script.sha, len(op.keys), *op.keys, *op.args)
        if isinstance(op, PipelineCall):
            return await self._pipeline(op)
        if isinstance(op, EvalAndWait):
            return await self._eval_and_wait(op)
        if isinstance(op, ReadTime):
            return await self.client.time()
        script = self._scripts[op.script]  # a Load
        if self._cluster:
            script.sha = await self.client.script_load(script.script)
        else:
            script.sha = str(await self._command("SCRIPT", "LOAD", script.script))
        return None

    async def _command(self, *args: Any) -> Any:
        """``args`` as one command on one pooled connection: what the client's
        ``execute_command`` does, with redis-py's own connection, pool, parser and retry policy,
        minus its client's layers.

        NOTE: every request of the web tier runs one or two scripts, and on an idle process
        (a request now and then, the usual case) redis-py's generic command path costs more than
        the round trip itself: measured on a 2-core VM with 2 ms pauses between calls, a
        script call through ``Script.__call__`` took 312-347 µs, this path 226-245 µs, the
        bare round trip 90 µs. What it skips is command-generic: response callbacks (a script
        has none), the client's observability hooks, the HIMPORT branch. What it keeps: the
        pool (``BlockingConnectionPool``: waits for a free connection), the connection's
        health check, the client's retry policy (the connection is dropped before a retry,
        as the client does). (``NOSCRIPT``: ``plans.ScriptPlans._reloading``.)"""
        pool = self.client.connection_pool
        conn = await pool.get_connection()  # type: ignore[no-untyped-call]
        try:

            async def send() -> Any:
                await conn.send_command(*args)
                return await conn.read_response()

            async def dropped(error: Exception) -> None:
                await conn.disconnect()

            return await conn.retry.call_with_retry(send, dropped)
        finally:
            await pool.release(conn)

    async def _pipeline(self, call: PipelineCall[T]) -> T:
        async with self.client.pipeline(transaction=False) as pipe:
            for queue in call.commands:
                queue(pipe)
            replies = await pipe.execute()
        return call.parse(replies)

    async def _eval_and_wait(self, op: EvalAndWait) -> list[Any]:
        """The script's reply and ``WAIT``'s (``plans.ScriptPlans.replicated``), from one
        pipeline on one connection; an error reply is raised (``NOSCRIPT`` first)."""
        evalsha = ("EVALSHA", self._scripts[op.script].sha, len(op.keys), *op.keys, *op.args)
        wait = ("WAIT", op.replicas, op.timeout_ms)
        if self._cluster:
            replies = await self._on_keys_node(op.keys[0], evalsha, wait)
        else:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.execute_command(*evalsha)
                pipe.execute_command(*wait)
                replies = await pipe.execute(raise_on_error=False)
        for value in replies:
            if isinstance(value, Exception):
                raise value
        return replies

    async def _on_keys_node(self, key: str, *commands: tuple[Any, ...]) -> list[Any]:
        """``commands`` as one pipeline on one connection of the Cluster node that owns
        ``key``'s slot: their replies, an error reply as its exception.

        NOTE: redis-py's cluster pipeline sends a keyless ``WAIT`` to its default node, on
        another connection, which wrote nothing: ``WAIT`` there answers at once with every
        replica of that node, and a write no replica has would be acknowledged. So the script
        and its ``WAIT`` go to the key's node together, by hand. A redirect or a lost node (a
        failover, a resharding) is a 503 once the slot map is read again, so that the client's
        retry goes where the slot is now."""
        cluster = self.client
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
