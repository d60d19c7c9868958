"""A run's MCP state events (``task-input_required``, ``task-cancelled``, ``task-parked``) go out
in the consumer's process only while Celery's task events are on, through the consumer's own
dispatcher (``mcpq.workers.broker_watch.task_event_dispatcher``): never a dispatcher of their own
per event, and never from a forked pool process through the parent's connection."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pytest

from mcpq.workers import broker_watch


@dataclass
class Dispatcher:
    enabled: bool = True
    groups: set[str] | None = field(default_factory=lambda: {"worker"})


@dataclass
class Consumer:
    event_dispatcher: Any


@pytest.mark.parametrize(
    ("dispatcher", "sends"),
    [
        (Dispatcher(groups={"worker"}), False),  # heartbeats only: task events off
        (Dispatcher(groups={"worker", "task"}), True),  # Flower's enable_events
        (Dispatcher(groups=None), True),  # -E / MCPQ_TASK_EVENTS: every group
        (Dispatcher(enabled=False, groups=None), False),
        (None, False),  # before the consumer's Events step started
    ],
)
def test_sent_only_while_task_events_are_on(
    dispatcher: Dispatcher | None, sends: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(broker_watch, "_consumer", (os.getpid(), Consumer(dispatcher)))
    assert broker_watch.has_consumer()
    found = broker_watch.task_event_dispatcher()
    assert (found is dispatcher) if sends else found is None


def test_a_forked_pool_process_has_no_consumer_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    parent = os.getpid() + 1  # the consumer was made in another process
    consumer = Consumer(Dispatcher(groups=None))
    monkeypatch.setattr(broker_watch, "_consumer", (parent, consumer))
    assert not broker_watch.has_consumer()
    assert broker_watch.task_event_dispatcher() is None
