"""``python -m mcpq.ops.bench.floor``, tiny: mcpq and the bare server each answer the 1-client phase
to the end, in alternating rounds, and the bare server did one Redis script per request
(correctness only: no timing is asserted)."""

from __future__ import annotations

import pytest

from tests.support.benches import run_bench

TASKS, ROUNDS, WARM = 5, 2, 5  # WARM: mcpq.ops.bench.floor.measure's warm-up, max(5, tasks // 10)


@pytest.mark.timeout(180)
def test_the_floor_benchmark_measures_both_sides() -> None:
    result = run_bench("floor", "--tasks", str(TASKS), "--rounds", str(ROUNDS), timeout=150)
    assert (result["tasks"], result["rounds"]) == (TASKS, ROUNDS)
    for side in (result["mcpq"], result["bare"]):
        assert side["failures"] == 0
        assert 0 < side["e2e_p50_ms"] <= side["e2e_p99_ms"]
        assert 0 < side["call_p50_ms"] < side["e2e_p99_ms"]
        assert 0 < side["get_p50_ms"] < side["e2e_p99_ms"]
        assert min(map(int, side["polls"])) >= 1
        assert sum(side["polls"].values()) == pytest.approx(1.0)
    # The bare server answers `working` at a task's first poll, `completed` from the second.
    assert result["bare"]["polls"] == {"2": 1.0}  # (JSON: the counts are strings)
    assert len(result["above_floor_ms"]) == ROUNDS
    # One script per request: a create and two polls per task, warm-up included.
    assert result["bare_scripts"] >= 3 * (TASKS * ROUNDS + WARM)
    assert result["steal_s"] >= 0
