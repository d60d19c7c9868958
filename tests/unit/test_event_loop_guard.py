"""``mcpq.workers.event_loop_guard.EventLoopGuard``: which reconnects get one attempt on the
worker's event loop, and the quiet after one failed (the live faults are the broker-loss tests
in ``tests/integration``)."""

from __future__ import annotations

import threading

import pytest
from celery.worker.consumer import Consumer

from mcpq.workers import broker_watch, event_loop_guard
from mcpq.workers.event_loop_guard import BrokerLostOnEventLoop, EventLoopGuard


class Connection:
    """A kombu Connection as the guard sees one."""

    recoverable_connection_errors = (ConnectionError,)


class Connects:
    """A transport's ``establish_connection``: counts its attempts, fails while told to."""

    def __init__(self) -> None:
        self.attempts = 0
        self.failing = False

    def __call__(self) -> str:
        self.attempts += 1
        if self.failing:
            raise ConnectionRefusedError("refused")
        return "established"


@pytest.fixture
def guard() -> EventLoopGuard:
    guard = EventLoopGuard()
    guard.on_loop()  # this thread is the loop's
    return guard


def test_a_connection_that_connected_before_gets_one_attempt_then_the_loop_is_left_alone(
    guard: EventLoopGuard, monkeypatch: pytest.MonkeyPatch
) -> None:
    dispatcher, connects = Connection(), Connects()
    assert guard.establish(dispatcher, connects) == "established"  # its first connect: kombu's
    connects.failing = True
    with pytest.raises(BrokerLostOnEventLoop):
        guard.establish(dispatcher, connects)
    assert connects.attempts == 2
    # The quiet: no attempt at all (each would block the loop for a connect timeout)...
    for _ in range(3):
        with pytest.raises(BrokerLostOnEventLoop):
            guard.establish(dispatcher, connects)
    assert connects.attempts == 2
    # ...until the consumer has reached the broker again,
    guard.consumer(Connection())
    connects.failing = False
    assert guard.establish(dispatcher, connects) == "established"
    assert connects.attempts == 3
    # or the quiet has passed.
    connects.failing = True
    with pytest.raises(BrokerLostOnEventLoop):
        guard.establish(dispatcher, connects)
    monkeypatch.setattr(event_loop_guard, "QUIET_S", 0.0)
    with pytest.raises(BrokerLostOnEventLoop):  # the 30 s quiet already set still holds
        guard.establish(dispatcher, connects)
    assert connects.attempts == 4
    guard.consumer(Connection())
    with pytest.raises(BrokerLostOnEventLoop):
        guard.establish(dispatcher, connects)
    with pytest.raises(BrokerLostOnEventLoop):  # quiet of 0 s: it tries every time
        guard.establish(dispatcher, connects)
    assert connects.attempts == 6


def test_the_consumer_s_own_a_new_one_s_and_another_thread_s_reconnects_are_kombu_s(
    guard: EventLoopGuard,
) -> None:
    consumer, connects = Connection(), Connects()
    guard.establish(consumer, connects)
    guard.consumer(consumer)
    connects.failing = True
    with pytest.raises(ConnectionRefusedError):  # kombu's own error: kombu's retry goes on
        guard.establish(consumer, connects)
    with pytest.raises(ConnectionRefusedError):  # never connected: its first connect, kombu's
        guard.establish(Connection(), connects)
    other, off_loop = Connection(), Connects()
    guard.establish(other, off_loop)
    off_loop.failing = True
    raised: list[BaseException] = []

    def elsewhere() -> None:
        try:
            guard.establish(other, off_loop)
        except BaseException as exc:  # (the test reads which one)
            raised.append(exc)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert [type(exc) for exc in raised] == [ConnectionRefusedError]


def test_the_consumer_tells_the_guard_which_connection_is_its_own(
    guard: EventLoopGuard, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``broker_watch.BoundedConsumer.connect``: the connection it made is the consumer's, so
    its reconnects keep kombu's retries (bounded by the consumer), and the quiet ends."""
    made = Connection()
    monkeypatch.setattr(broker_watch, "EVENT_LOOP", guard)
    monkeypatch.setattr(Consumer, "connect", lambda self: made)
    consumer = object.__new__(broker_watch.BoundedConsumer)  # (no worker: connect() alone)
    consumer.hub = object()  # a consumer on the event loop
    guard.connected(made)
    assert guard.single_attempt(made)  # a connection that connected before, on the loop
    dispatcher, connects = Connection(), Connects()
    guard.establish(dispatcher, connects)
    connects.failing = True
    with pytest.raises(BrokerLostOnEventLoop):  # its one attempt failed: the quiet begins
        guard.establish(dispatcher, connects)
    assert consumer.connect() is made
    assert not guard.single_attempt(made)
    connects.failing = False  # the quiet is over: the dispatcher tries (and reaches it)
    assert guard.establish(dispatcher, connects) == "established"
