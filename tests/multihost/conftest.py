"""Fixtures of the multi-host layer: a fresh network of five hosts per test (``redis``, ``web1``,
``web2``, ``worker1``, ``worker2``, each a network namespace on one bridge) with mcpq running on
it. Skipped, with the reason, where network namespaces cannot be made (not root, no ``ip``, no
CAP_NET_ADMIN).

Teardown always runs to the end: links come back up, the formation stops every process it
started and asserts none is left, then the network kills whatever still runs in each namespace
and deletes namespaces, veth pairs and the bridge, and asserts that nothing of them is left.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.multihost.formation import Formation
from tests.multihost.netns import Network, NetworkError, sweep_stale, unavailable_reason

HOSTS = ("redis", "web1", "web2", "worker1", "worker2")
WORKER_CONCURRENCY = 8
"""Runs per worker (io pool threads): one worker can take over every task of a test at once."""


@pytest.fixture
def network() -> Iterator[Network]:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"multi-host tests: {reason}")
    sweep_stale()  # namespaces left by a run that was killed before its clean-up
    net = Network().start()
    try:
        for name in HOSTS:
            net.add_host(name)
    except BaseException:
        net.close()
        raise
    yield net
    problems = net.close()
    assert not problems, f"network left behind: {problems}"


@pytest.fixture
def formation_env() -> dict[str, str]:
    """Knobs a test adds to the formation's (``@pytest.mark.parametrize("formation_env",
    [{...}])`` overrides this fixture)."""
    return {}


@pytest.fixture
def formation(
    network: Network, tmp_path: Path, formation_env: dict[str, str]
) -> Iterator[Formation]:
    hosts = {host.name: host for host in network.hosts}
    running = Formation(network, tmp_path / "formation", env=formation_env)
    running.start_on(
        redis_host=hosts["redis"],
        web_hosts=[hosts["web1"], hosts["web2"]],
        worker_hosts=[hosts["worker1"], hosts["worker2"]],
        concurrency=WORKER_CONCURRENCY,
    )
    yield running
    with contextlib.suppress(NetworkError):
        for host in network.hosts:  # a test that fails mid-cut leaves a link down
            network.restore(host)
    running.close(check=True)
