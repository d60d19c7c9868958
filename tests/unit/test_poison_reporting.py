"""Poisoned tasks (failed because their runs kept losing their worker, ``MCPQ_MAX_RUNS``) as an
operator sees them: a counter by tool in ``/metrics`` and lines in ``mcpq status``, both read
from the stats hash the Lua scripts keep."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from mcpq.frontend.web_metrics import render as render_metrics
from mcpq.ops.cli.status import Status
from mcpq.ops.cli.status import render as render_status
from mcpq.shared.store import Keys, StatsSnapshot
from mcpq.shared.store.stats import snapshot

STATS_HASH = {
    "created:exit_worker": "2",
    "failed:exit_worker": "2",
    "poisoned:exit_worker": "1",
    "created:greet": "1",
}


def _read(stats_hash: dict[str, str]) -> StatsSnapshot:
    return snapshot(Keys("unit"), []).parse([stats_hash, [], 0, []])


def test_the_stats_hash_counts_poisoned_tasks_by_tool() -> None:
    totals = _read(STATS_HASH).totals
    assert totals["poisoned"] == {"exit_worker": 1}
    assert totals["failed"] == {"exit_worker": 2}, "a poisoned task is a failed one too"


def test_metrics_export_the_poisoned_counter_by_tool() -> None:
    text = render_metrics(_read(STATS_HASH), multiprocess_mode=False).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    poisoned = families["mcpq_tasks_poisoned"]
    assert poisoned.type == "counter"
    assert "MCPQ_MAX_RUNS" in poisoned.documentation
    samples = {(s.name, s.labels.get("tool")): s.value for s in poisoned.samples}
    assert samples[("mcpq_tasks_poisoned_total", "exit_worker")] == 1
    assert "mcpq_tasks_poisoned_total" in text  # the name dashboards and alerts use


def test_status_shows_the_total_and_which_tools() -> None:
    shown = render_status(Status(_read(STATS_HASH))).splitlines()
    assert "  poisoned (total)                1" in shown
    assert "    exit_worker                   1" in shown
    quiet = render_status(Status(_read({"created:greet": "1"}))).splitlines()
    assert "  poisoned (total)                0" in quiet
    assert not any("exit_worker" in line for line in quiet)
