"""A real Redis Sentinel deployment for tests (``ops.harness.redis_sentinel.SentinelGroup``: one
primary, one replica, three sentinels), with what the tests do to it: replication lag made
deterministic (``SIGSTOP`` the replica, wait until the primary dropped it, write, ``SIGKILL`` the
primary, ``SIGCONT`` the replica).

:class:`SentinelStack` is a :class:`~tests.support.stacks.LiveStack` whose children get the
``redis+sentinel://`` URL instead of a private redis-server of their own.
"""

from __future__ import annotations

import signal
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mcpq.ops.harness.redis_sentinel import SERVICE, sentinel_client
from mcpq.ops.harness.redis_sentinel import SentinelGroup as _Group
from mcpq.ops.runtime.processes import signal_group, wait_until
from tests.support.stacks import LiveStack

__all__ = ["SERVICE", "SentinelGroup", "SentinelStack", "sentinel_group"]


class SentinelGroup(_Group):
    """The group, and the faults the tests inject into it."""

    def freeze_replica(self) -> float:
        """SIGSTOP the replica and wait until the primary dropped it: from then on the
        primary's writes reach no replica. Returns how long the drop took (seconds)."""
        assert self.primary is not None and self.replica is not None
        at = time.monotonic()
        assert signal_group(self.replica.pid, signal.SIGSTOP)

        def dropped() -> bool:
            with sentinel_client(self.primary.port) as p:  # type: ignore[union-attr]
                return int(p.info("replication")["connected_slaves"]) == 0

        wait_until(dropped, timeout=20, interval=0.05, message="the primary dropped the replica")
        return time.monotonic() - at

    def kill_primary(self) -> float:
        """SIGKILL the primary (a crash); returns the ``time.monotonic()`` of the signal."""
        assert self.primary is not None
        at = time.monotonic()
        self.primary.kill()
        return at

    def thaw_replica(self) -> None:
        assert self.replica is not None
        assert signal_group(self.replica.pid, signal.SIGCONT)

    def wait_promoted(self, timeout: float = 40.0) -> float:
        """Until the sentinels name the replica as the primary and it says so itself; returns
        the ``time.monotonic()`` at which that was seen."""
        assert self.replica is not None
        replica = self.replica.port

        def promoted() -> float | None:
            if self.primary_port() != replica:
                return None
            with sentinel_client(replica) as r:
                return time.monotonic() if r.info("replication")["role"] == "master" else None

        return wait_until(promoted, timeout=timeout, interval=0.05, message="replica promoted")


@contextmanager
def sentinel_group(workdir: Path | None = None) -> Iterator[SentinelGroup]:
    with tempfile.TemporaryDirectory(prefix="mcpq-sentinel-") as tmp:
        group = SentinelGroup(workdir or Path(tmp))
        try:
            yield group.start()
        finally:
            group.close()


class SentinelStack(LiveStack):
    """A stack whose web and worker processes reach Redis through ``group``'s sentinels."""

    def __init__(self, name: str, workdir: Path, group: SentinelGroup, **kwargs: Any) -> None:
        super().__init__(name, workdir, **kwargs)
        self.group = group

    @property
    def redis_url(self) -> str:
        return self.group.url

    def start(self, *, webs: int = 1, workers: int = 1, pool: str = "io") -> SentinelStack:
        try:
            for _ in range(webs):
                self.start_web()
            for _ in range(workers):
                self.start_worker(pool=pool)
        except BaseException:
            self.abort()
            raise
        return self
