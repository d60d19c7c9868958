"""Fixtures of the end-to-end layer: one real stack for the whole e2e session.

The session stack (``ops.stack.Stack``, as a ``tests.support.stacks.LiveStack``) is a private
redis-server, two web replicas (A and B, one gunicorn/uvicorn worker each) sharing it, and one
Celery worker (concurrency 2; io, then cpu: every test runs on both pool kinds) on the ``mcpq``
queue, started with the built-in tools plus
``tests.e2e.tools_fixture``. Tests talk to it with ``ops.mcp_client.McpClient``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ops.mcp_client import McpClient
from ops.stack import Stack
from shared.settings import DEFAULT_TOOLS
from tests.support.stacks import LiveStack

E2E_TOOLS = f"{DEFAULT_TOOLS},tests.e2e.tools_fixture"


@pytest.fixture(scope="session", params=["io", "cpu"])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """The whole e2e layer runs twice: on an io worker (threads, the default) and on a cpu one
    (prefork)."""
    running = LiveStack("e2e", tmp_path_factory.mktemp("e2e-stack"), tools=E2E_TOOLS)
    running.start(webs=2, workers=1, pool=request.param)
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
