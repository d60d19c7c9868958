"""`mcpq dev` watches a Redis of the developer's (``REDIS_URL``) while it runs, and says in one
line when it goes away and in one when it is back.

During an outage every child has plenty to say (the web refuses each call with a 503, the workers'
consumers reconnect, leases and reports fail, runs are handed back), each line true and each in
its log file; on the terminal they would bury what matters, that Redis is away. So while the watch
knows Redis is unreachable, and for :data:`SETTLE_S` after it is back (the outage's last echoes:
a call that waited through it, a reconnect), the children's lines go to their log files only
(:meth:`RedisWatch.holds_back`, the supervisor's gate), and the terminal shows the watch's two
lines and what the children say once it is over.

The decision is made from Redis itself, never from what a line says: the watch pings Redis every
:data:`INTERVAL_S`, and before a child's line reaches the terminal the gate pings once more (a line
written the instant Redis died is held back too, though the periodic ping has not run yet).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

import redis

from mcpq.ops.dev.redis_checks import ping, probe_client
from mcpq.ops.dev.supervisor import Supervisor
from mcpq.shared.celery_config import connection_problem
from mcpq.shared.redis_urls import redact_url

#: Between two pings while nothing else asks.
INTERVAL_S = 0.5
#: After Redis is back, the children's lines still go to their log files only this long.
SETTLE_S = 1.5


class RedisWatch:
    """Pings Redis in a thread of its own and tells the terminal (``say``) when it goes away
    and comes back; :meth:`holds_back` is the supervisor's gate for the children's lines."""

    def __init__(
        self,
        client: redis.Redis,
        url: str,
        say: Callable[[str], None],
        *,
        logs: str | None,
    ) -> None:
        self._client = client
        self._url = url  # shown redacted; connection_problem hides its password too
        self._say = say
        self._logs = logs  # where the children's lines go meanwhile (quiet mode)
        self._lock = threading.Lock()  # one ping and one state change at a time
        self._down_since: float | None = None
        self._up_since = time.monotonic()  # the launcher checked it answers before it started
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="redis-watch", daemon=True)

    def start(self) -> RedisWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * INTERVAL_S + 1.0)
        self._client.close()

    @property
    def down(self) -> bool:
        return self._down_since is not None

    def holds_back(self) -> bool:
        """Whether a child's line written now goes to its log file only: Redis is away, or
        came back less than :data:`SETTLE_S` ago, or does not answer now."""
        if self._down_since is not None or time.monotonic() - self._up_since < SETTLE_S:
            return True
        return not self.check()

    def check(self) -> bool:
        """Ping Redis once; say so when that changes what the watch knew. True: it answers."""
        with self._lock:
            problem = ping(self._client)
            now = time.monotonic()
            if problem is None and self._down_since is not None:
                away = now - self._down_since
                self._down_since, self._up_since = None, now
                self._say(f"Redis reachable again after {away:.0f} s")
            elif problem is not None and self._down_since is None:
                self._down_since = now
                meanwhile = f"; their lines go to {self._logs} meanwhile" if self._logs else ""
                self._say(
                    f"Redis at {redact_url(self._url)} (REDIS_URL) is unreachable "
                    f"({connection_problem(problem, self._url)}): web and workers retry until "
                    f"it is back{meanwhile}"
                )
            return problem is None

    def _run(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            self.check()


def watch_redis(supervisor: Supervisor, env: Mapping[str, str], *, quiet: bool) -> RedisWatch:
    """Watch the developer's Redis; quiet, hold the children's lines back while it is away."""
    watch = RedisWatch(
        probe_client(env),
        env["REDIS_URL"],
        lambda line: supervisor.say("mcpq", line),
        logs=str(supervisor.log_dir) if quiet and supervisor.log_dir else None,
    )
    if quiet:
        supervisor.hold_back_while(watch.holds_back)
    return watch.start()
