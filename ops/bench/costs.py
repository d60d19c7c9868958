"""What a task costs Redis, counted with ``MONITOR``: every command (those inside scripts
included), those clients sent, and round trips, per task, with an idle deployment's background
subtracted. Used by the load generator (``ops.bench.loadgen``) for each deployment it measures."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import redis

from mcpq.ops.bench.load import Load
from mcpq.ops.bench.rawhttp import RawClient
from mcpq.shared.store import Keys


@dataclass
class Costs:
    """Redis work per task (create, run to the end, one ``tasks/get``), from ``MONITOR``."""

    commands: float  #: every command, those run inside scripts included
    sent: float  #: commands clients sent
    round_trips: float  #: of those, a MULTI ... EXEC block counted once
    background_per_s: float  #: commands per second of an idle deployment (subtracted)
    top: dict[str, float]  #: commands by name, per task


class _Monitor:
    """Counts what ``MONITOR`` shows, but the admin connection's own commands, between two
    markers (``ECHO``) the admin connection sends."""

    def __init__(self, redis_url: str) -> None:
        # One connection of its own, so its commands are known by address and left out.
        self.admin = redis.Redis.from_url(
            redis_url, decode_responses=True, single_connection_client=True
        )
        self.me = str(self.admin.client_info()["addr"])
        self.names: Counter[str] = Counter()
        self.sent = 0
        self.round_trips = 0
        self._open: set[str] = set()  # connections inside MULTI

    def count(self, seconds: float | None, during: Any = None) -> None:
        """Count until ``during()`` returns (or for ``seconds``)."""
        self.names.clear()
        self.sent = self.round_trips = 0
        marker = f"mcpq-bench-{time.monotonic_ns()}"
        ready = threading.Event()
        done = threading.Event()

        def watch() -> None:
            counting = False
            with self.admin.monitor() as listening:  # type: ignore[no-untyped-call]
                ready.set()
                for line in listening.listen():
                    command, client = str(line.get("command", "")), str(line.get("client_address"))
                    if command.endswith(marker):
                        if counting:
                            done.set()
                            return
                        counting = True
                        continue
                    if not counting or f"{client}:{line.get('client_port')}" == self.me:
                        continue
                    self._one(command, str(line.get("client_type")), client, line)

        threading.Thread(target=watch, daemon=True).start()
        ready.wait(5)
        self.admin.echo(marker)
        if during is None:
            time.sleep(seconds or 0)
        else:
            during()
        self.admin.echo(marker)
        done.wait(30)

    def _one(self, command: str, kind: str, client: str, line: dict[str, Any]) -> None:
        name = command.split(" ", 1)[0].upper()
        self.names[name] += 1
        if kind == "lua":
            return
        self.sent += 1
        conn = f"{client}:{line.get('client_port')}"
        if name == "MULTI":
            self._open.add(conn)
            self.round_trips += 1
        elif name == "EXEC":
            self._open.discard(conn)
        elif conn not in self._open:
            self.round_trips += 1


async def per_task_costs(load: Load, tasks: int, redis_url: str) -> Costs:
    """Redis commands and round trips per task: ``tasks`` tasks created by 10 clients at once,
    run to the end, then read once each (``tasks/get``). An idle deployment's background work
    (heartbeats, the sweeper, the broker's polls) is measured first and subtracted, so the
    numbers do not depend on how long the burst took."""
    monitor = _Monitor(redis_url)
    async with RawClient(load.url) as http:
        # Warm, as the burst will: a task run to its end over each of 10 connections, so every
        # server process has its connections and caches, and a fresh anchor of Redis's clock
        # (a TIME each 30 s, ``mcpq.shared.store.clock``: not a cost of the tasks measured next).
        await asyncio.gather(*(_one_run(load) for _ in range(10)))
        await asyncio.sleep(1.0)
        await asyncio.to_thread(monitor.count, 2.0)
        idle = sum(monitor.names.values()) / 2.0
        ids: list[str] = []

        async def creator(left: list[int]) -> None:
            async with RawClient(load.url) as own:
                while left[0] > 0:
                    left[0] -= 1
                    if (task_id := await load.create(own)) is not None:
                        ids.append(task_id)

        async def burst() -> None:
            left = [tasks]
            await asyncio.gather(*(creator(left) for _ in range(10)))
            # The admin connection (not counted) waits for the runs to end; then one
            # tasks/get per task, which must find it completed.
            await _until_ended(monitor.admin)
            for task_id in ids:
                await load.until_done(http, task_id, 0.05)  # one tasks/get, or what it costs

        loop = asyncio.get_running_loop()
        started = time.monotonic()
        await asyncio.to_thread(
            monitor.count, None, lambda: asyncio.run_coroutine_threadsafe(burst(), loop).result()
        )
        took = time.monotonic() - started
    n = max(1, len(ids))
    background = idle * took
    total = sum(monitor.names.values())
    scale = max(0.0, total - background) / total if total else 0.0
    return Costs(
        commands=max(0.0, total - background) / n,
        sent=monitor.sent * scale / n,
        round_trips=monitor.round_trips * scale / n,
        background_per_s=idle,
        top={name: round(c / n, 2) for name, c in monitor.names.most_common(12)},
    )


async def _one_run(load: Load) -> None:
    """One task created over a connection of its own and polled to its end."""
    async with RawClient(load.url) as http:
        if (task_id := await load.create(http)) is not None:
            await load.until_done(http, task_id, 0.01)


async def _until_ended(admin: redis.Redis) -> None:
    """Until mcpq's active index is empty (the peer has none: it gets a second)."""
    active = Keys().active  # the benchmark's stacks use the default prefix
    if not admin.exists(active):
        await asyncio.sleep(1.0)
        return
    deadline = time.monotonic() + 60
    while admin.zcard(active) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
