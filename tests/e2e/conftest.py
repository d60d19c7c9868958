"""Fixtures of the end-to-end layer: one real stack for the whole e2e session.

The session stack (``ops.harness.stack.Stack``, as a ``tests.support.stacks.LiveStack``) is a
private redis-server, two web replicas (A and B, one gunicorn/uvicorn worker each) sharing it, and
one Celery worker (concurrency 2) on the ``mcpq`` queue, started with the built-in tools plus
``tests.e2e.tools_fixture``. Tests talk to it with ``mcpq.ops.harness.mcp_client.McpClient``.

The worker's pool is ``io`` (threads, ``mcpq worker``'s default), unless a test module names
more pools in ``POOLS`` (``tests.support.stacks.POOLS``: the modules whose tests exercise the
worker's side, runs, cancels, waits for input, crashes): its tests then run on a ``cpu``
(prefork) worker too. Celery's broker is the stack's Redis, unless a test module names more
brokers in ``BROKERS`` (``tests.support.stacks.BROKERS``: the lifecycle modules): its tests then
run on a stack whose broker is RabbitMQ too (a vhost of its own), skipped with the reason where
RabbitMQ is not reachable. One stack per pool and broker serves every test of the session on
them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcpq.ops.harness.mcp_client import McpClient
from mcpq.ops.harness.stack import Stack
from mcpq.shared.settings import DEFAULT_TOOLS
from tests.support import rabbitmq
from tests.support.stacks import LiveStack

E2E_TOOLS = f"{DEFAULT_TOOLS},tests.e2e.tools_fixture"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test on the session stack gets its broker (``redis``, or each of the module's
    ``BROKERS``) and its pool (``io``, or each of the module's ``POOLS``). (Parametrized here
    rather than defaulted, so that all the tests on one broker and pool share one stack.)"""
    if "broker" in metafunc.fixturenames:
        brokers = getattr(metafunc.module, "BROKERS", ("redis",))
        metafunc.parametrize("broker", brokers, indirect=True, scope="session")
    if "pool" in metafunc.fixturenames:
        pools = getattr(metafunc.module, "POOLS", ("io",))
        metafunc.parametrize("pool", pools, indirect=True, scope="session")


@pytest.fixture(scope="session")
def broker(request: pytest.FixtureRequest) -> str:
    """Celery's broker of the session stack: ``redis`` or ``rabbitmq``."""
    name = str(request.param)
    if name == "rabbitmq" and (why := rabbitmq.unavailable()):
        pytest.skip(why)
    return name


@pytest.fixture(scope="session")
def pool(request: pytest.FixtureRequest) -> str:
    """The session stack worker's pool kind: ``io`` (threads) or ``cpu`` (prefork)."""
    return str(request.param)


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory, broker: str, pool: str) -> Iterator[Stack]:
    """One per broker and pool that the session's tests ask for."""
    workdir = tmp_path_factory.mktemp(f"e2e-stack-{broker}-{pool}")
    running = LiveStack("e2e", workdir, tools=E2E_TOOLS, broker=broker)
    running.start(webs=2, workers=1, pool=pool)
    yield running
    running.close()


def _assert_running(stack: Stack) -> None:
    dead = stack.dead()
    assert not dead, f"stack processes died: {dead}\n{stack.tails()}"


@pytest.fixture
def client(stack: Stack) -> Iterator[McpClient]:
    """A raw client on replica A that declares the Tasks extension and elicitation."""
    _assert_running(stack)
    with McpClient(stack.url(0)) as raw:
        yield raw
    _assert_running(stack)


@pytest.fixture
def client_b(stack: Stack) -> Iterator[McpClient]:
    """The same kind of client, on replica B."""
    with McpClient(stack.url(1)) as raw:
        yield raw
