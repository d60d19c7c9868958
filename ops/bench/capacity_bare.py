"""The capacity benchmark's bare-Celery phase: the floor under a worker process of each pool kind
(``mcpq.ops.bench.bare_celery``: a minimal Celery app, JSON, ``acks_late``, one message
prefetched per slot), measured as mcpq's worker is, on the same private redis-server as mcpq's
phase (mcpq's worker stopped first; its web process stays up, idle) and on a queue of its own:

- a **drain**: the backlog sent (``send_task``) while no bare worker runs, then one started;
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
from mcpq.ops.bench.capacity_phases import idle_ms_per_s, time_drain, time_steady, worker_cost
from mcpq.ops.bench.capacity_report import Plan
from mcpq.ops.bench.capacity_versus import WorkerCost
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


def measure_bare(stack: Stack, pool_kind: str, concurrency: int, plan: Plan) -> WorkerCost:
    """Bare Celery's worker of mcpq's pool kind ``pool_kind`` (``concurrency`` slots) on
    ``stack``'s Redis: drained, idle, steady."""
    app = bare_celery.make_app(stack.redis_url)
    client = redis.Redis.from_url(stack.redis_url)
    sent = [0]

    def completed() -> int:
        return bare_celery.completed(client, sent[0])

    def produce() -> tuple[int, float]:
        count, took = paced_sends(app, plan.rate, plan.steady_s)
        sent[0] += count
        return count, took

    try:
        bare_celery.send(app, plan.backlog)
        sent[0] = plan.backlog
        env = stack.child_env(**{bare_celery.BROKER_ENV: stack.redis_url})
        env.pop("PYTHONPATH", None)  # the bare worker imports nothing of the repository's
        node = f"bare-{pool_kind}"
        argv = bare_celery.worker_command(pool_kind, concurrency, node)
        spawned = time.monotonic()
        worker = stack.spawn(node, argv, env)
        drained = time_drain(worker, plan.backlog, completed, spawned)
        idle = idle_ms_per_s(worker, plan.worker_idle_s)
        steady = time_steady(worker, completed, produce)
        stack.stop_child(worker)
        return worker_cost(drained, idle, steady)
    finally:
        client.close()
        app.close()
