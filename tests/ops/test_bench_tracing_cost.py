"""``python -m mcpq.ops.bench.tracing_cost``, tiny: the build without tracing, tracing off and
tracing on (every trace sampled, exported to the benchmark's OTLP receiver) each complete tasks
in every round; each imported mcpq from its own tree only (the build without tracing from its
``git archive``); the tracing SDK only where tracing is on; the receiver got spans; the server CPU
per task of each, the spans per task, the SDK's own CPU per span (a child process) and the floors
they give are reported (correctness only: no timing is asserted)."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import pytest

from mcpq.ops.bench.builds import commit_of
from mcpq.ops.bench.span_floor import PARTS
from mcpq.ops.bench.tracing_cost import BASELINE_REF, NAMES, orders
from mcpq.ops.harness.children import REPO
from tests.support.benches import run_bench

ROUNDS = 2
SDK_SPANS = 2000


@pytest.mark.timeout(300)
def test_the_tracing_cost_benchmark_measures_the_three_deployments() -> None:
    argv = ["--clients", "2", "--seconds", "1", "--rounds", str(ROUNDS), "--bsp-delay-ms", "200"]
    argv += ["--sdk-spans", str(SDK_SPANS)]
    result = run_bench("tracing_cost", *argv, timeout=270)
    assert result["problems"] == []
    deployments = result["deployments"]
    assert list(deployments) == list(NAMES)
    for side in deployments.values():
        assert side["failures"] == 0
        assert len(side["per_round"]) == ROUNDS and min(side["per_round"]) > 0, side
        assert side["tasks"] > 0
        assert side["min"] <= side["q1"] <= side["median"] <= side["q3"] <= side["max"]
        assert side["imports"]["modules_from_build"] > 0
        assert side["imports"]["modules_from_elsewhere"] == {}
    # The build without tracing: the baseline commit's tree, exported, not the repository's.
    baseline = deployments["baseline"]
    assert commit_of(BASELINE_REF).startswith(baseline["build"])
    assert not Path(baseline["mcpq_file"]).is_relative_to(REPO)
    for name in ("off", "on"):
        assert Path(deployments[name]["mcpq_file"]) == REPO / "mcpq" / "__init__.py"
    # The tracer SDK (and its exporter) only where tracing is on, under the load too.
    tracer = {name: side["imports"]["tracer_sdk"] for name, side in deployments.items()}
    assert tracer == {"baseline": False, "off": False, "on": True}
    spans = result["spans"]
    assert spans["received"] > 0 and spans["exports"] > 0 and spans["bytes"] > 0
    assert result["otel"]["OTEL_TRACES_SAMPLER"] == "always_on"
    for key in ("off_vs_baseline", "on_vs_off"):
        assert len(result[key]["by_round"]) == ROUNDS and result[key]["of_medians"] > 0
    # Server CPU per completed task: every part of every deployment spent some, every round.
    cpu = result["cpu_per_task_ms"]
    assert list(cpu) == [*NAMES, "on_minus_off"]
    for name in NAMES:
        assert all(cpu[name][part] > 0 for part in (*PARTS, "total")), cpu[name]
        rounds = deployments[name]["cpu_ms"]
        assert all(len(rounds[part]) == ROUNDS and min(rounds[part]) > 0 for part in rounds)
    on_minus_off = cpu["on"]["total"] - cpu["off"]["total"]
    assert cpu["on_minus_off"]["total"] == pytest.approx(on_minus_off, abs=0.002)
    # Spans per task, the cost per span in situ (its sign is the host's) and of the SDK alone.
    assert spans["per_task"] > 0
    assert isinstance(spans["in_situ_us_per_span"], float)
    sdk = result["sdk"]
    assert sdk["spans"] >= SDK_SPANS and sdk["received"] >= sdk["exported"] > sdk["spans"]
    assert sdk["us_per_span"] > 0 and sdk["create_end_us"] > 0 and sdk["export_us"] > 0
    assert sdk["spans_per_task"] == pytest.approx(spans["per_task"], abs=0.01)
    floors = result["floor"]
    assert 0 < floors["sdk"] < 1
    assert floors["measured_on_off"] == result["on_vs_off"]["of_medians"]


def test_the_rounds_orders_are_balanced() -> None:
    turns = orders(len(NAMES))
    assert sorted(turns) == sorted(itertools.permutations(range(len(NAMES))))
    assert set(Counter(order[0] for order in turns).values()) == {2}  # each first as often
    for a, b in itertools.permutations(range(len(NAMES)), 2):  # each pair either way as often
        assert sum(order.index(a) < order.index(b) for order in turns) == len(turns) // 2
