"""Benchmarks that run a private mcpq stack of their own (redis-server on a free loopback port,
web, Celery workers; every process in its own group, stopped by pid).

- ``python -m ops.bench.pools``: throughput of a worker pool with one worker process, then two.
- ``python -m ops.bench.recovery --runs 5``: SIGKILL the worker running a task, N times; how long
  until another worker resumes it, and that nothing is lost or done twice.

Each benchmark module is also the tool module of its own stack (``MCPQ_TOOLS``).
"""
