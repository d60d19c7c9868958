"""``python -m mcpq.ops.bench.throughput --peer``, tiny: every phase runs to the end against a real
mcpq stack and against fastmcp-tasks (installed into ``.cache/peer-venv`` on first use), and
reports sane numbers and their ratios, and the bare server's 1-client phase beside them (the
host's floor; correctness only: no timing is asserted)."""

from __future__ import annotations

import pytest

from tests.support.benches import run_bench

#: The smallest run that still has concurrent clients, and waiting runs to cancel.
CLIENTS, WAITING = 2, 3


@pytest.mark.timeout(660)  # a first run installs the peer into its venv
def test_the_throughput_benchmark_runs_every_phase() -> None:
    argv = ["--clients", str(CLIENTS), "--seconds", "0.5", "--tasks", "3"]
    argv += ["--waiting", str(WAITING), "--waiting-async", str(WAITING), "--peer"]
    result = run_bench("throughput", *argv, timeout=600)  # a first run installs the peer
    assert result["failures"] == 0
    assert result["clients"] == CLIENTS
    for rate in ("created_per_s", "drained_per_s", "completed_per_s"):
        assert result[rate] > 0, (rate, result)
    assert 0 < result["e2e_p50_ms"] <= result["e2e_p99_ms"]
    assert 0 < result["get_p50_ms"] <= result["get_p99_ms"]
    # Its breakdown: the call's and the polls' round trips, and polls per task (shares of 1)
    assert 0 < result["e2e_call_p50_ms"] < result["e2e_p99_ms"]
    assert 0 < result["e2e_get_p50_ms"] < result["e2e_p99_ms"]
    assert min(map(int, result["e2e_polls"])) >= 1
    assert sum(result["e2e_polls"].values()) == pytest.approx(1.0)
    assert 0 <= result["e2e_run_mean_ms"] < result["e2e_p99_ms"]  # from mcpq's own records
    assert result["pss_mib"] > 20  # every web and worker process was found
    assert result["redis_commands_per_task"] >= result["client_commands_per_task"] > 0
    assert result["client_commands_per_task"] >= result["round_trips_per_task"] > 0
    # The create, the claim, the finish and the tasks/get are scripts, at the least.
    assert result["commands_by_name"]["EVALSHA"] >= 4
    assert result["steal_s"] >= 0 and "background_commands_per_s" in result
    peer = result["peer"]
    assert peer["failures"] == 0 and peer["clients"] == CLIENTS
    assert peer["created_per_s"] > 0 and peer["completed_per_s"] > 0
    assert peer["pss_mib"] > 20  # its server and its worker were found
    assert peer["e2e_polls"] and peer["e2e_run_mean_ms"] is None  # its records are not read
    assert set(result["ratios"]) >= {"created_per_s", "completed_per_s", "get_p99_ms", "pss_mib"}
    # The floor in the same run: the bare server took its 1-client turn, every task with exactly
    # two tasks/get (it answers the first with "working", by design).
    floor = result["floor"]
    assert floor["failures"] == 0 and 0 < floor["e2e_p50_ms"] <= floor["e2e_p99_ms"], floor
    assert floor["polls"] == {"2": 1.0}, floor
    for phase, tool in (("waiting", "slow_compute"), ("waiting_async", "bench_async_sleep")):
        waiting = result[phase]
        assert waiting["runs"] == WAITING and waiting["tool"] == tool
        assert waiting["short_tool_s"] > 0.3  # the short tool ran to its end beside them
        assert 0 < waiting["cancel_max_s"] < 10  # every cancelled run was seen ending
        assert waiting["worker_pss_mib"] > 20 and waiting["worker_threads"] > 1
