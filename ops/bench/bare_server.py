"""The bare server of ``mcpq.ops.bench.floor``: ``POST /mcp`` answering the load generator's
``tools/call`` and ``tasks/get`` with one Redis script each, and nothing else, on the parts mcpq's
web is made of (Falcon's ASGI app, served by gunicorn with uvicorn's worker; redis-py on hiredis).

A module of its own, importing only what it serves with, so that its process is as lean as a
server of these parts can be.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import falcon
import falcon.asgi
import orjson
import redis.asyncio as aioredis

#: The bare server's create: the task's hash and a message on a (trimmed) queue, as one script.
CREATE = """
redis.call('HSET', KEYS[1], 'status', 'working', 'params', ARGV[1])
redis.call('PEXPIRE', KEYS[1], 600000)
redis.call('LPUSH', KEYS[2], ARGV[2])
redis.call('LTRIM', KEYS[2], 0, 99)
return 1
"""
#: The bare server's poll: counts the task's polls (the first answers `working`).
POLL = "return redis.call('HINCRBY', KEYS[1], 'polls', 1)"
_STAMP = "2026-01-01T00:00:00.000Z"


class _BareMcp:
    """``POST /mcp`` answering the generator's ``tools/call`` and ``tasks/get``, one script each."""

    def __init__(self, redis_url: str) -> None:
        self._redis = aioredis.Redis.from_url(redis_url)
        self._create = self._redis.register_script(CREATE)
        self._poll = self._redis.register_script(POLL)
        self._ids = itertools.count()

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        body = orjson.loads(await req.stream.read())
        if body["method"] == "tools/call":
            task_id = f"{os.getpid()}-{next(self._ids)}"
            params = orjson.dumps(body["params"])
            await self._create(keys=[f"bare:{task_id}", "bare:queue"], args=[params, task_id])
            status = "working"
        else:
            task_id = str(body["params"]["taskId"])
            polls = await self._poll(keys=[f"bare:{task_id}"])
            status = "working" if int(polls) < 2 else "completed"
        result = {
            "resultType": "task" if body["method"] == "tools/call" else "complete",
            "taskId": task_id,
            "status": status,
            "createdAt": _STAMP,
            "lastUpdatedAt": _STAMP,
            "ttlMs": 600000,
            "pollIntervalMs": 1000,
        }
        resp.data = orjson.dumps({"jsonrpc": "2.0", "id": body["id"], "result": result})
        resp.content_type = falcon.MEDIA_JSON


def create_app() -> falcon.asgi.App[Any, Any]:
    """The bare server's app (gunicorn: ``mcpq.ops.bench.bare_server:create_app()``)."""
    app = falcon.asgi.App()
    app.add_route("/mcp", _BareMcp(os.environ["REDIS_URL"]))
    return app
