"""A ``threading.Event`` that costs a few bytes until a thread waits on it.

A run holds several events (its cancel seen, its watch's "changed", its subscription's
confirmation), and an io worker may hold 10,000 runs: a ``threading.Event`` is about a kilobyte
(its ``Condition``, that condition's lock and its deque of waiters), 3 MiB per thousand runs for
events most of them never wait on (a run on the run loop only sets and tests them). A
:class:`Flag` is a bool until the first :meth:`wait`, which makes the event it waits on.
"""

from __future__ import annotations

import threading


class Flag:
    """``set``, ``clear``, ``is_set`` and ``wait``, as ``threading.Event``'s."""

    __slots__ = ("_event", "_value")

    # NOTE: one lock for every flag of the process, held for a few bytecodes (never while
    # waiting): a lock of each flag's own would be most of the event's size again. It orders a
    # set against the waiter that makes the event: either the waiter sees the value, or the
    # setter sees the event and sets it, so no set is lost.
    _guard = threading.Lock()

    def __init__(self) -> None:
        self._value = False
        self._event: threading.Event | None = None

    def is_set(self) -> bool:
        return self._value  # one attribute read: no lock needed

    def set(self) -> None:
        with Flag._guard:
            self._value = True
            if self._event is not None:
                self._event.set()

    def clear(self) -> None:
        with Flag._guard:
            self._value = False
            if self._event is not None:
                self._event.clear()

    def wait(self, timeout: float | None = None) -> bool:
        """Until the flag is set or ``timeout`` passes; ``True`` if it is set."""
        with Flag._guard:
            if self._value:
                return True
            event = self._event
            if event is None:
                event = self._event = threading.Event()
        return event.wait(timeout)
