"""The ``created`` and outcome counters of a process, added to the stats hashes in one round trip
every ``MCPQ_STATS_FLUSH_MS`` instead of one command inside every create and every finish.

The scripts still decide what to count (a create that was refused, a finish that was fenced out,
counts nothing): the store adds to this tally only after its script said OK. A background
thread writes what accumulated with one pipeline of ``HINCRBY`` (one per counter that moved,
whatever the number of tasks), with a client of its own, so neither the web tier's event loop
nor a run ever waits for it; what it could not write (Redis unreachable) is kept for the next
round. The process writes the rest when it exits (``atexit``: a graceful stop of gunicorn or
Celery). What is lost is a killed process's last interval of counts, at most: the counters
can lag the tasks by that much, never count one twice. ``MCPQ_STATS_FLUSH_MS=0`` counts inside
the scripts again (exact, two more commands per task).

The gauges (``state:*``, ``parked``, ``inputs``) and the rare counters (``cancelled``,
``poisoned``) stay inside their scripts.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable

import redis

log = logging.getLogger("mcpq.store")

Counts = dict[tuple[str, str], int]


class StatsTally:
    """Counters by (stats hash, field), written by a daemon thread every ``every_s``."""

    def __init__(self, client: Callable[[], redis.Redis], every_s: float) -> None:
        self._connect = client
        self._client: redis.Redis | None = None
        self._every_s = every_s
        self._lock = threading.Lock()
        self._counts: Counts = {}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def add(self, key: str, field: str, n: int = 1) -> None:
        with self._lock:
            self._counts[key, field] = self._counts.get((key, field), 0) + n
            if self._thread is None:
                # Started by the first count, in the process that counts (never across a fork).
                self._thread = threading.Thread(target=self._loop, name="mcpq-stats", daemon=True)
                self._thread.start()
                atexit.register(self.close)

    def pending(self) -> Counts:
        with self._lock:
            return dict(self._counts)

    def flush(self) -> bool:
        """Write what accumulated; False (and kept for the next round) when Redis fails."""
        return self._write(last=False)

    def close(self) -> None:
        """The last write (at exit, or when the store closes): what it cannot write is lost."""
        self._stop.set()
        atexit.unregister(self.close)
        self._write(last=True)

    def _write(self, *, last: bool) -> bool:
        with self._lock:
            counts, self._counts = self._counts, {}
        if not counts:
            return True
        try:
            if self._client is None:
                self._client = self._connect()
            pipe = self._client.pipeline(transaction=False)
            for (key, field), n in counts.items():
                pipe.hincrby(key, field, n)
            pipe.execute()
            return True
        except redis.RedisError as exc:
            cause = type(exc).__name__
            if last:
                log.warning(
                    "%d stats counts lost: Redis failed their last write (%s)",
                    sum(counts.values()),
                    cause,
                )
                return False
            # Put back: a count is written once, late, or (the process killed first) not at all.
            with self._lock:
                for name, n in counts.items():
                    self._counts[name] = self._counts.get(name, 0) + n
            log.warning("stats counters not written yet: %s", cause)
            return False

    def _loop(self) -> None:
        while not self._stop.wait(self._every_s):
            self.flush()
