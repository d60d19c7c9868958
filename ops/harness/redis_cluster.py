"""A private Redis Cluster for the tests and the benchmarks: primaries (and a replica each, or
none) as ``RedisProcess`` children on free loopback ports, joined with
``redis-cli --cluster create``; stopped by pid.

Needs Redis 7 (sharded pub/sub, the store's cluster tests) and the ``redis-cli`` next to its
``redis-server``. The shared Redis on 127.0.0.1:6379 is never touched.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import redis
from redis.crc import key_slot

from mcpq.ops.runtime.processes import free_port, wait_until
from mcpq.ops.runtime.redis_binary import (
    IN_MEMORY_ARGS,
    PREFERRED_MAJOR,
    RedisProcess,
    choose_redis_server,
)

NODE_TIMEOUT_MS = 2000
"""How long a primary may be silent before its replica takes over (Redis's default is 15 s)."""


def cluster_binaries() -> tuple[str, str] | None:
    """``(redis-server, redis-cli)`` of Redis 7 or later, or ``None`` on this machine."""
    try:
        server = choose_redis_server(explicit="")
    except Exception:
        return None
    if server.version < (PREFERRED_MAJOR,):
        return None
    cli = Path(server.path).with_name("redis-cli")
    found = str(cli) if cli.exists() else shutil.which("redis-cli")
    return (server.path, found) if found else None


class LocalCluster:
    """``primaries`` primaries with ``replicas`` replicas each, slots split evenly."""

    def __init__(self, workdir: Path, *, primaries: int = 3, replicas: int = 1) -> None:
        found = cluster_binaries()
        if found is None:
            raise RuntimeError("a Redis Cluster needs redis-server 7+ and redis-cli")
        self.server, self.cli = found
        self.workdir = workdir
        self.primaries, self.replicas = primaries, replicas
        self.nodes: list[RedisProcess] = []

    def start(self) -> LocalCluster:
        args: tuple[str, ...] = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
        args += ("--cluster-node-timeout", str(NODE_TIMEOUT_MS), *IN_MEMORY_ARGS)
        args += ("--repl-diskless-sync-delay", "0")  # replicas in sync at once, not in 5 s
        try:
            for i in range(self.primaries * (1 + self.replicas)):
                data = self.workdir / f"node-{i}"
                data.mkdir(parents=True, exist_ok=True)
                # The bus port is named: the default (port + 10000) overflows on high ports.
                bus = ("--cluster-port", str(free_port("127.0.0.1")))
                node = RedisProcess(extra_args=args + bus, data_dir=data, executable=self.server)
                self.nodes.append(node.start())
            addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
            subprocess.run(
                [self.cli, "--cluster", "create", *addresses, *self._create_options()],
                check=True,
                capture_output=True,
                timeout=60,
            )
            wait_until(self.healthy, timeout=30, interval=0.2, message="cluster_state:ok")
            # A replica that never synced would not take over (its data too old to fail over).
            wait_until(self.replicas_synced, timeout=30, interval=0.2, message="replicas in sync")
            wait_until(self.writes_replicated, timeout=30, interval=0.05, message="replicas ack")
        except BaseException:
            self.close()
            raise
        return self

    def _create_options(self) -> list[str]:
        return ["--cluster-replicas", str(self.replicas), "--cluster-yes"]

    @property
    def url(self) -> str:
        """A seed node's URL: clients discover the rest."""
        return self.nodes[0].url

    def client(self, node: RedisProcess) -> redis.Redis:
        return redis.Redis(port=node.port, decode_responses=True, socket_timeout=5)

    def alive(self) -> list[RedisProcess]:
        return [n for n in self.nodes if n.process is not None and n.process.poll() is None]

    def healthy(self) -> bool:
        """Every live node says ``cluster_state:ok`` and sees every slot served."""
        for node in self.alive():
            with self.client(node) as c:
                info = c.cluster("info")
                if info.get("cluster_state") != "ok":
                    return False
        return True

    def replicas_synced(self) -> bool:
        for node in self.alive():
            with self.client(node) as c:
                info = c.info("replication")
                if info.get("role") == "slave" and info.get("master_link_status") != "up":
                    return False
        return True

    def writes_replicated(self) -> bool:
        """A write on each primary reaches every one of its replicas (``WAIT``).

        NOTE: a replica whose link is ``up`` and that its primary calls ``online`` may still
        get no writes: after a diskless sync, Redis 7 starts streaming to a replica only at its
        first ``REPLCONF ACK``, which the replica sends on its once-a-second cron. Until then a
        ``WAIT`` for it times out (a store with ``MCPQ_REDIS_MIN_REPLICAS`` refuses the write),
        so a cluster is ready only once a write has been seen acknowledged."""
        for node in self.primary_nodes():
            expected = len(self.replicas_of(node))
            if not expected:
                continue
            key = self._key_on(node)
            with self.client(node) as c:
                c.set(key, "1", px=60_000)
                acked = int(c.execute_command("WAIT", expected, 200))
                c.delete(key)
            if acked < expected:
                return False
        return True

    def _key_on(self, node: RedisProcess) -> str:
        """A key whose slot ``node`` serves."""
        slots = self.slots_of(node)
        return next(
            key
            for key in (f"ready:{{{i}}}" for i in range(100_000))
            if key_slot(key.encode()) in slots
        )

    def primary_nodes(self) -> list[RedisProcess]:
        """The live nodes that are primaries now (after a failover, a former replica)."""
        found = []
        for node in self.alive():
            with self.client(node) as c:
                if c.info("replication").get("role") == "master":
                    found.append(node)
        return found

    def replicas_of(self, primary: RedisProcess) -> list[RedisProcess]:
        """The live nodes that replicate ``primary`` now."""
        found = []
        for node in self.alive():
            with self.client(node) as c:
                info = c.info("replication")
                if info.get("role") == "slave" and int(info["master_port"]) == primary.port:
                    found.append(node)
        return found

    def slots_of(self, node: RedisProcess) -> set[int]:
        """The slots ``node`` serves, as it says."""
        with self.client(node) as c:
            myself = next(
                line
                for line in c.execute_command("CLUSTER", "NODES").splitlines()
                if "myself" in line
            )
        slots: set[int] = set()
        for part in myself.split()[8:]:
            if part.startswith("["):
                continue  # a slot being migrated
            low, _, high = part.partition("-")
            slots.update(range(int(low), int(high or low) + 1))
        return slots

    def close(self) -> None:
        for node in self.nodes:
            node.close()
