"""``python -m mcpq.ops.bench.soak``, short: a real deployment under mixed traffic takes one fault
of each kind (worker SIGKILL, worker SIGSTOP, web SIGKILL, Redis restart), drains, and its checks
find nothing lost, stuck, wrong, asked twice or done twice (the soak exits 1 on any violation,
and ``run_bench`` fails the test with its report). A few seconds of traffic, faults every 1.5-2 s
and a worker stopped for 1-1.5 s keep the whole run within 30 s on two cores. The step check's
rule is also tested on a record of its own making."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpq.ops.bench.soak_checks import StepRecord, check_steps
from mcpq.ops.bench.soak_faults import KINDS, Signalled
from mcpq.ops.bench.soak_ledger import Ledger
from tests.support.benches import run_bench

ARGV = ["--seconds", "10", "--fault-every", "1.5-2", "--stopped", "1-1.5", "--drain-s", "30"]


@pytest.mark.timeout(150)
def test_the_soak_injects_every_fault_and_finds_nothing_wrong() -> None:
    result = run_bench("soak", *ARGV, "--every-kind", timeout=120)
    assert set(result["faults"]) == set(KINDS), result["faults"]
    assert result["violations"] == {} and result["processes_left"] == {}, result
    assert result["drained"], result
    # Traffic of every sort ran, on both wires, and the steps were recorded.
    assert set(result["tasks_by_era"]) == {"2026-07-28", "2025-11-25"}, result
    assert sum(n for name, n in result["outcomes"].items() if "completed" in name) > 0, result
    assert result["sync_calls"] > 0 and result["watched"] > 0, result
    assert result["step_calls"] >= 2 * result["outcomes"].get("2026-07-28 completed", 0), result
    assert result["requests"] > result["tasks"] > 0, result
    assert result["p99_ms"] >= result["p50_ms"] > 0, result


def test_the_step_check_allows_a_second_call_only_after_its_caller_was_killed(
    tmp_path: Path,
) -> None:
    """The soak's step check on a record of its own making: a second call counts as allowed
    only when the first caller was SIGKILLed after its call and never saved; a caller that
    was alive (or only stopped), or that saved, makes it a violation with both records."""
    log = tmp_path / "steps.log"
    log.write_text(
        "".join(
            "\t".join(map(str, fields)) + "\n"
            for fields in [
                # killed after its call, not saved: the second call is allowed
                ("call", "killed", "one", 1, 100, 10.0, "k1"),
                ("call", "killed", "one", 2, 200, 20.0, "k1"),
                ("saved", "killed", "one", 2, 200, 20.1, 1),
                # its first caller only stopped: a violation
                ("call", "stopped", "one", 1, 101, 10.0, "k2"),
                ("call", "stopped", "one", 2, 201, 20.0, "k2"),
                # its first caller killed, but after its save: a violation
                ("call", "saved", "one", 1, 102, 10.0, "k3"),
                ("saved", "saved", "one", 1, 102, 10.1, 1),
                ("call", "saved", "one", 2, 202, 20.0, "k3"),
                # once: fine
                ("call", "once", "one", 1, 103, 10.0, "k4"),
            ]
        )
    )
    signalled = [
        Signalled(100, "SIGKILL", 15.0, "worker0"),
        Signalled(101, "SIGSTOP", 15.0, "worker1"),
        Signalled(102, "SIGKILL", 15.0, "worker2"),
    ]
    ledger = Ledger()
    found = check_steps(StepRecord.read(log), signalled, ledger)
    assert (found.steps, found.calls, found.allowed_doubles) == (4, 7, 1)
    assert [v.kind for v in ledger.violations] == ["step called twice"] * 2
    saved, stopped = (v.evidence for v in ledger.violations)  # in the order of their tags
    assert saved.startswith("saved step one:") and stopped.startswith("stopped step one:")
    assert "saved gen=1 pid=102" in saved and "soak SIGKILL pid=102" in saved
    assert "soak SIGSTOP pid=101" in stopped
    for evidence in (saved, stopped):
        assert evidence.count("    call ") == 2, evidence
