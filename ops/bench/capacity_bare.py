"""The capacity benchmark's bare-Celery phase: the floor under a worker process of each pool kind
(``mcpq.ops.bench.bare_celery``: a minimal Celery app, JSON, ``acks_late``, one message
prefetched per slot), measured as mcpq's worker is, on the same private redis-server as mcpq's
phase (mcpq's worker stopped first; its web process stays up, idle) and on a queue of its own:

- a **drain**: the backlog sent (``send_task``) while no bare worker runs, then one started
  (once a round: the capacity benchmark runs mcpq's drain and this one in turn);
- its **idle** CPU per second;
- a **steady arrival**: a paced producer (this process) sends at the plan's rate for the plan's
  seconds to the running worker.

Completions are read from the broker (``bare_celery.completed``), which costs the bare worker
nothing."""

from __future__ import annotations

import time

import redis
from celery import Celery

from mcpq.ops.bench import bare_celery
from mcpq.ops.bench.capacity_phases import (
    Drained,
    idle_ms_per_s,
    time_drain,
    time_steady,
    worker_cost,
)
from mcpq.ops.bench.capacity_report import Plan
from mcpq.ops.bench.capacity_versus import WorkerCost
from mcpq.ops.harness.children import Child
from mcpq.ops.harness.stack import Stack


def paced_sends(app: Celery, rate: float, seconds: float) -> tuple[int, float]:
    """No-op messages at a steady ``rate`` for ``seconds`` (the i-th sent ``i / rate`` s after
    the start); how many, and the seconds from the start to the last send."""
    total = max(1, round(rate * seconds))
    with app.producer_or_acquire() as producer:
        start = time.monotonic()
        for i in range(total):
            if (delay := start + i / rate - time.monotonic()) > 0:
                time.sleep(delay)
            app.send_task(bare_celery.TASK, queue=bare_celery.QUEUE, producer=producer)
        return total, time.monotonic() - start


class BareWorker:
    """Bare Celery's worker of mcpq's pool kind ``pool_kind`` (``concurrency`` slots) on
    ``stack``'s Redis: drained (as often as asked, each time by a worker of its own), then idle
    and steady (:meth:`finish`)."""

    def __init__(self, stack: Stack, pool_kind: str, concurrency: int, plan: Plan) -> None:
        self.stack, self.pool_kind, self.concurrency, self.plan = (
            stack, pool_kind, concurrency, plan
        )  # fmt: skip
        self.app = bare_celery.make_app(stack.redis_url)
        self.client = redis.Redis.from_url(stack.redis_url)
        self.sent = 0
        self.started = 0
        self.env = stack.child_env(**{bare_celery.BROKER_ENV: stack.redis_url})
        self.env.pop("PYTHONPATH", None)  # the bare worker imports nothing of the repository's

    def completed(self) -> int:
        return bare_celery.completed(self.client, self.sent)

    def _spawn(self) -> Child:
        self.started += 1
        node = f"bare-{self.pool_kind}-{self.started}"
        argv = bare_celery.worker_command(self.pool_kind, self.concurrency, node)
        return self.stack.spawn(node, argv, self.env)

    def drain(self) -> Drained:
        """A backlog sent while no bare worker runs, then drained by one started after."""
        before = self.completed()
        bare_celery.send(self.app, self.plan.backlog)
        self.sent += self.plan.backlog
        spawned = time.monotonic()
        worker = self._spawn()
        drained = time_drain(worker, self.plan.backlog, lambda: self.completed() - before, spawned)
        self.stack.stop_child(worker)
        return drained

    def finish(self, drains: list[Drained]) -> WorkerCost:
        """Idle and steady, by a worker started for them; the cost with ``drains``."""
        worker = self._spawn()

        def produce() -> tuple[int, float]:
            count, took = paced_sends(self.app, self.plan.rate, self.plan.steady_s)
            self.sent += count
            return count, took

        idle = idle_ms_per_s(worker, self.plan.worker_idle_s)
        steady = time_steady(worker, self.completed, produce)
        self.stack.stop_child(worker)
        return worker_cost(drains, idle, steady)

    def close(self) -> None:
        self.client.close()
        self.app.close()
