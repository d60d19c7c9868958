"""The one place that reads the environment.

Every knob of mcpq is a field of :class:`Settings`, built once at the edge by
:meth:`Settings.from_env` and passed down. ``docs/configuration.md`` lists each variable; a test
keeps the two in step.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from mcpq.shared.setting_values import (
    parse_amqp_queue_type,
    parse_auth_modes,
    parse_bool,
    parse_broker_url,
    parse_count,
    parse_csv,
    parse_limit,
    parse_non_negative,
    parse_optional_ttl_ms,
    parse_pool,
    parse_positive,
    parse_positive_int,
    parse_shards,
    parse_ttl_ms,
)

#: The bundled demo and conformance tools: what ``mcpq dev`` serves unless told otherwise.
DEFAULT_TOOLS = "mcpq.conformance_fixtures,mcpq.demo"


@dataclass(frozen=True)
class Settings:
    """Every mcpq setting, with its default."""

    redis_url: str = field(default="redis://127.0.0.1:6379/0", metadata={"env": "REDIS_URL"})
    #: Celery's broker when it is not the task store's Redis (RabbitMQ: ``amqp://``); empty:
    #: ``REDIS_URL`` is both.
    broker_url: str = field(
        default="", repr=False, metadata={"env": "CELERY_BROKER_URL", "parse": parse_broker_url}
    )
    #: RabbitMQ only: the type of the task queues (``quorum``: replicated, durable; ``classic``).
    amqp_queue_type: str = field(
        default="quorum", metadata={"env": "MCPQ_AMQP_QUEUE_TYPE", "parse": parse_amqp_queue_type}
    )
    #: RabbitMQ only: the workers' AMQP heartbeat (seconds; 0: none).
    amqp_heartbeat_s: int = field(
        default=30, metadata={"env": "MCPQ_AMQP_HEARTBEAT_S", "parse": parse_limit}
    )
    #: How long a worker keeps trying to reach its broker (and store) before it exits non-zero
    #: (3), at start and after losing it, so a platform restarts it; 0: at the first failure.
    broker_wait_s: float = field(
        default=60.0, metadata={"env": "MCPQ_BROKER_WAIT_S", "parse": parse_non_negative}
    )
    #: No default: a production server loads what it is told to (``mcpq dev`` and the tests
    #: name ``DEFAULT_TOOLS``, the bundled demo and conformance tools, themselves).
    tools: tuple[str, ...] = field(default=(), metadata={"env": "MCPQ_TOOLS", "parse": parse_csv})
    secret: str = field(default="", metadata={"env": "MCPQ_SECRET"})
    #: Keys sealing task payloads at rest (``mcpq.shared.sealing``), or ``plaintext``; checked by
    #: ``mcpq.ops.runtime.preflight``. Never shown (``repr``): it holds keys.
    data_keys: str = field(default="", repr=False, metadata={"env": "MCPQ_DATA_KEYS"})
    auth: tuple[str, ...] = field(
        default=(), metadata={"env": "MCPQ_AUTH", "parse": parse_auth_modes}
    )
    resource_url: str = field(default="", metadata={"env": "MCPQ_RESOURCE_URL"})
    oauth_issuer: str = field(default="", metadata={"env": "MCPQ_OAUTH_ISSUER"})
    oauth_jwks_url: str = field(default="", metadata={"env": "MCPQ_OAUTH_JWKS_URL"})
    oauth_audience: str = field(default="", metadata={"env": "MCPQ_OAUTH_AUDIENCE"})
    oauth_scopes: tuple[str, ...] = field(
        default=(), metadata={"env": "MCPQ_OAUTH_SCOPES", "parse": parse_csv}
    )
    oauth_algorithms: tuple[str, ...] = field(
        default=("RS256", "ES256", "PS256", "EdDSA"),
        metadata={"env": "MCPQ_OAUTH_ALGORITHMS", "parse": parse_csv},
    )
    jwks_cache_s: float = field(
        default=300.0, metadata={"env": "MCPQ_JWKS_CACHE_S", "parse": parse_non_negative}
    )
    max_open_tasks: int = field(
        default=100, metadata={"env": "MCPQ_MAX_OPEN_TASKS", "parse": parse_limit}
    )
    max_sync_calls: int = field(
        default=20, metadata={"env": "MCPQ_MAX_SYNC_CALLS", "parse": parse_limit}
    )
    create_rate: float = field(
        default=20.0, metadata={"env": "MCPQ_CREATE_RATE", "parse": parse_non_negative}
    )
    create_burst: int = field(
        default=40, metadata={"env": "MCPQ_CREATE_BURST", "parse": parse_limit}
    )
    key_prefix: str = field(default="mcpq", metadata={"env": "MCPQ_KEY_PREFIX"})
    #: Shards of the task store (``shared.store.keyspace``): 1 keeps every key on one Cluster slot
    #: (the key names of a single Redis); more spread tasks over a Redis Cluster's primaries.
    #: Fixed for the life of a store (changing it needs a drained store).
    store_shards: int = field(
        default=1, metadata={"env": "MCPQ_STORE_SHARDS", "parse": parse_shards}
    )
    #: ``REDIS_URL`` names a node of a Redis Cluster (any one: the others are discovered); the
    #: Celery broker must then be a separate server (``CELERY_BROKER_URL``,
    #: ``ops.runtime.preflight``).
    redis_cluster: bool = field(
        default=False, metadata={"env": "MCPQ_REDIS_CLUSTER", "parse": parse_bool}
    )
    default_ttl_ms: int | None = field(
        default=3_600_000, metadata={"env": "MCPQ_DEFAULT_TTL_MS", "parse": parse_optional_ttl_ms}
    )
    poll_interval_ms: int = field(
        default=1000, metadata={"env": "MCPQ_POLL_INTERVAL_MS", "parse": int}
    )
    sync_timeout_s: float = field(
        default=60.0, metadata={"env": "MCPQ_SYNC_TIMEOUT_S", "parse": float}
    )
    sync_ttl_ms: int = field(
        default=600_000, metadata={"env": "MCPQ_SYNC_TTL_MS", "parse": parse_ttl_ms}
    )
    #: Resource reads, prompt renders and completions run in the web process, on their own
    #: threads (``mcpq.frontend.user_code``): how long one may take, and how many run at once.
    read_timeout_s: float = field(
        default=10.0, metadata={"env": "MCPQ_READ_TIMEOUT_S", "parse": parse_positive}
    )
    read_threads: int = field(
        default=8, metadata={"env": "MCPQ_READ_THREADS", "parse": parse_positive_int}
    )
    require_task_name: bool = field(
        default=False, metadata={"env": "MCPQ_REQUIRE_TASK_NAME", "parse": parse_bool}
    )
    stream_max_s: float = field(
        default=3600.0, metadata={"env": "MCPQ_STREAM_MAX_S", "parse": parse_non_negative}
    )
    sse_keepalive_s: float = field(
        default=15.0, metadata={"env": "MCPQ_SSE_KEEPALIVE_S", "parse": float}
    )
    session_ttl_s: float = field(
        default=3600.0, metadata={"env": "MCPQ_SESSION_TTL_S", "parse": float}
    )
    allowed_origins: tuple[str, ...] = field(
        default=(), metadata={"env": "MCPQ_ALLOWED_ORIGINS", "parse": parse_csv}
    )
    #: ``Host`` names ``/mcp`` answers to (``name`` or ``name:port``; ``*``: any); empty: the
    #: loopback names. The host of ``MCPQ_RESOURCE_URL`` is always allowed (DNS rebinding).
    allowed_hosts: tuple[str, ...] = field(
        default=(), metadata={"env": "MCPQ_ALLOWED_HOSTS", "parse": parse_csv}
    )
    #: Written by the web's gunicorn worker from the addresses gunicorn binds, never by hand:
    #: loopback ``Origin``s (``http://localhost:*``) are accepted only on a loopback-only bind.
    loopback_bind: bool = field(
        default=False, metadata={"env": "MCPQ_LOOPBACK_BIND", "parse": parse_bool}
    )
    #: The uvicorn worker's bounds on a request's head (request line and headers) and on how
    #: long a client may take to send its head and its body (slow clients hold connections);
    #: 0 turns one off.
    max_header_bytes: int = field(
        default=32 * 1024, metadata={"env": "MCPQ_MAX_HEADER_BYTES", "parse": parse_limit}
    )
    max_headers: int = field(
        default=100, metadata={"env": "MCPQ_MAX_HEADERS", "parse": parse_limit}
    )
    header_timeout_s: float = field(
        default=10.0, metadata={"env": "MCPQ_HEADER_TIMEOUT_S", "parse": parse_non_negative}
    )
    body_timeout_s: float = field(
        default=30.0, metadata={"env": "MCPQ_BODY_TIMEOUT_S", "parse": parse_non_negative}
    )
    max_body_bytes: int = field(
        default=4 * 1024 * 1024, metadata={"env": "MCPQ_MAX_BODY_BYTES", "parse": int}
    )
    max_arguments_bytes: int = field(
        default=256 * 1024, metadata={"env": "MCPQ_MAX_ARGUMENTS_BYTES", "parse": int}
    )
    max_capabilities_bytes: int = field(
        default=16 * 1024, metadata={"env": "MCPQ_MAX_CAPABILITIES_BYTES", "parse": int}
    )
    max_answer_bytes: int = field(
        default=256 * 1024, metadata={"env": "MCPQ_MAX_ANSWER_BYTES", "parse": int}
    )
    max_answers: int = field(default=64, metadata={"env": "MCPQ_MAX_ANSWERS", "parse": int})
    max_result_bytes: int = field(
        default=1024 * 1024, metadata={"env": "MCPQ_MAX_RESULT_BYTES", "parse": int}
    )
    max_step_bytes: int = field(
        default=1024 * 1024, metadata={"env": "MCPQ_MAX_STEP_BYTES", "parse": int}
    )
    max_message_chars: int = field(
        default=1000, metadata={"env": "MCPQ_MAX_MESSAGE_CHARS", "parse": int}
    )
    max_json_depth: int = field(default=64, metadata={"env": "MCPQ_MAX_JSON_DEPTH", "parse": int})
    mrtr_state_ttl_s: int = field(
        default=3600, metadata={"env": "MCPQ_MRTR_STATE_TTL_S", "parse": int}
    )
    input_hold_s: float = field(default=30.0, metadata={"env": "MCPQ_INPUT_HOLD_S", "parse": float})
    #: How late a tool's status report (``ctx.report``) is written; a run that ends sooner
    #: writes none (``mcpq.workers.reports``). 0: each report at once.
    report_delay_ms: float = field(
        default=100.0, metadata={"env": "MCPQ_REPORT_DELAY_MS", "parse": parse_non_negative}
    )
    #: How often a process adds its ``created`` and outcome counts to the stats hashes
    #: (``mcpq.shared.store.tally``). 0: each is counted inside its create or finish script.
    stats_flush_ms: float = field(
        default=1000.0, metadata={"env": "MCPQ_STATS_FLUSH_MS", "parse": parse_non_negative}
    )
    cancel_grace_s: float = field(
        default=5.0, metadata={"env": "MCPQ_CANCEL_GRACE_S", "parse": float}
    )
    lease_s: float = field(default=5.0, metadata={"env": "MCPQ_LEASE_S", "parse": float})
    max_run_s: float = field(
        default=3600.0, metadata={"env": "MCPQ_MAX_RUN_S", "parse": parse_non_negative}
    )
    #: Runs of one task that may lose their worker (lease expired unfinished) before the task
    #: fails instead of running again (a tool that kills its worker); 0: no limit.
    max_runs: int = field(default=3, metadata={"env": "MCPQ_MAX_RUNS", "parse": parse_limit})
    #: Runs of their own (``mcpq.workers.solo``) an io pool process runs at once; more wait.
    solo_concurrency: int = field(
        default=4, metadata={"env": "MCPQ_SOLO_CONCURRENCY", "parse": parse_positive_int}
    )
    unclaimed_after_s: float = field(
        default=30.0, metadata={"env": "MCPQ_UNCLAIMED_AFTER_S", "parse": float}
    )
    requeue_unstarted_s: float = field(
        default=300.0, metadata={"env": "MCPQ_REQUEUE_UNSTARTED_S", "parse": float}
    )
    sweep_interval_s: float = field(
        default=2.0, metadata={"env": "MCPQ_SWEEP_INTERVAL_S", "parse": float}
    )
    redis_timeout_s: float = field(
        default=2.0, metadata={"env": "MCPQ_REDIS_TIMEOUT_S", "parse": float}
    )
    #: The sentinels' own password (``requirepass`` in sentinel.conf), for a
    #: ``redis+sentinel://`` ``REDIS_URL`` (``mcpq.shared.redis_urls``); the URL's is the servers'.
    redis_sentinel_password: str = field(
        default="", repr=False, metadata={"env": "MCPQ_REDIS_SENTINEL_PASSWORD"}
    )
    #: Replicas that must hold a create or an answer before the client is told (``WAIT``);
    #: 0: acknowledged once the primary has it (``mcpq.shared.store.aio``).
    redis_min_replicas: int = field(
        default=0, metadata={"env": "MCPQ_REDIS_MIN_REPLICAS", "parse": parse_limit}
    )
    #: How long such a write waits for its replicas before the client gets 503 (milliseconds).
    redis_replica_wait_ms: int = field(
        default=1000, metadata={"env": "MCPQ_REDIS_REPLICA_WAIT_MS", "parse": parse_ttl_ms}
    )
    default_queue: str = field(default="mcpq", metadata={"env": "MCPQ_DEFAULT_QUEUE"})
    port: int = field(default=8000, metadata={"env": "PORT", "parse": int})
    web_concurrency: int = field(default=2, metadata={"env": "WEB_CONCURRENCY", "parse": int})
    worker_concurrency: int = field(
        default=4, metadata={"env": "MCPQ_WORKER_CONCURRENCY", "parse": int}
    )
    worker_pool: str = field(
        default="io", metadata={"env": "MCPQ_WORKER_POOL", "parse": parse_pool}
    )
    io_concurrency: int = field(default=100, metadata={"env": "MCPQ_IO_CONCURRENCY", "parse": int})
    #: ``async def`` tools' runs an io worker process holds on its run loop, each without a
    #: thread (``mcpq.workers.run_loop``); 0: each on its job's thread, as a sync tool's.
    async_runs: int = field(default=1000, metadata={"env": "MCPQ_ASYNC_RUNS", "parse": parse_count})
    #: How long one step of a run may hold the run loop before the loop is left to that run and
    #: the others move to a new one (``mcpq.workers.run_loop``); 0: never.
    loop_stall_s: float = field(
        default=1.0, metadata={"env": "MCPQ_LOOP_STALL_S", "parse": parse_non_negative}
    )
    worker_queues: tuple[str, ...] = field(
        default=("mcpq",), metadata={"env": "MCPQ_QUEUES", "parse": parse_csv}
    )
    worker_metrics_port: int = field(
        default=0, metadata={"env": "MCPQ_WORKER_METRICS_PORT", "parse": int}
    )
    #: Loopback by default: the worker's metrics have no login.
    worker_metrics_address: str = field(
        default="127.0.0.1", metadata={"env": "MCPQ_WORKER_METRICS_ADDRESS"}
    )
    #: The bearer token the web tier's ``/metrics`` asks for; unset, ``/metrics`` is off (404).
    metrics_token: str = field(default="", repr=False, metadata={"env": "MCPQ_METRICS_TOKEN"})
    #: Where ``mcpq flower`` listens: loopback unless told otherwise, and never anywhere else
    #: without Flower's own login (``FLOWER_BASIC_AUTH`` or ``FLOWER_AUTH``), which Flower reads
    #: itself; mcpq reads them only to check that one is set.
    flower_address: str = field(default="127.0.0.1", metadata={"env": "MCPQ_FLOWER_ADDRESS"})
    flower_basic_auth: str = field(default="", repr=False, metadata={"env": "FLOWER_BASIC_AUTH"})
    flower_auth: str = field(default="", repr=False, metadata={"env": "FLOWER_AUTH"})
    #: ``mcpq call`` / ``mcpq task``: the MCP endpoint they talk to (the local dev server by
    #: default) and the bearer token they send (an API key or an OAuth access token).
    client_url: str = field(default="http://127.0.0.1:8000/mcp", metadata={"env": "MCPQ_URL"})
    client_token: str = field(default="", repr=False, metadata={"env": "MCPQ_TOKEN"})
    prometheus_multiproc_dir: str = field(default="", metadata={"env": "PROMETHEUS_MULTIPROC_DIR"})
    ready_worker_window_s: float = field(
        default=15.0, metadata={"env": "MCPQ_READY_WORKER_WINDOW_S", "parse": float}
    )
    dyno: str = field(default="", metadata={"env": "DYNO"})
    honcho_process_name: str = field(default="", metadata={"env": "HONCHO_PROCESS_NAME"})
    redis_server: str = field(default="", metadata={"env": "MCPQ_REDIS_SERVER"})
    task_events: bool = field(
        default=False, metadata={"env": "MCPQ_TASK_EVENTS", "parse": parse_bool}
    )
    redis_tls_verify: bool = field(
        default=True, metadata={"env": "MCPQ_REDIS_TLS_VERIFY", "parse": parse_bool}
    )
    #: A PEM CA bundle trusted for ``rediss://`` besides the system's (``mcpq.shared.redis_tls``).
    redis_tls_ca: str = field(default="", metadata={"env": "MCPQ_REDIS_TLS_CA"})
    log_format: str = field(default="json", metadata={"env": "MCPQ_LOG_FORMAT"})
    log_level: str = field(default="INFO", metadata={"env": "MCPQ_LOG_LEVEL"})
    server_name: str = field(default="mcpq", metadata={"env": "MCPQ_SERVER_NAME"})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            name = str(f.metadata["env"])
            if name in env:
                parse = f.metadata.get("parse", str)
                try:
                    values[f.name] = parse(env[name])
                except ValueError as exc:
                    raise ValueError(f"{name}: {exc}") from None
        return cls(**values)

    @classmethod
    def env_names(cls) -> list[str]:
        return [str(f.metadata["env"]) for f in fields(cls)]

    def concurrency(self, pool: str) -> int:
        """Runs at once per worker process: threads of an ``io`` pool, processes of a ``cpu``
        one."""
        return self.io_concurrency if pool == "io" else self.worker_concurrency

    @property
    def auth_open(self) -> bool:
        """No authentication: unset, or ``MCPQ_AUTH=none`` (an explicit choice)."""
        return not self.auth or self.auth == ("none",)

    @property
    def audience(self) -> str:
        """The ``aud`` an access token must carry: this server's resource URL by default."""
        return self.oauth_audience or self.resource_url

    @property
    def instance(self) -> str:
        """This process's name in its formation, when the platform gives one (``worker.2``)."""
        return self.dyno or self.honcho_process_name

    @property
    def visibility_timeout_s(self) -> int:
        """Kombu redelivers unacked messages after this; far above any run (leases recover)."""
        # Derived here, not a setting: a shorter one would re-run long tools while they run.
        return 7 * 24 * 3600
