"""The capacity benchmark's drains against bare Celery, several rounds of each in turn
(``mcpq.ops.bench.capacity_phases``, ``capacity_versus``): each side quotes its median round,
and the ratio is the median of the rounds' own ratios, each mcpq drain over the bare drain run
right after it, not the ratio of the two medians."""

from __future__ import annotations

import pytest

from mcpq.ops.bench.capacity_phases import Drained, Steadied, median_drain, worker_cost
from mcpq.ops.bench.capacity_versus import Versus, render_versus


def drained(ms: float, tasks: int = 1000) -> Drained:
    """A drain that took ``ms`` of CPU per task in its window."""
    return Drained(tasks, tasks, 1.0, ms * tasks / 1000, 2.0, 2 * ms * tasks / 1000)


STEADY = Steadied(tasks=100, per_s=200.0, cpu_s=0.15, wall_s=0.5)


def test_a_side_quotes_its_median_round() -> None:
    rounds = [drained(1.5), drained(1.2), drained(1.9)]
    assert median_drain(rounds).ms_per_task == pytest.approx(1.5)
    cost = worker_cost(rounds, 2.0, STEADY)
    assert cost.drain_ms == pytest.approx(1.5)
    assert cost.drain_rounds_ms == pytest.approx([1.5, 1.2, 1.9])
    # Of an even number, the lower of the middle two: a figure measured, never an average.
    assert median_drain([drained(1.0), drained(3.0)]).ms_per_task == pytest.approx(1.0)


def test_the_ratio_is_the_median_of_the_rounds_ratios() -> None:
    # The host slows in round 2 for both sides, and round 3's bare drain ran on a quiet moment:
    # the rounds read 1.1, 1.2 and 3.0, their median 1.2, while the medians of each side,
    # paired, would read 1.5 / 1.0 = 1.5.
    mine = worker_cost([drained(1.1), drained(2.4), drained(1.5)], 2.0, STEADY)
    theirs = worker_cost([drained(1.0), drained(2.0), drained(0.5)], 2.0, STEADY)
    row = Versus("io", "threads", 100, mine, theirs)
    assert row.round_ratios() == pytest.approx([1.1, 1.2, 3.0])
    assert row.ratios()["drain"] == pytest.approx(1.2)
    text = "\n".join(render_versus([row]))
    assert "x3" in text and "1.100/1.000=1.10x" in text, text
