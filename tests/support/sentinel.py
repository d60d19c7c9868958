"""A real Redis Sentinel deployment for tests: one primary, one replica, three sentinels.

Everything runs as child processes on free loopback ports (``ops.redis_binary``: the
redis-server the tests use everywhere; a sentinel is that binary with a config file and
``--sentinel``), each in a process group of its own, stopped by pid. The sentinels watch the
service :data:`SERVICE` with quorum 2, call a primary down after :data:`DOWN_AFTER_MS` and
retry a failover after ``2 x`` :data:`FAILOVER_TIMEOUT_MS`. Replication is tuned so that a
replica that stops answering is dropped by its primary within seconds (``repl-timeout``):
that is how the tests make replication lag deterministically (``SIGSTOP`` the replica, wait
until the primary dropped it, write, ``SIGKILL`` the primary, ``SIGCONT`` the replica).

:class:`SentinelStack` is a :class:`~tests.support.stacks.LiveStack` whose children get the
``redis+sentinel://`` URL instead of a private redis-server of their own.
"""

from __future__ import annotations

import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis

from ops.processes import free_port, signal_group, spawn_in_new_group, stop_groups, wait_until
from ops.redis_binary import IN_MEMORY_ARGS, RedisProcess, choose_redis_server, ping
from tests.support.stacks import LiveStack

SERVICE = "mcpq"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 2000
#: The primary drops a replica silent for this long (seconds); the replica pings every second.
REPL_ARGS = ("--repl-timeout", "3", "--repl-ping-replica-period", "1")


class SentinelGroup:
    """The processes; ``start()`` returns once every sentinel sees the replica and its peers."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.binary = choose_redis_server()
        self.primary: RedisProcess | None = None
        self.replica: RedisProcess | None = None
        self.sentinels: list[subprocess.Popen[bytes]] = []
        self.sentinel_ports: list[int] = []
        self._logs: list[Any] = []

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> SentinelGroup:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.primary = self._server("primary", ())
        self.replica = self._server("replica", ("--replicaof", "127.0.0.1", str(self.primary.port)))
        for index in range(3):
            self._start_sentinel(index)
        wait_until(self._settled, timeout=30, interval=0.1, message="sentinels settled")
        self.wait_synced()
        return self

    def close(self) -> None:
        """Stop every process by pid (SIGCONT first: a stopped process cannot exit)."""
        for server in (self.primary, self.replica):
            if server is not None and server.process is not None:
                signal_group(server.pid, signal.SIGCONT)
                server.close()
        stop_groups(self.sentinels, timeout=5)
        for log in self._logs:
            log.close()

    def _server(self, name: str, args: tuple[str, ...]) -> RedisProcess:
        data = self.workdir / name
        data.mkdir(exist_ok=True)
        log = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115 (closed by close())
        self._logs.append(log)
        server = RedisProcess(
            extra_args=(*IN_MEMORY_ARGS, *REPL_ARGS, *args),
            data_dir=data,
            executable=self.binary.path,
            output=log,
        )
        return server.start()

    def _start_sentinel(self, index: int) -> None:
        assert self.primary is not None
        folder = self.workdir / f"sentinel{index}"
        folder.mkdir(exist_ok=True)
        port = free_port()
        conf = folder / "sentinel.conf"
        conf.write_text(
            f"port {port}\nbind 127.0.0.1\ndaemonize no\ndir {folder}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} 2\n"
            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {SERVICE} 1\n"
        )
        log = open(folder / "sentinel.log", "ab")  # noqa: SIM115 (closed by close())
        self._logs.append(log)
        process = spawn_in_new_group(
            [self.binary.path, str(conf), "--sentinel"], cwd=str(folder), stdout=log
        )
        self.sentinels.append(process)
        self.sentinel_ports.append(port)
        wait_until(lambda: ping("127.0.0.1", port), timeout=10, interval=0.02, message="sentinel")

    # -- what the sentinels say -----------------------------------------------------------------
    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def master(self, index: int = 0) -> dict[str, Any]:
        with _client(self.sentinel_ports[index]) as client:
            return client.sentinel_master(SERVICE)  # type: ignore[no-any-return]

    def primary_port(self) -> int:
        """The primary's port as the first sentinel that answers says."""
        for port in self.sentinel_ports:
            try:
                with _client(port) as client:
                    return int(client.sentinel_get_master_addr_by_name(SERVICE)[1])
            except redis.RedisError:
                continue
        raise AssertionError("no sentinel answers")

    def _settled(self) -> bool:
        for index in range(3):
            state = self.master(index)
            if state["num-slaves"] < 1 or state["num-other-sentinels"] < 2:
                return False
        return True

    # -- replication ----------------------------------------------------------------------------
    def wait_synced(self, timeout: float = 15.0) -> None:
        """Until the replica has every write of the primary (same offset, link up)."""
        assert self.primary is not None and self.replica is not None

        def synced() -> bool:
            with _client(self.primary.port) as p, _client(self.replica.port) as r:  # type: ignore[union-attr]
                mine = p.info("replication")
                theirs = r.info("replication")
            return theirs.get("master_link_status") == "up" and theirs.get(
                "slave_repl_offset"
            ) == mine.get("master_repl_offset")

        wait_until(synced, timeout=timeout, interval=0.05, message="replica in sync")

    def freeze_replica(self) -> float:
        """SIGSTOP the replica and wait until the primary dropped it: from then on the
        primary's writes reach no replica. Returns how long the drop took (seconds)."""
        assert self.primary is not None and self.replica is not None
        at = time.monotonic()
        assert signal_group(self.replica.pid, signal.SIGSTOP)

        def dropped() -> bool:
            with _client(self.primary.port) as p:  # type: ignore[union-attr]
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
            with _client(replica) as r:
                return time.monotonic() if r.info("replication")["role"] == "master" else None

        return wait_until(promoted, timeout=timeout, interval=0.05, message="replica promoted")

    def logs(self) -> str:
        parts = []
        for path in sorted(self.workdir.rglob("*.log")):
            text = path.read_text(errors="replace").splitlines()[-30:]
            parts.append(f"----- {path.name} ({path.parent.name}) -----\n" + "\n".join(text))
        return "\n".join(parts)


@contextmanager
def _client(port: int) -> Iterator[redis.Redis]:
    client = redis.Redis(port=port, decode_responses=True, socket_timeout=2)
    try:
        yield client
    finally:
        client.close()


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
