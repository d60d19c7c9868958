"""The task store, asyncio flavour: what the web tier uses (``redis.asyncio``).

The same calls as the synchronous store (``shared.store.calls``), awaited; plus the reads only
the web tier makes: ``tasks/get`` in one round trip, the wait of a synchronous call, readiness.
"""

from __future__ import annotations

import time
from typing import Any, TypeVar

import redis.asyncio as aioredis

from shared import jsonutil
from shared.errors import TaskNotFound
from shared.store import calls, scripts, stats
from shared.store.blocking import block_timeout
from shared.store.calls import Answered, Cancelled, NewTask, PipelineCall, ScriptCall
from shared.store.errors import store_errors
from shared.store.keys import Keys
from shared.store.records import TaskRecord
from shared.store.stats import StatsSnapshot

T = TypeVar("T")


class AsyncTaskStore:
    def __init__(self, client: aioredis.Redis, keys: Keys | None = None) -> None:
        self._redis = client
        self._keys = keys or Keys()
        self._scripts = {
            name: client.register_script(scripts.source(name)) for name in scripts.NAMES
        }

    # -- the two ways in: a script, or a plain pipeline ----------------------------------------
    async def run(self, call: ScriptCall[T]) -> T:
        with store_errors():
            reply = await self._scripts[call.script](keys=call.keys, args=call.args)
        return call.parse(reply)

    async def pipeline(self, call: PipelineCall[T]) -> T:
        with store_errors():
            async with self._redis.pipeline(transaction=False) as pipe:
                for queue in call.commands:
                    queue(pipe)
                replies = await pipe.execute()
        return call.parse(replies)

    # -- the client's side of a task -------------------------------------------------------------
    async def create(self, task: NewTask, unclaimed_ms: int) -> int | None:
        """Persist a new task; its ``createdAt`` (ms), or ``None`` if the ref exists already."""
        return await self.run(calls.create(self._keys, task, unclaimed_ms))

    async def mark_enqueued(self, ref: str, start_within_ms: int) -> bool:
        return await self.run(calls.mark_enqueued(self._keys, ref, start_within_ms))

    async def answer(
        self, ref: str, owner: str, answers: dict[str, Any], unclaimed_ms: int
    ) -> Answered:
        return await self.run(calls.answer(self._keys, ref, owner, answers, unclaimed_ms))

    async def cancel(self, ref: str, owner: str, message: str) -> Cancelled:
        return await self.run(calls.cancel(self._keys, ref, owner, message))

    async def get(self, ref: str, owner: str) -> tuple[TaskRecord, dict[str, Any]]:
        """The task and its outstanding input requests, in one round trip (MULTI/EXEC, so the
        two are read at one instant). Another principal's task reads as unknown."""
        with store_errors():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.hgetall(self._keys.task(ref))
                pipe.hgetall(self._keys.inputs(ref))
                task, inputs = await pipe.execute()
        # Unknown, expired and another principal's task read exactly alike: an id must not
        # reveal whether it exists.
        if not task or task.get("owner") != owner:
            raise TaskNotFound()
        requests = {key: jsonutil.loads(raw) for key, raw in inputs.items()}
        return TaskRecord.from_hash(ref, task), requests

    async def wait_done(self, ref: str, timeout_s: float) -> str | None:
        """Wait for a synchronous task to end or ask for input (its ``done`` list).

        NOTE: waits in slices of at most one second, below the client's socket timeout, so the
        shared fail-fast client can serve blocking reads too.
        """
        deadline = time.monotonic() + timeout_s
        while (timeout := block_timeout(min(1.0, deadline - time.monotonic()))) is not None:
            with store_errors():
                item = await self._redis.blpop([self._keys.done(ref)], timeout=timeout)
            if item is not None:
                return str(item[1])
        return None

    # -- operators ------------------------------------------------------------------------------
    async def live_workers(self, window_s: float) -> int:
        """Worker nodes with a heartbeat within the window; raises ``StoreUnavailable`` when
        Redis does not answer (``/readyz``)."""
        return await self.pipeline(stats.live_workers(self._keys, window_s))

    async def stats(self, queues: list[str]) -> StatsSnapshot:
        return await self.pipeline(stats.snapshot(self._keys, queues))
