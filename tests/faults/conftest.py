"""Fixtures of the fault layer: every test builds its own real stack (``support.FaultStack``)
with the knobs it needs, and the fixture tears it down and asserts that no process is left:
no member of any process group the stack started, no redis-server it started, and no live
descendant of the test process that was not there before the test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ops.processes import descendant_pids, pid_alive
from tests.faults.support import FaultStack, MakeStack


@pytest.fixture
def make_stack(tmp_path: Path) -> Iterator[MakeStack]:
    """``make_stack(webs=1, workers=2, env={...}, aof=False)`` starts a private stack."""
    made: list[FaultStack] = []
    # Other layers' session fixtures (the e2e stack) may have children alive: only new ones count.
    before = {p for p in descendant_pids(os.getpid()) if pid_alive(p)}

    def make(
        *,
        webs: int = 1,
        workers: int = 2,
        env: dict[str, str] | None = None,
        aof: bool = False,
        name: str = "faults",
    ) -> FaultStack:
        stack = FaultStack(name, tmp_path / f"{name}-{len(made)}", env=env, aof=aof)
        made.append(stack)
        stack.start(webs=webs, workers=workers)
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
        problems.append(f"processes left behind by the test: {left}")
    assert not problems, "; ".join(problems)
