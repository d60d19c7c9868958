"""Celery settings shared by the producer (web) and the consumers (workers), as plain data.

JSON only, everywhere: a message in any other format is refused, so whoever can write to Redis
cannot get code run in a worker. Knobs derived from ours (the visibility timeout) cannot drift.
"""

from __future__ import annotations

from typing import Any

from shared.redis_tls import redis_tls
from shared.settings import Settings


def broker_is_store(settings: Settings) -> bool:
    """Whether Celery's broker is the task store's Redis (``CELERY_BROKER_URL`` unset, or the
    same as ``REDIS_URL``): then a create may push its run's message in its own script, and
    workers may leave recovery of taken messages to the store."""
    if settings.broker_url and settings.broker_url != settings.redis_url:
        return False
    return settings.redis_url.startswith(("redis://", "rediss://", "unix://"))


def broker_url(settings: Settings) -> str:
    """The URL Celery connects to: the store's Redis (with its TLS policy), or
    ``CELERY_BROKER_URL``."""
    return redis_tls(settings).url if broker_is_store(settings) else settings.broker_url


def celery_config(settings: Settings) -> dict[str, Any]:
    tls = redis_tls(settings)
    return {
        # Always set for rediss:// (kombu told nothing does not verify), never for redis://
        # (there a dict would turn TLS on). The URL loses its ssl_cert_reqs: kombu would let it
        # replace these options whole, CA and host-name check included.
        "broker_use_ssl": tls.kombu() if broker_is_store(settings) else None,
        "broker_url": broker_url(settings),
        # Task state lives in our store; Celery's result backend would be a second truth.
        "result_backend": None,
        "task_ignore_result": True,
        # JSON in and out: whoever can write to Redis must not get code run in a worker.
        "task_serializer": "json",
        "result_serializer": "json",
        "event_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        # A message is acked when its run ends, and requeued at once if the pool process
        # dies; a run already claimed is fenced, so a second delivery never runs it twice.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        # One message reserved per pool slot: a long run does not hold others hostage.
        "worker_prefetch_multiplier": 1,
        # Celery's task events cost a PUBLISH each (sent, received, started, succeeded): off
        # unless asked for. Flower turns the workers' on when it starts (its enable_events);
        # MCPQ_TASK_EVENTS=1 sends them from the start, "task-sent" from the web tier too.
        "worker_send_task_events": settings.task_events,
        "task_send_sent_event": settings.task_events,
        "task_default_queue": settings.default_queue,
        "task_create_missing_queues": True,
        "broker_connection_retry_on_startup": True,
        "broker_connection_retry": True,
        "broker_connection_max_retries": None,  # a Redis outage never stops a worker for good
        "broker_transport_options": {
            # Far above any run: recovery is ours (leases), not kombu's redelivery.
            "visibility_timeout": settings.visibility_timeout_s,
            "socket_timeout": 5,
            "socket_connect_timeout": 5,
        },
        "worker_hijack_root_logger": False,
        "worker_redirect_stdouts": False,  # a stray print must not become many log lines
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "enable_utc": True,
    }
