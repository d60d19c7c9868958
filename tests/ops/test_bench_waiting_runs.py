"""``python -m mcpq.ops.bench.waiting_runs --wait-on mix --run-loop --kill``, tiny: runs waiting on
a sleep, an answer and an HTTP call all start on the run loop, the lease renewals are seen in
Redis, and after the worker's SIGKILL a new worker takes every open run over and each task ends,
none lost (correctness only: no timing is asserted). A 2 s lease and a 0.5 s sweep (the soak's
settings) keep the handover short; the waits end 20 s after the first create, after the kill
and the handover: the whole run takes about 30 s on two cores. Once with the task store's Redis
as broker, once with a RabbitMQ vhost of its own (where the machine has RabbitMQ)."""

from __future__ import annotations

import pytest

from mcpq.ops.harness import rabbitmq
from tests.support.benches import run_bench

RUNS, CANCELS = 45, 20
ARGV = ["--runs", str(RUNS), "--wait-on", "mix", "--run-loop", "--kill", "--seconds", "20"]
ARGV += ["--window", "1", "--knob", "MCPQ_LEASE_S=2", "--knob", "MCPQ_SWEEP_INTERVAL_S=0.5"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_the_waiting_runs_benchmark_hands_every_run_over_after_a_kill(broker: str) -> None:
    if broker == "rabbitmq" and (why := rabbitmq.unavailable()):
        pytest.skip(why)
    result = run_bench("waiting_runs", *ARGV, "--broker", broker, timeout=90)
    assert result["broker"] == broker, result
    if broker == "rabbitmq":  # the vhost it made is gone (checked by name: others may run)
        assert result["vhost"].startswith(f"{rabbitmq.BENCH_PREFIX}-"), result
        assert result["vhost"] not in rabbitmq.vhost_names()
    else:
        assert result["vhost"] is None, result
    assert result["runs"] == result["held"] == RUNS and result["run_loop"], result
    assert 0 < result["created_after_s"] <= result["running_after_s"], result
    assert result["waited_on"] == {"sleep": 15, "answer": 15, "http": 15}, result
    assert result["failures"] == 0, result
    assert result["http_held"] == 15, result  # every HTTP run was in its GET
    assert result["short_tool_s"] > 0.3 and 0 < result["cancel_max_s"] < 10, result
    assert result["worker_pss_mib"] > 20 and result["worker_threads"] > 1, result
    assert result["settings"]["MCPQ_LEASE_S"] == "2", result["settings"]
    renewals = result["renewals"]
    assert renewals["rounds"] >= 1 and renewals["round_trips"] == 1, renewals
    assert renewals["runs_min"] == renewals["runs_max"] == RUNS, renewals  # all, in each
    handover = result["handover"]
    assert handover["killed_processes"] >= 1 and handover["ended_before_kill"] == 0, handover
    assert handover["open_at_kill"] == handover["handed_over"] == RUNS - CANCELS, handover
    assert handover["handed_over_s"] is not None and handover["ended_s"] is not None, handover
    assert handover["lost"] == handover["failed"] == 0, handover
    assert handover["completed"] == RUNS - CANCELS and handover["cancelled"] == CANCELS, handover
    # The answer runs asked again on the new worker, and were answered: all but the cancelled.
    assert handover["answered"] >= 15 - (CANCELS + 2) // 3, handover
    # Each open run ran twice (killed, then replayed), the cancelled ones once.
    assert handover["runs"] == {"1": CANCELS, "2": RUNS - CANCELS}, handover
