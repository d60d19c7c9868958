"""The soak's Redis through Sentinel (``--sentinel``): one primary and one replica, both with
AOF, and three sentinels (quorum 2), all children on free loopback ports, each in a process
group of its own and stopped by pid. The stack's processes get the ``redis+sentinel://`` URL
and ``MCPQ_REDIS_MIN_REPLICAS=1`` (the writes a client is told about are replicated first).

The fault is a failover ordered through a sentinel (``SENTINEL FAILOVER``): the replica is
promoted, the old primary is turned into its replica, and every client re-resolves the primary.
The same approach as the test suite's Sentinel group (``tests/support/sentinel.py``), which
this module cannot import.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import redis

from ops.processes import free_port, spawn_in_new_group, stop_groups, wait_until
from ops.redis_binary import RedisProcess, choose_redis_server, ping

SERVICE = "mcpq"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 2000
#: The primary drops a replica silent for this long (seconds); the replica pings every second.
REPL_ARGS = ("--repl-timeout", "3", "--repl-ping-replica-period", "1")


class SentinelRedis:
    """The servers and the sentinels; ``start()`` returns once every sentinel sees the replica
    and its peers and the replica is in sync."""

    def __init__(self, workdir: Path, redis_args: tuple[str, ...]) -> None:
        self.workdir = workdir
        self.redis_args = redis_args
        self.binary = choose_redis_server()
        self.servers: list[RedisProcess] = []
        self.sentinels: list[subprocess.Popen[bytes]] = []
        self.sentinel_ports: list[int] = []
        self._logs: list[IO[bytes]] = []

    def start(self) -> SentinelRedis:
        self.workdir.mkdir(parents=True, exist_ok=True)
        primary = self._server("primary", ())
        self._server("replica", ("--replicaof", "127.0.0.1", str(primary.port)))
        for index in range(3):
            self._start_sentinel(index, primary.port)
        wait_until(self._settled, timeout=30, interval=0.1, message="sentinels settled")
        self.wait_synced()
        return self

    def close(self) -> None:
        for server in self.servers:
            server.close()
        stop_groups(self.sentinels, timeout=5)
        for log in self._logs:
            log.close()

    @property
    def pids(self) -> list[int]:
        return [s.pid for s in self.servers if s.process is not None]

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def _server(self, name: str, args: tuple[str, ...]) -> RedisProcess:
        data = self.workdir / name
        data.mkdir(exist_ok=True)
        log = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115 (closed by close())
        self._logs.append(log)
        server = RedisProcess(
            extra_args=(*self.redis_args, *REPL_ARGS, *args),
            data_dir=data,
            executable=self.binary.path,
            output=log,
        )
        self.servers.append(server.start())
        return server

    def _start_sentinel(self, index: int, primary_port: int) -> None:
        folder = self.workdir / f"sentinel{index}"
        folder.mkdir(exist_ok=True)
        port = free_port()
        conf = folder / "sentinel.conf"
        conf.write_text(
            f"port {port}\nbind 127.0.0.1\ndaemonize no\ndir {folder}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {primary_port} 2\n"
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

    def _settled(self) -> bool:
        for port in self.sentinel_ports:
            with _client(port) as client:
                state = client.sentinel_master(SERVICE)
            if (
                not isinstance(state, dict)
                or state["num-slaves"] < 1
                or state["num-other-sentinels"] < 2
            ):
                return False
        return True

    def primary_port(self) -> int:
        """The primary's port as the first sentinel that answers says."""
        for port in self.sentinel_ports:
            try:
                with _client(port) as client:
                    address = client.sentinel_get_master_addr_by_name(SERVICE)
                if isinstance(address, tuple | list):
                    return int(address[1])
            except redis.RedisError:
                continue
        raise RuntimeError("no sentinel answers")

    def wait_synced(self, timeout: float = 15.0) -> None:
        """Until the replica has every write of the primary (same offset, link up)."""

        def synced() -> bool:
            primary = self.primary_port()
            (replica,) = [s.port for s in self.servers if s.port != primary]
            with _client(primary) as p, _client(replica) as r:
                mine, theirs = p.info("replication"), r.info("replication")
            return theirs.get("master_link_status") == "up" and theirs.get(
                "slave_repl_offset"
            ) == mine.get("master_repl_offset")

        wait_until(synced, timeout=timeout, interval=0.05, message="replica in sync")

    def failover(self, timeout: float = 40.0) -> None:
        """``SENTINEL FAILOVER``, then until the other server is the primary (the sentinels say
        so and it says so itself) and its new replica has caught up."""
        before = self.primary_port()
        (other,) = [s.port for s in self.servers if s.port != before]
        with _client(self.sentinel_ports[0]) as client:
            client.sentinel_failover(SERVICE)

        def promoted() -> bool:
            if self.primary_port() != other:
                return False
            with _client(other) as r:
                return bool(r.info("replication")["role"] == "master")

        wait_until(promoted, timeout=timeout, interval=0.05, message="replica promoted")
        # The sentinels turn the old primary into the new one's replica themselves.
        self.wait_synced(timeout)


@contextmanager
def _client(port: int) -> Iterator[redis.Redis]:
    client = redis.Redis(port=port, decode_responses=True, socket_timeout=2)
    try:
        yield client
    finally:
        client.close()
