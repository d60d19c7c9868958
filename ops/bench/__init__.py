"""Benchmarks that run a private mcpq stack of their own (``ops.harness.stack.Stack``: redis-server
on a free loopback port, web, Celery workers; every process in its own group, stopped by pid),
driven through ``mcpq.ops.harness.mcp_client.McpClient``.

- ``python -m mcpq.ops.bench.throughput``: created/s, completed/s, end-to-end and ``tasks/get``
  latency, PSS of every server process and Redis commands per task, 1 and 20 clients.
- ``python -m mcpq.ops.bench.pools``: throughput of a worker pool with one worker process, then two.
- ``python -m mcpq.ops.bench.waiting_runs --runs N``: N runs waiting at once on one io worker
  process (``async def`` tools awaiting a sleep, an answer or an HTTP call to a slow local server,
  ``slow_http``; or a sync tool): how soon all run, the worker's PSS and threads, a short tool and
  cancels beside them, the lease keeper's renewals as Redis sees them (``renewals``), and with
  ``--kill`` the handover of every run to a new worker after a SIGKILL, none lost.
- ``python -m mcpq.ops.bench.recovery --runs 5``: SIGKILL the worker running a task, N times; how
  long until another worker resumes it, and that nothing is lost or done twice.
- ``python -m mcpq.ops.bench.soak --seconds N``: a deployment under mixed traffic on both wires
  while workers, web replicas and Redis die, stall and restart; then the checks that nothing was
  lost, stuck, wrong, asked twice or done twice (``soak_*``: its deployment and faults, clients,
  wires, record and checks).
- ``python -m mcpq.ops.bench.answer_latency``: from ``tasks/update`` to the waiting tool's
resumption.
- ``python -m mcpq.ops.bench.principals``: another principal's ``tasks/get`` latency while one
  principal floods past its creation rate; Redis memory under maximum-size creates.
- ``python -m mcpq.ops.bench.capacity``: tasks/s and CPU per task of one web process and of one
  worker process per pool kind; Redis (and RabbitMQ) CPU, command time and commands per task;
  a 3-primary Redis Cluster's split; the sizing derived from them; a worker against a bare Celery
  worker of the same pool kind and broker (``bare_celery``, ``capacity_bare``,
  ``capacity_versus``), and ``--profile``: where a worker's CPU goes, per thread
  (``thread_profile``, ``capacity_profile``).
- ``python -m mcpq.ops.bench.tracing_cost``: completed/s with tracing off against a build without
  tracing (``builds``) and with every trace sampled; the floor of what the SDK itself costs
  (``span_floor``).
- ``python -m mcpq.ops.bench.floor``: end-to-end latency against a bare server of the same parts.

The throughput benchmark's load generator and result are ``mcpq.ops.bench.loadgen`` (its MCP calls
``ops.bench.load``, its Redis costs per task ``ops.bench.costs``), its peer ``ops.bench.peer``,
the PSS of process trees ``mcpq.ops.bench.memory``, the CPU time of process trees and Redis servers
``mcpq.ops.bench.cpu``.

Their tools live in one tool module, ``mcpq.ops.bench.bench_tools``, which their stacks load through
``MCPQ_TOOLS``; the benchmark modules themselves are never imported by the stack.
"""
