"""The throughput benchmark measures mcpq and its peer phase by phase in turn, the first one
alternating, so a drift of the shared host during the run falls on both alike."""

from __future__ import annotations

from typing import Any

from mcpq.ops.bench import loadgen


class _Fake:
    def __init__(self, name: str) -> None:
        self.name = name
        self.steal_s = 0.0


def test_each_phase_runs_against_every_target_and_the_first_alternates() -> None:
    mcpq, peer = _Fake("mcpq"), _Fake("peer")
    ran: list[tuple[int, str]] = []
    for turn in range(4):

        def phase(one: Any, turn: int = turn) -> None:
            ran.append((turn, one.name))

        loadgen._interleaved([mcpq, peer], phase, turn)  # type: ignore[list-item]
    assert ran == [
        (0, "mcpq"), (0, "peer"),
        (1, "peer"), (1, "mcpq"),
        (2, "mcpq"), (2, "peer"),
        (3, "peer"), (3, "mcpq"),
    ]  # fmt: skip


def test_a_lone_target_runs_every_phase() -> None:
    alone = _Fake("mcpq")
    ran: list[int] = []
    for turn in range(3):
        loadgen._interleaved([alone], lambda one, turn=turn: ran.append(turn), turn)  # type: ignore[misc, list-item]
    assert ran == [0, 1, 2]
