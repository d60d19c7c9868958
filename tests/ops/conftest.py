"""Fixtures of the ops layer (helpers in ``tests.ops.ops_harness``).

``ops_stack`` is one session stack: a private redis-server, ``mcpq web``, two worker pools run the
way the Procfile runs them (``mcpq worker --queues mcpq`` and ``--queues bulk``) and Flower.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcpq.ops.harness.stack import Stack
from tests.ops.ops_harness import (
    BULK_NODE,
    MCPQ_NODE,
    OPS_TOOLS,
    Flower,
    OpsClient,
    wait_flower_sees,
)
from tests.support.stacks import LiveStack


@pytest.fixture(scope="session")
def ops_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    stack = LiveStack("ops", tmp_path_factory.mktemp("ops-stack"), tools=OPS_TOOLS)
    try:
        stack.start_redis()
        stack.start_flower()  # first: Flower must be subscribed before the workers say hello
        pools = [stack.spawn_pool("mcpq", MCPQ_NODE), stack.spawn_pool("bulk", BULK_NODE)]
        stack.start_web()
        for pool in pools:
            stack.wait_ready(pool)
    except BaseException:
        stack.abort()
        raise
    yield stack
    stack.close()


@pytest.fixture(scope="session")
def flower(ops_stack: Stack) -> Iterator[Flower]:
    api = Flower(ops_stack.flower_url)
    with OpsClient(ops_stack.url()) as client:
        wait_flower_sees(client, api)
    yield api
    api.close()


@pytest.fixture
def client(ops_stack: Stack) -> Iterator[OpsClient]:
    dead = ops_stack.dead()
    assert not dead, f"stack processes died: {dead}\n{ops_stack.tails()}"
    with OpsClient(ops_stack.url()) as raw:
        yield raw
