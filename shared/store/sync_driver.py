"""The synchronous store's I/O: plans (``plans``) run on a redis-py client.

Each op a plan yields is done here, on the workers' client: a script on one pooled connection
(``_command``: redis-py's pool, connection and retry policy without its client's command path),
routed by redis-py on a Cluster; a pipeline; ``TIME``; a script load. A Redis failure becomes
``StoreUnavailable`` here (``errors``) and is raised into the plan, as any other error of an op.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import redis
import redis.cluster

from mcpq.shared import tracing
from mcpq.shared.store import script_spans, scripts
from mcpq.shared.store.call_types import PipelineCall
from mcpq.shared.store.plans import Done, Eval, EvalAndWait, Load, Op, Plan, ReadTime, resume
from mcpq.shared.store.redis_errors import as_store_error, store_errors

T = TypeVar("T")


class SyncDriver:
    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        #: A Redis Cluster client: scripts go through redis-py's routing (by their keys' slot).
        self.cluster = isinstance(client, redis.cluster.RedisCluster)
        self._server = script_spans.where(client)
        self._scripts = {
            name: client.register_script(scripts.source(name)) for name in scripts.NAMES
        }

    def drive(self, plan: Plan[T]) -> T:
        """``plan``'s result: each op it yields is done here, and its reply (or its error) goes
        back into the plan."""
        op = resume(plan)
        while not isinstance(op, Done):
            try:
                reply = self._do(op)
            except Exception as error:
                op = resume(plan, None, as_store_error(error))
            else:
                op = resume(plan, reply)
        return op.result  # type: ignore[no-any-return]

    def pipeline(self, call: PipelineCall[T]) -> T:
        with store_errors():
            return self._pipeline(call)

    def _do(self, op: Op) -> Any:
        traced = tracing.current()
        if traced.on and isinstance(op, Eval | EvalAndWait):  # a script: a CLIENT span
            with traced.client_span(*script_spans.described(op, self._server)):
                return self._op(op)
        return self._op(op)

    def _op(self, op: Op) -> Any:
        if isinstance(op, Eval):
            script = self._scripts[op.script]
            if self.cluster:
                return script(keys=op.keys, args=op.args)  # routed by its keys' slot
            return self._command("EVALSHA", script.sha, len(op.keys), *op.keys, *op.args)
        if isinstance(op, PipelineCall):
            return self._pipeline(op)
        if isinstance(op, EvalAndWait):
            return self._eval_and_wait(op)
        if isinstance(op, ReadTime):
            return self.client.time()
        if isinstance(op, Load):
            script = self._scripts[op.script]
            script.sha = str(self._command("SCRIPT", "LOAD", script.script))
            return None
        raise TypeError(f"the synchronous store does not do {type(op).__name__}")

    def _command(self, *args: Any) -> Any:
        """``args`` as one command on one pooled connection: what the client's
        ``execute_command`` does, minus its command-generic layers (``AsyncDriver._command``
        says what is kept and why: here the claim and the finish of every run; after an idle
        moment a script call through ``Script.__call__`` measured 240-344 µs on a 2-core VM,
        this path 145-214 µs)."""
        pool = self.client.connection_pool
        conn = pool.get_connection()
        try:
            return conn.retry.call_with_retry(
                lambda: _send(conn, args),
                lambda _: conn.disconnect(),  # type: ignore[no-untyped-call]
            )
        finally:
            pool.release(conn)

    def _eval_and_wait(self, op: EvalAndWait) -> list[Any]:
        """The script's reply and ``WAIT``'s, from one pipeline on one connection (``WAIT``
        counts the writes of its own connection); an error reply is raised (``NOSCRIPT``
        first). On a Cluster both go to the node owning the keys' slot (redis-py's cluster
        pipeline would send a keyless ``WAIT`` to another node: ``AsyncDriver._on_keys_node``)."""
        evalsha = ("EVALSHA", self._scripts[op.script].sha, len(op.keys), *op.keys, *op.args)
        client: redis.Redis = self.client
        if self.cluster:
            cluster = self.client
            assert isinstance(cluster, redis.cluster.RedisCluster)
            node = cluster.get_node_from_key(op.keys[0])
            client = node.redis_connection
        pipe = client.pipeline(transaction=False)
        pipe.execute_command(*evalsha)  # type: ignore[no-untyped-call]
        pipe.execute_command("WAIT", op.replicas, op.timeout_ms)  # type: ignore[no-untyped-call]
        replies = pipe.execute(raise_on_error=False)
        for value in replies:
            if isinstance(value, Exception):
                raise value
        return replies

    def _pipeline(self, call: PipelineCall[T]) -> T:
        pipe = self.client.pipeline(transaction=False)
        for queue in call.commands:
            queue(pipe)
        return call.parse(pipe.execute())

    def eval_many(self, evals: Sequence[Eval]) -> list[Any]:
        """Scripts in one round trip (a pipeline, not a transaction: each script is atomic on
        its own): their replies. Not on a Cluster (redis-py's cluster pipeline refuses scripts)."""
        with store_errors():
            pipe = self.client.pipeline(transaction=False)
            for op in evals:
                self._scripts[op.script](keys=op.keys, args=op.args, client=pipe)
            return pipe.execute()


def _send(conn: redis.Connection, args: tuple[Any, ...]) -> Any:
    conn.send_command(*args)  # type: ignore[no-untyped-call]
    return conn.read_response()
