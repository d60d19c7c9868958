"""A private Redis Cluster for tests: the helper lives in ``ops.harness.redis_cluster`` (the
benchmarks use it too); this module keeps the tests' import path."""

from __future__ import annotations

from mcpq.ops.harness.redis_cluster import NODE_TIMEOUT_MS, LocalCluster, cluster_binaries

__all__ = ["NODE_TIMEOUT_MS", "LocalCluster", "cluster_binaries"]
