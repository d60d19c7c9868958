"""The store's synchronous Redis Cluster client (``MCPQ_REDIS_CLUSTER``) closes what it opened:
redis-py's own ``close`` left every node's connections open (the node's pool, made for a client
built from a URL, is not its client's to close) until the garbage collector found them, with a
``ResourceWarning`` wherever that happened."""

from __future__ import annotations

import gc
import socket
from pathlib import Path

import pytest

from mcpq.shared.settings import Settings
from mcpq.shared.store import open_store
from tests.support.redis_cluster import LocalCluster, cluster_binaries

pytestmark = pytest.mark.skipif(cluster_binaries() is None, reason="needs Redis 7 and redis-cli")


TCP = (socket.AF_INET, socket.AF_INET6)


def open_sockets_to(ports: set[int]) -> list[tuple[str, int]]:
    """Sockets of this process still open to one of ``ports`` (none collected first)."""
    found = []
    for thing in gc.get_objects():
        # TCP only: a test runner's worker holds Unix sockets of its own (a path, no port).
        tcp = isinstance(thing, socket.socket) and thing.family in TCP
        if tcp and thing.fileno() != -1:
            try:
                peer = thing.getpeername()
            except OSError:
                continue
            if peer[1] in ports:
                found.append(peer)
    return found


def test_closing_the_store_closes_every_nodes_connections(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "cluster").start()
    try:
        ports = {node.port for node in cluster.nodes}
        settings = Settings(redis_url=cluster.url, redis_cluster=True, store_shards=6)
        store = open_store(settings)
        store.stats([])  # a read on every shard: a connection to every primary
        assert len(open_sockets_to(ports)) >= 3
        store.close()
        # Still referenced (no collection could have closed them): closed by close() itself.
        assert open_sockets_to(ports) == []
        del store
    finally:
        cluster.close()
