"""Fixtures of the real-client layer: one stack shared by every client test of the session.

The stack is a private redis-server, two web replicas (A and B) and one Celery worker
(concurrency 4), with the built-in tools plus ``tests.clients.tools_clients`` and the resources
and prompts of ``tests.clients.resources_fixture``. Keep-alives are short (2 s) so the tests see
them; a streamed call may last up to 120 s.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcpq.ops.harness.stack import Stack
from mcpq.shared.settings import DEFAULT_TOOLS
from tests.support.stacks import FAST_KNOBS, LiveStack

CLIENT_TOOLS = f"{DEFAULT_TOOLS},tests.clients.tools_clients,tests.clients.resources_fixture"
CLIENT_KNOBS = {
    **FAST_KNOBS,
    "MCPQ_SSE_KEEPALIVE_S": "2",
    "MCPQ_STREAM_MAX_S": "120",
}


@pytest.fixture(scope="session")
def client_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    running = LiveStack(
        "clients", tmp_path_factory.mktemp("clients-stack"), tools=CLIENT_TOOLS, env=CLIENT_KNOBS
    )
    try:
        running.start_redis()
        running.start_web()
        running.start_web()
        running.start_worker(concurrency=4)
    except BaseException:
        running.abort()
        raise
    yield running
    running.close()


@pytest.fixture
def stack(client_stack: Stack) -> Stack:
    dead = client_stack.dead()
    assert not dead, f"stack processes died: {dead}\n{client_stack.tails()}"
    return client_stack
