"""The task store, asyncio flavour: what the web tier uses (``redis.asyncio``)."""

from __future__ import annotations

import time
from typing import Any, TypeVar

import redis.asyncio as aioredis

from shared import scripts, store_calls
from shared.blocking import block_timeout
from shared.errors import TaskNotFound
from shared.keys import Keys
from shared.records import TaskRecord
from shared.store_calls import NewTask, ScriptCall
from shared.store_errors import store_errors

T = TypeVar("T")


class AsyncTaskStore:
    def __init__(self, client: aioredis.Redis, keys: Keys | None = None) -> None:
        self.redis = client
        self.keys = keys or Keys()
        self._scripts = {
            name: client.register_script(scripts.source(name)) for name in scripts.NAMES
        }

    async def run(self, call: ScriptCall[T]) -> T:
        with store_errors():
            reply = await self._scripts[call.script](keys=call.keys, args=call.args)
        return call.parse(reply)

    async def create(self, task: NewTask, unclaimed_ms: int) -> int | None:
        return await self.run(store_calls.create(self.keys, task, unclaimed_ms))

    async def mark_enqueued(self, ref: str, start_within_ms: int) -> None:
        await self.run(store_calls.mark_enqueued(self.keys, ref, start_within_ms))

    async def answer(
        self, ref: str, owner: str, answers: dict[str, Any], unclaimed_ms: int
    ) -> list[str]:
        return await self.run(store_calls.answer(self.keys, ref, owner, answers, unclaimed_ms))

    async def cancel(self, ref: str, owner: str, message: str) -> tuple[str, bool]:
        return await self.run(store_calls.cancel(self.keys, ref, owner, message))

    async def get(self, ref: str, owner: str) -> tuple[TaskRecord, dict[str, str]]:
        """The task and its outstanding input requests, in one round trip (MULTI/EXEC)."""
        with store_errors():
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.hgetall(self.keys.task(ref))
                pipe.hgetall(self.keys.inputs(ref))
                task, inputs = await pipe.execute()
        if not task or task.get("owner") != owner:
            raise TaskNotFound()
        return TaskRecord.from_hash(ref, task), inputs

    async def wait_done(self, ref: str, timeout_s: float) -> str | None:
        """Wait for a synchronous task to end or ask for input (its ``done`` list).

        NOTE: waits in slices of at most one second, below the client's socket timeout, so the
        shared fail-fast client can serve blocking reads too.
        """
        deadline = time.monotonic() + timeout_s
        while (timeout := block_timeout(min(1.0, deadline - time.monotonic()))) is not None:
            with store_errors():
                item = await self.redis.blpop([self.keys.done(ref)], timeout=timeout)
            if item is not None:
                return str(item[1])
        return None
