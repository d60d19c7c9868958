"""Fixtures of the fault layer: every test builds its own real stack (a ``LiveStack`` with the
fault tools and knobs of ``support``, plus the knobs the test needs), and the fixture tears it
down and asserts that no process is left: no member of any process group the stack started, no
redis-server it started, and no live descendant of the test process that was not there before
the test.

Celery's broker is the stack's Redis unless the test asks for ``broker`` (indirect
parametrization: ``@pytest.mark.parametrize("broker", BROKERS, indirect=True)``): then each of
its stacks is made on that broker (RabbitMQ: a vhost of its own, skipped with the reason where
RabbitMQ is not reachable).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import descendant_pids, pid_alive, read_proc_stat
from mcpq.ops.runtime.redis_binary import IN_MEMORY_ARGS
from tests.faults.support import FAULT_KNOBS, FAULT_TOOLS, MakeStack
from tests.support import rabbitmq
from tests.support.redis_server import AOF_ARGS
from tests.support.stacks import LiveStack


@pytest.fixture
def broker(request: pytest.FixtureRequest) -> str:
    """Celery's broker of the test's stacks: ``redis`` unless parametrized."""
    name = str(getattr(request, "param", "redis"))
    if name == "rabbitmq" and (why := rabbitmq.unavailable()):
        pytest.skip(why)
    return name


@pytest.fixture
def make_stack(tmp_path: Path, broker: str) -> Iterator[MakeStack]:
    """``make_stack(webs=1, workers=2, env={...}, aof=False, pool="cpu")`` starts a private
    stack (``pool``: the workers' pool kind) on the test's ``broker``."""
    made: list[LiveStack] = []
    # Other layers' session fixtures (the e2e stack) may have children alive: only new ones count.
    before = {p for p in descendant_pids(os.getpid()) if pid_alive(p)}

    def make(
        *,
        webs: int = 1,
        workers: int = 2,
        env: dict[str, str] | None = None,
        aof: bool = False,
        name: str = "faults",
        pool: str = "cpu",
    ) -> Stack:
        stack = LiveStack(
            name,
            tmp_path / f"{name}-{len(made)}",
            tools=FAULT_TOOLS,
            env={**FAULT_KNOBS, **(env or {})},
            redis_args=AOF_ARGS if aof else IN_MEMORY_ARGS,
            broker=broker,
        )
        made.append(stack)
        stack.start(webs=webs, workers=workers, pool=pool)
        return stack

    yield make
    problems: list[str] = []
    for stack in made:
        try:
            stack.close(check=True)
        except AssertionError as exc:
            problems.append(str(exc))
    left = sorted(p for p in descendant_pids(os.getpid()) - before if pid_alive(p))
    if left:
        problems.append(f"processes left behind by the test: {[_describe(p) for p in left]}")
    assert not problems, "; ".join(problems)


def _describe(pid: int) -> str:
    """``pid (pgid N, ppid N): command line``, for a failure message."""
    stat = read_proc_stat(pid)
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        argv = "?"
    group = f"pgid {stat.pgid}, ppid {stat.ppid}" if stat else "gone"
    return f"{pid} ({group}): {argv[:200]}"
