"""The deployment-wide series of /metrics come from one Redis snapshot."""

from prometheus_client.parser import text_string_to_metric_families

from frontend.metrics import Snapshot, render


def samples(snapshot: Snapshot) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = render(snapshot, multiprocess_mode=False).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_counters_gauges_queues_workers_and_oldest_task() -> None:
    snapshot = Snapshot(
        stats={
            "created:greet": "7",
            "completed:greet": "6",
            "cancelled:slow": "1",
            "state:working": "2",
            "state:input_required": "3",
            "parked": "2",
            "inputs": "4",
        },
        queues={"mcpq": 5, "bulk": 0},
        workers_alive=2,
        oldest_unfinished_s=42.5,
    )
    got = samples(snapshot)
    assert got[("mcpq_tasks_created_total", (("tool", "greet"),))] == 7
    assert got[("mcpq_tasks_completed_total", (("tool", "greet"),))] == 6
    assert got[("mcpq_tasks_cancelled_total", (("tool", "slow"),))] == 1
    assert got[("mcpq_tasks_in_state", (("state", "input_required"),))] == 3
    assert got[("mcpq_tasks_parked", ())] == 2
    assert got[("mcpq_input_requests_outstanding", ())] == 4
    assert got[("mcpq_queue_depth", (("queue", "mcpq"),))] == 5
    assert got[("mcpq_workers_alive", ())] == 2
    assert got[("mcpq_oldest_unfinished_task_seconds", ())] == 42.5


def test_negative_gauges_from_drift_read_as_zero() -> None:
    got = samples(Snapshot(stats={"state:working": "-1", "parked": "-2", "inputs": "-3"}))
    assert got[("mcpq_tasks_in_state", (("state", "working"),))] == 0
    assert got[("mcpq_tasks_parked", ())] == 0
    assert got[("mcpq_input_requests_outstanding", ())] == 0
