"""A local Redis Sentinel deployment: one primary, one replica, three sentinels (quorum 2).

Everything runs as child processes on free loopback ports (``mcpq.ops.runtime.redis_binary``: the
redis-server mcpq's tests and benchmarks use everywhere; a sentinel is that binary with a config
file and ``--sentinel``), each in a process group of its own, stopped by pid. The sentinels
watch the service :data:`SERVICE`, call a primary down after :data:`DOWN_AFTER_MS` and retry a
failover after ``2 x`` :data:`FAILOVER_TIMEOUT_MS`. Replication is tuned so that a replica that
stops answering is dropped by its primary within seconds (``repl-timeout``).

The tests' Sentinel group (``tests/support/sentinel.py``: replication lag made deterministic)
and the soak's (``mcpq.ops.bench.soak --sentinel``: failovers ordered through a sentinel) are this.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import redis

from mcpq.ops.runtime.processes import (
    free_port,
    signal_group,
    spawn_in_new_group,
    stop_groups,
    wait_until,
)
from mcpq.ops.runtime.redis_binary import IN_MEMORY_ARGS, RedisProcess, choose_redis_server, ping

SERVICE = "mcpq"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 2000
#: The primary drops a replica silent for this long (seconds); the replica pings every second.
REPL_ARGS = ("--repl-timeout", "3", "--repl-ping-replica-period", "1")


class SentinelGroup:
    """The servers and the sentinels; ``start()`` returns once every sentinel sees the replica
    and its peers and the replica is in sync. ``redis_args``: the servers' persistence (in
    memory by default; the soak gives them AOF)."""

    def __init__(self, workdir: Path, redis_args: tuple[str, ...] = IN_MEMORY_ARGS) -> None:
        self.workdir = workdir
        self.redis_args = redis_args
        self.binary = choose_redis_server()
        #: The servers as started (a failover swaps their roles; ``primary_port`` says which).
        self.primary: RedisProcess | None = None
        self.replica: RedisProcess | None = None
        self.sentinels: list[subprocess.Popen[bytes]] = []
        self.sentinel_ports: list[int] = []
        self._logs: list[IO[bytes]] = []

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> SentinelGroup:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.primary = self._server("primary", ())
        self.replica = self._server("replica", ("--replicaof", "127.0.0.1", str(self.primary.port)))
        for index in range(3):
            self._start_sentinel(index, self.primary.port)
        wait_until(self._settled, timeout=30, interval=0.1, message="sentinels settled")
        self.wait_synced()
        return self

    def close(self) -> None:
        """Stop every process by pid (SIGCONT first: a stopped process cannot exit)."""
        for server in self.servers:
            if server.process is not None:
                signal_group(server.pid, signal.SIGCONT)
                server.close()
        stop_groups(self.sentinels, timeout=5)
        for log in self._logs:
            log.close()

    @property
    def servers(self) -> list[RedisProcess]:
        return [s for s in (self.primary, self.replica) if s is not None]

    @property
    def pids(self) -> list[int]:
        return [s.pid for s in self.servers if s.process is not None]

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
        return server.start()

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

    # -- what the sentinels say -----------------------------------------------------------------
    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def master(self, index: int = 0) -> dict[str, Any]:
        """What sentinel ``index`` knows of the primary (``SENTINEL MASTER``)."""
        with sentinel_client(self.sentinel_ports[index]) as client:
            state = client.sentinel_master(SERVICE)
        return state if isinstance(state, dict) else {}

    def primary_port(self) -> int:
        """The primary's port as the first sentinel that answers says."""
        for port in self.sentinel_ports:
            try:
                with sentinel_client(port) as client:
                    address = client.sentinel_get_master_addr_by_name(SERVICE)
                if isinstance(address, tuple | list):
                    return int(address[1])
            except redis.RedisError:
                continue
        raise RuntimeError("no sentinel answers")

    def _settled(self) -> bool:
        for index in range(len(self.sentinel_ports)):
            state = self.master(index)
            if state.get("num-slaves", 0) < 1 or state.get("num-other-sentinels", 0) < 2:
                return False
        return True

    # -- replication ----------------------------------------------------------------------------
    def wait_synced(self, timeout: float = 15.0) -> None:
        """Until the replica (whichever server it is now) has every write of the primary (same
        offset, link up)."""

        def synced() -> bool:
            primary = self.primary_port()
            (replica,) = [s.port for s in self.servers if s.port != primary]
            with sentinel_client(primary) as p, sentinel_client(replica) as r:
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
        with sentinel_client(self.sentinel_ports[0]) as client:
            client.sentinel_failover(SERVICE)

        def promoted() -> bool:
            if self.primary_port() != other:
                return False
            with sentinel_client(other) as r:
                return bool(r.info("replication")["role"] == "master")

        wait_until(promoted, timeout=timeout, interval=0.05, message="replica promoted")
        # The sentinels turn the old primary into the new one's replica themselves.
        self.wait_synced(timeout)

    def logs(self) -> str:
        parts = []
        for path in sorted(self.workdir.rglob("*.log")):
            text = path.read_text(errors="replace").splitlines()[-30:]
            parts.append(f"----- {path.name} ({path.parent.name}) -----\n" + "\n".join(text))
        return "\n".join(parts)


@contextmanager
def sentinel_client(port: int) -> Iterator[redis.Redis]:
    """A short-lived client of a sentinel or a server of the group."""
    client = redis.Redis(port=port, decode_responses=True, socket_timeout=2)
    try:
        yield client
    finally:
        client.close()
