"""mcpq's worker consumer runs Celery's steps but Gossip (as ``--without-gossip`` would): mcpq's
workers never read each other's events, and Celery's Gossip step failed to stop after a lost
broker connection, an error with a traceback at every Redis outage."""

from __future__ import annotations

from celery.worker.consumer import Consumer

from mcpq.workers.broker_watch import BoundedConsumer


def test_the_consumer_has_every_step_of_celery_s_but_gossip() -> None:
    ours = set(BoundedConsumer.Blueprint.default_steps)
    celery = set(Consumer.Blueprint.default_steps)
    assert celery - ours == {"celery.worker.consumer.gossip:Gossip"}
    assert ours <= celery
