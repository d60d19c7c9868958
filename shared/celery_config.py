"""Celery settings shared by the producer (web) and the consumers (workers), as plain data.

JSON only, everywhere: a message in any other format is refused, so whoever can write to Redis
cannot get code run in a worker. Knobs derived from ours (the visibility timeout) cannot drift.
"""

from __future__ import annotations

import ssl
from typing import Any
from urllib.parse import urlsplit

from mcpq.shared import redis_urls
from mcpq.shared.redis_tls import redis_tls
from mcpq.shared.settings import Settings

#: URL schemes of an AMQP broker (RabbitMQ), served by kombu's py-amqp transport.
AMQP_SCHEMES = ("amqp://", "amqps://", "pyamqp://")


def broker_is_store(settings: Settings) -> bool:
    """Whether Celery's broker is the task store's Redis (``CELERY_BROKER_URL`` unset, or the
    same as ``REDIS_URL``): then a create may push its run's message in its own script, and
    workers may leave recovery of taken messages to the store."""
    if settings.broker_url and settings.broker_url != settings.redis_url:
        return False
    schemes = ("redis://", "rediss://", "unix://", "redis+sentinel://", "rediss+sentinel://")
    return settings.redis_url.startswith(schemes)


def broker_sentinel(settings: Settings) -> redis_urls.SentinelUrl | None:
    """The broker's Sentinel URL, parsed, when Celery reaches its Redis through Sentinel (the
    store's ``REDIS_URL``, or a ``CELERY_BROKER_URL`` of that form); else ``None``."""
    if broker_is_store(settings):
        url = redis_tls(settings).url
        return redis_urls.parse_sentinel(url) if redis_urls.is_sentinel(url) else None
    if redis_urls.is_sentinel(settings.broker_url):
        return redis_urls.parse_sentinel(settings.broker_url, "CELERY_BROKER_URL", tls=False)
    return None


def broker_url(settings: Settings) -> str:
    """The URL Celery connects to: the store's Redis (with its TLS policy), or
    ``CELERY_BROKER_URL``; through Sentinel, in kombu's form (``sentinel://…;sentinel://…``)."""
    if (sentinel := broker_sentinel(settings)) is not None:
        return redis_urls.kombu_url(sentinel)
    return redis_tls(settings).url if broker_is_store(settings) else settings.broker_url


def broker_origin(settings: Settings) -> tuple[str, str]:
    """The broker's URL as configured and the variable it came from, for messages (shown
    through ``redis_urls.redact_url``; :func:`broker_url` is the form kombu is given)."""
    if broker_is_store(settings):
        return settings.redis_url, "REDIS_URL"
    return settings.broker_url, "CELERY_BROKER_URL"


def connection_problem(exc: BaseException, url: str = "") -> str:
    """Why a server could not be reached, in a few words: the OS's reason (``Connection
    refused``) when an exception in the chain carries one (redis-py and kombu wrap it), else
    the exception's own text on one line; never ``url``'s password."""
    seen: set[int] = set()
    current: BaseException | None = exc
    reason = ""
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.strerror:
            reason = str(current.strerror)
            break
        current = current.__cause__ or current.__context__
    reason = reason or " ".join(str(exc).split())[:200] or type(exc).__name__
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    # No client's error is known to echo the password; never print it if one does.
    return reason.replace(password, "***") if password else reason


def unreachable(what: str, url: str, setting: str, wait_s: float, exc: BaseException) -> str:
    """The one line of a worker giving up on ``what`` (``the broker``, ``the task store``):
    where (password hidden), for how long, why, and what to check."""
    return (
        f"cannot reach {what} at {redis_urls.redact_url(url)} for {wait_s:g} s "
        f"({connection_problem(exc, url)}): check {setting} and that the server is running"
    )


def _sentinel_options(settings: Settings) -> dict[str, Any]:
    """kombu's Sentinel transport options (the service, how to talk to the sentinels)."""
    sentinel = broker_sentinel(settings)
    if sentinel is None:
        return {}
    tls = redis_tls(settings).redis_py() if sentinel.tls else {}
    return redis_urls.kombu_options(
        sentinel, settings.redis_sentinel_password, settings.redis_timeout_s, tls
    )


def broker_is_amqp(settings: Settings) -> bool:
    """Whether Celery's broker is RabbitMQ (``CELERY_BROKER_URL=amqp://…``)."""
    return not broker_is_store(settings) and settings.broker_url.startswith(AMQP_SCHEMES)


def _broker_ssl(settings: Settings) -> dict[str, Any] | None:
    if broker_is_store(settings):
        # Always set for rediss:// (kombu told nothing does not verify), never for redis://
        # (there a dict would turn TLS on). The URL loses its ssl_cert_reqs: kombu would let it
        # replace these options whole, CA and host-name check included.
        return redis_tls(settings).kombu()
    if settings.broker_url.startswith("amqps://"):
        # py-amqp told only ``ssl=True`` checks the chain but not the host name; None here is
        # filled with the URL's host by kombu. CAs: the system's (and SSL_CERT_FILE).
        return {"cert_reqs": ssl.CERT_REQUIRED, "server_hostname": None}
    return None


def _transport_options(settings: Settings) -> dict[str, Any]:
    if broker_is_amqp(settings):
        # Publisher confirms: a publish returns once RabbitMQ has the message (a durable
        # message on a quorum queue: replicated and on disk), and a refused one raises instead
        # of vanishing, so the producer marks a run enqueued only when it really is.
        return {"confirm_publish": True}
    # Redis: far above any run: recovery is ours (leases), not kombu's redelivery.
    return {
        "visibility_timeout": settings.visibility_timeout_s,
        "socket_timeout": 5,
        "socket_connect_timeout": 5,
        **_sentinel_options(settings),
    }


#: How long a publish waits for RabbitMQ's confirm before it counts as failed (kombu then
#: reconnects and retries, or the caller leaves the run to the sweeper): a broker that stops
#: answering must hold neither a request nor the sweeper.
CONFIRM_TIMEOUT_S = 5.0


def publish_options(settings: Settings) -> dict[str, Any]:
    """Celery's options for every publish of a run (``mcpq.shared.jobs.send_run``)."""
    return {"confirm_timeout": CONFIRM_TIMEOUT_S} if broker_is_amqp(settings) else {}


def _amqp_queues(settings: Settings) -> dict[str, Any]:
    """RabbitMQ's queue declarations (nothing for Redis, where a queue is a list)."""
    if not broker_is_amqp(settings):
        return {}
    queue_type = settings.amqp_queue_type
    return {
        # Every task queue, the default one and those tools name (created when first used),
        # of one type: web, sweeper and workers declare them alike (RabbitMQ refuses a second
        # declaration with other arguments).
        "task_default_queue_type": queue_type,
        "task_create_missing_queue_type": queue_type,
        # Quorum queues have no global QoS: the workers' prefetch becomes per consumer.
        "worker_detect_quorum_queues": True,
        # With quorum queues Celery declares its 28 native delayed-delivery queues at worker
        # start; mcpq never sends ETA/countdown runs, so they stay empty: classic, the cheap
        # kind (a quorum queue is a Raft group of its own).
        "broker_native_delayed_delivery_queue_type": "classic",
        # A dead broker (or a silent network) is noticed by the workers within two beats.
        "broker_heartbeat": settings.amqp_heartbeat_s,
    }


def celery_config(settings: Settings) -> dict[str, Any]:
    return {
        "broker_use_ssl": _broker_ssl(settings),
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
        # Unbounded here (publishers keep their own retry policies); a worker's consumer
        # bounds its reconnects by MCPQ_BROKER_WAIT_S instead, then exits non-zero for its
        # platform to restart it (mcpq.workers.broker_watch).
        "broker_connection_max_retries": None,
        "broker_transport_options": _transport_options(settings),
        **_amqp_queues(settings),
        "worker_hijack_root_logger": False,
        "worker_redirect_stdouts": False,  # a stray print must not become many log lines
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "enable_utc": True,
    }
