"""The deployment-wide series of /metrics come from one Redis snapshot."""

from prometheus_client.parser import text_string_to_metric_families

from mcpq.frontend.web_metrics import render
from mcpq.shared.store import Keys, StatsSnapshot
from mcpq.shared.store.stats import snapshot

NOW_MS = 1_800_000_000_000.0


def samples(snapshot: StatsSnapshot) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = render(snapshot, multiprocess_mode=False, window_s=15).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_counters_gauges_queues_workers_and_oldest_task() -> None:
    snapshot = StatsSnapshot(
        totals={"created": {"greet": 7}, "completed": {"greet": 6}, "cancelled": {"slow": 1}},
        states={"working": 2, "input_required": 3},
        parked=2,
        inputs=4,
        queues={"mcpq": 5, "bulk": 0},
        # two nodes beat within the 15 s window; one has been silent for a minute
        workers={"a@h": NOW_MS - 1_000, "b@h": NOW_MS - 14_000, "c@h": NOW_MS - 60_000},
        unfinished=5,
        oldest_created_ms=NOW_MS - 42_500,
        read_at_ms=NOW_MS,
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


def test_an_empty_snapshot_renders_zeroes() -> None:
    got = samples(StatsSnapshot())
    assert got[("mcpq_workers_alive", ())] == 0
    assert got[("mcpq_oldest_unfinished_task_seconds", ())] == 0
    assert got[("mcpq_tasks_parked", ())] == 0


def test_negative_gauges_from_drift_read_as_zero() -> None:
    # The stats hash as Redis returns it after tasks reached their TTL unfinished
    stats_hash = {"state:working": "-1", "parked": "-2", "inputs": "-3", "created:greet": "4"}
    read = snapshot(Keys("unit"), ["mcpq"])
    parsed = read.parse([stats_hash, [], 0, [], 7])
    assert (parsed.states, parsed.parked, parsed.inputs) == ({"working": 0}, 0, 0)
    assert parsed.totals["created"] == {"greet": 4}
    assert parsed.queues == {"mcpq": 7}
    got = samples(parsed)
    assert got[("mcpq_tasks_in_state", (("state", "working"),))] == 0
