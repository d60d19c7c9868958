"""The task store, synchronous flavour: what workers use.

Every state change is one Lua script (``shared/lua``); this class only picks keys and arguments
(``shared.store_calls``) and maps connection failures to :class:`StoreUnavailable`.
"""

from __future__ import annotations

from typing import Any, TypeVar

import redis

from shared import jsonutil, scripts, store_calls
from shared.blocking import block_timeout
from shared.keys import Keys
from shared.records import TaskRecord
from shared.store_calls import Claim, InputPoll, NewTask, ScriptCall
from shared.store_errors import store_errors

T = TypeVar("T")


class TaskStore:
    def __init__(self, client: redis.Redis, keys: Keys | None = None) -> None:
        self.redis = client
        self.keys = keys or Keys()
        self._scripts = {
            name: client.register_script(scripts.source(name)) for name in scripts.NAMES
        }

    def run(self, call: ScriptCall[T], client: redis.Redis | None = None) -> T:
        with store_errors():
            reply = self._scripts[call.script](keys=call.keys, args=call.args, client=client)
        return call.parse(reply)

    # -- creation (the web tier normally does this through the async store) --------------------
    def create(self, task: NewTask, unclaimed_ms: int) -> int | None:
        return self.run(store_calls.create(self.keys, task, unclaimed_ms))

    def mark_enqueued(self, ref: str, start_within_ms: int) -> int:
        return self.run(store_calls.mark_enqueued(self.keys, ref, start_within_ms))

    # -- a worker's run -------------------------------------------------------------------------
    def claim(self, ref: str, lease_ms: int) -> Claim:
        return self.run(store_calls.claim(self.keys, ref, lease_ms))

    def renew(self, ref: str, gen: int, lease_ms: int) -> str:
        return self.run(store_calls.renew(self.keys, ref, gen, lease_ms))

    def report(self, ref: str, gen: int, message: str) -> str:
        return self.run(store_calls.report(self.keys, ref, gen, message))

    def request_input(self, ref: str, gen: int, requests: dict[str, Any]) -> InputPoll:
        return self.run(store_calls.request_input(self.keys, ref, gen, requests))

    def park(self, ref: str, gen: int) -> str:
        return self.run(store_calls.park(self.keys, ref, gen))

    def finish(
        self, ref: str, gen: int, status: str, payload: dict[str, Any], message: str = ""
    ) -> str:
        return self.run(store_calls.finish(self.keys, ref, gen, status, payload, message))

    def release(self, ref: str, gen: int) -> str:
        return self.run(store_calls.release(self.keys, ref, gen))

    def save_step(self, ref: str, gen: int, name: str, value: Any) -> tuple[str, Any]:
        return self.run(store_calls.save_step(self.keys, ref, gen, name, value))

    def sweep(self, unclaimed_ms: int, batch: int = 100) -> list[tuple[str, str, str]]:
        return self.run(store_calls.sweep(self.keys, unclaimed_ms, batch))

    # -- client-side edges (tests and tools use these; the web uses the async store) ------------
    def answer(self, ref: str, owner: str, answers: dict[str, Any], unclaimed_ms: int) -> list[str]:
        return self.run(store_calls.answer(self.keys, ref, owner, answers, unclaimed_ms))

    def cancel(
        self, ref: str, owner: str, message: str = "Cancelled by client"
    ) -> tuple[str, bool]:
        return self.run(store_calls.cancel(self.keys, ref, owner, message))

    # -- plain reads ----------------------------------------------------------------------------
    def status(self, ref: str) -> str | None:
        with store_errors():
            value = self.redis.hget(self.keys.task(ref), "status")
        return None if value is None else str(value)

    def step_value(self, ref: str, name: str) -> tuple[bool, Any]:
        with store_errors():
            raw = self.redis.hget(self.keys.steps(ref), name)
        return (False, None) if raw is None else (True, jsonutil.loads(str(raw)))

    def load(self, ref: str) -> TaskRecord | None:
        with store_errors():
            h = self.redis.hgetall(self.keys.task(ref))
        return TaskRecord.from_hash(ref, {str(k): str(v) for k, v in h.items()}) if h else None

    def wait_wake(self, client: redis.Redis, ref: str, timeout_s: float) -> str | None:
        """Block up to ``timeout_s`` on the task's wake list (``client`` has a long timeout);
        ``None`` at once when ``timeout_s`` is not positive."""
        timeout = block_timeout(timeout_s)
        if timeout is None:
            return None
        with store_errors():
            item = client.blpop([self.keys.wake(ref)], timeout=timeout)
        return None if item is None else str(item[1])
