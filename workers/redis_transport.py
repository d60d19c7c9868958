"""The workers' kombu transport on a Redis broker: kombu's own, without its Redis-side ack
emulation, because the task store already does what that emulation is for.

kombu's Redis transport emulates acks: every message a worker takes is written to an
``unacked`` hash and index (``MULTI ZADD HSET EXEC``) and deleted again on ack (``MULTI ZREM
HDEL EXEC``), so that a message held by a worker that dies is restored after the visibility
timeout. That is eight commands per run, for a recovery mcpq never uses: the visibility
timeout is a week (``mcpq.shared.celery_config``), and a task's run is recovered by the store
instead: the task stays on the store's unclaimed watch list until a run claims it (the
sweeper sends its message again otherwise), and once claimed its lease covers it.

So this transport keeps the taken messages in memory only, which is all Celery's flow control
(prefetch) needs, and pushes one back onto its queue itself when it must go back: rejected with
requeue (a prefork child died, ``task_reject_on_worker_lost``) or still unstarted when the
worker shuts down. A worker killed outright loses the messages it held; their tasks are sent
again by the sweeper (``MCPQ_REQUEUE_UNSTARTED_S`` after their last send), or resume from
their lease.

A connection of this transport never holds the worker's event loop in a reconnect loop: see
``mcpq.workers.event_loop_guard`` (the RabbitMQ transport has the same guard).
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis
from kombu.transport import virtual

from mcpq.workers.event_loop_guard import GuardedReconnects


class MemoryQoS(kombu_redis.QoS):
    """Prefetch accounting in memory (kombu's generic QoS), nothing in Redis."""

    def append(self, message: Any, delivery_tag: str) -> None:
        virtual.QoS.append(self, message, delivery_tag)

    def ack(self, delivery_tag: str) -> None:
        virtual.QoS.ack(self, delivery_tag)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        # With requeue: back at the head of its queue (the generic QoS calls the channel's
        # _restore_at_beginning, below), then forgotten.
        virtual.QoS.reject(self, delivery_tag, requeue=requeue)

    def restore_unacked(self, client: Any = None) -> None:
        # At shutdown: every message taken and not acked goes back (the channel's _restore).
        virtual.QoS.restore_unacked(self)

    def restore_visible(self, *args: Any, **kwargs: Any) -> None:
        """Nothing is ever in kombu's unacked set (its periodic scan would only cost commands)."""


class Channel(kombu_redis.Channel):
    QoS = MemoryQoS

    def _restore(self, message: Any, leftmost: bool = False) -> None:
        """Push a taken message back onto its queue, from memory (kombu's own reads it from
        the unacked hash this transport never writes)."""
        info = message.delivery_info
        with self.conn_or_acquire() as client:
            pipe = client.pipeline()
            self._do_restore_message(  # type: ignore[attr-defined]  # (not in stubs)
                message._raw, info["exchange"], info["routing_key"], pipe, leftmost
            )
            pipe.execute()


class SentinelChannel(Channel, kombu_redis.SentinelChannel):
    """The same channel on a Redis reached through Sentinel: kombu's ``SentinelChannel`` finds
    the primary (and finds it again after a failover); acks stay in memory as above."""


class Transport(GuardedReconnects, kombu_redis.Transport):
    Channel = Channel

    def __init__(self, client: Any, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        # Through Sentinel when the broker options name the service (``mcpq.shared.celery_config``
        # sets ``master_name`` for a ``redis+sentinel://`` URL): one transport name for the
        # workers either way, as kombu's ``SentinelTransport`` differs only in its channel.
        if (client.transport_options or {}).get("master_name"):
            self.Channel = SentinelChannel
            self.default_port = kombu_redis.SentinelTransport.default_port


#: Celery's ``broker_transport`` for this transport.
TRANSPORT = f"{__name__}:Transport"
