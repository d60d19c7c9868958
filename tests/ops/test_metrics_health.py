"""``/metrics``, ``/healthz``, ``/readyz`` under ``mcpq web`` (WEB_CONCURRENCY=2, so
prometheus-client's multiprocess mode, with the directory ``mcpq web`` makes), and the worker's
own metrics endpoint under ``mcpq worker`` (``MCPQ_WORKER_METRICS_PORT``).

The module's stack is its own: the last test stops Redis and starts it again on the same port.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcpq.ops.harness.metric_dirs import multiproc_dir
from mcpq.ops.harness.stack import REPO
from mcpq.ops.runtime.processes import free_port, wait_until
from tests.ops.ops_harness import OPS_TOOLS, OpsClient
from tests.support.stacks import FAST_KNOBS, LiveStack

pytestmark = [pytest.mark.ops, pytest.mark.timeout(150)]

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
METRICS_TOKEN = "metrics-health-token-3c9e"


class MetricsStack(LiveStack):
    worker_metrics_url = ""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsStack]:
    env = {**FAST_KNOBS, "WEB_CONCURRENCY": "2", "MCPQ_METRICS_TOKEN": METRICS_TOKEN}
    workdir = tmp_path_factory.mktemp("metrics-stack")
    running = MetricsStack("metrics", workdir, tools=OPS_TOOLS, env=env)
    try:
        running.start_redis()
        port = free_port()
        pool = running.spawn_pool("mcpq", "metrics", MCPQ_WORKER_METRICS_PORT=str(port))
        running.start_web()
        running.wait_ready(pool)
        running.worker_metrics_url = f"http://127.0.0.1:{port}/metrics"
    except BaseException:
        running.abort()
        raise
    yield running
    running.close()


@pytest.fixture
def client(stack: MetricsStack) -> Iterator[OpsClient]:
    with OpsClient(stack.url()) as raw:
        yield raw


def scrape(url: str) -> Samples:
    """A scrape as Prometheus makes it: the web tier's /metrics wants its bearer token (the
    worker's endpoint, on loopback, ignores it)."""
    headers = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    response = httpx.get(url, headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def test_web_metrics_move_with_requests_and_tasks(stack: MetricsStack, client: OpsClient) -> None:
    metrics = f"{stack.web_urls[0]}/metrics"
    before = scrape(metrics)

    done = [client.create_task("slow_compute", {"seconds": 0.1})["taskId"] for _ in range(2)]
    failing = client.create_task("protocol_error_job")["taskId"]
    long = client.create_task("slow_compute", {"seconds": 30})["taskId"]
    assert client.cancel(long).result["resultType"] == "complete"
    for task_id in done:
        client.wait_for_status(task_id, "completed", timeout=15)
    client.wait_for_status(failing, "failed", timeout=15)

    asking = client.create_task("confirm_delete", {"filename": "m.txt"})["taskId"]
    task = client.wait_for_status(asking, "input_required", timeout=15)
    waiting = scrape(metrics)
    assert value(waiting, "mcpq_tasks_in_state", state="input_required") >= 1
    assert value(waiting, "mcpq_input_requests_outstanding") >= 1
    ((key, _request),) = task["inputRequests"].items()
    answer = {key: {"action": "accept", "content": {"confirm": True}}}
    assert client.update(asking, answer).result["resultType"] == "complete"
    client.wait_for_status(asking, "completed", timeout=15)

    expected = {
        ("mcpq_tasks_created_total", "slow_compute"): 3,
        ("mcpq_tasks_completed_total", "slow_compute"): 2,
        ("mcpq_tasks_cancelled_total", "slow_compute"): 1,
        ("mcpq_tasks_failed_total", "protocol_error_job"): 1,
        ("mcpq_tasks_completed_total", "confirm_delete"): 1,
    }

    def counted() -> dict[tuple[str, str], float]:
        now = scrape(metrics)
        return {(name, tool): delta(before, now, name, tool=tool) for name, tool in expected}

    # Creates and outcomes reach the counters within MCPQ_STATS_FLUSH_MS (mcpq.shared.store.tally),
    # and never count twice: a count past the expected one fails here too.
    wait_until(lambda: counted() == expected, timeout=10, interval=0.2, message="task counters")
    time.sleep(1.5)  # another flush interval: nothing more comes
    assert counted() == expected
    after = scrape(metrics)
    assert value(after, "mcpq_input_requests_outstanding") == value(
        before, "mcpq_input_requests_outstanding"
    )
    assert value(after, "mcpq_tasks_in_state", state="input_required") == value(
        before, "mcpq_tasks_in_state", state="input_required"
    )

    # Every request this client sent is counted once, whichever gunicorn worker served it.
    for (method, status), count in client.sent.items():
        got = delta(before, after, "mcpq_requests_total", method=method, http_status=status)
        assert got == count, (method, status, got, count)
    calls = client.sent[("tools/call", "200")]
    histogram = "mcpq_request_duration_seconds"
    assert delta(before, after, f"{histogram}_count", method="tools/call") == calls
    assert delta(before, after, f"{histogram}_bucket", method="tools/call", le="+Inf") == calls
    buckets = sorted(
        (float(dict(labels)["le"]), count)
        for (name, labels), count in after.items()
        if name == f"{histogram}_bucket" and dict(labels)["method"] == "tasks/get"
    )
    assert len(buckets) == 16 and buckets[-1][0] == float("inf")
    assert [c for _, c in buckets] == sorted(c for _, c in buckets), "buckets are cumulative"


def test_web_metrics_aggregate_both_gunicorn_workers(stack: MetricsStack) -> None:
    """Multiprocess mode: `mcpq web` made a PROMETHEUS_MULTIPROC_DIR, both workers write to it,
    and every scrape (whichever worker answers) reports the same totals."""
    directory = multiproc_dir(stack.webs[0].popen.pid)
    assert directory and Path(directory).name.startswith("mcpq-metrics-web-"), directory
    pids = {
        int(m.group(1))
        for path in Path(directory).iterdir()
        if (m := re.match(r"counter_(\d+)\.db$", path.name))
    }
    assert len(pids) >= 2, sorted(Path(directory).iterdir())
    url = f"{stack.web_urls[0]}/metrics"
    totals = set()
    for _ in range(8):
        samples = scrape(url)
        totals.add(sum(v for (n, _), v in samples.items() if n == "mcpq_requests_total"))
    assert len(totals) == 1, totals


def test_worker_metrics_count_runs_by_tool_and_outcome(
    stack: MetricsStack, client: OpsClient
) -> None:
    before = scrape(stack.worker_metrics_url)
    ok = client.create_task("slow_compute", {"seconds": 0.1})["taskId"]
    bad = client.create_task("protocol_error_job")["taskId"]
    long = client.create_task("slow_compute", {"seconds": 30})["taskId"]
    client.wait_for_status(long, "working", timeout=5)
    wait_until(lambda: client.task(long).get("statusMessage"), timeout=15)  # it runs
    assert client.cancel(long).result["resultType"] == "complete"
    client.wait_for_status(ok, "completed", timeout=15)
    client.wait_for_status(bad, "failed", timeout=15)

    expected = [("slow_compute", "completed"), ("slow_compute", "cancelled"),
                ("protocol_error_job", "failed")]  # fmt: skip

    def recorded() -> bool:
        after = scrape(stack.worker_metrics_url)
        return all(
            delta(before, after, "mcpq_tool_runs_total", tool=t, outcome=o) == 1
            for t, o in expected
        )

    wait_until(recorded, timeout=10, interval=0.2, message="worker run counters")
    after = scrape(stack.worker_metrics_url)
    for tool, outcome in expected:
        runs = value(after, "mcpq_tool_runs_total", tool=tool, outcome=outcome)
        count = value(after, "mcpq_tool_run_duration_seconds_count", tool=tool, outcome=outcome)
        assert runs == count >= 1, (tool, outcome)
    assert (
        value(after, "mcpq_tool_run_duration_seconds_sum", tool="slow_compute", outcome="completed")
        >= 0.1
    )


def dashboard_metric_names(prefix: str) -> set[str]:
    """Metric (sample) names the Grafana dashboard queries, by prefix."""
    dashboard = json.loads((REPO / "ops" / "grafana" / "mcpq.json").read_text())
    targets = [t for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs = [t["expr"] for t in targets if "expr" in t]  # (a Tempo target has a query)
    return {name for expr in exprs for name in re.findall(rf"\b{prefix}[a-z_]+", expr)}


def test_dashboard_queries_only_exported_metrics(stack: MetricsStack) -> None:
    """Every mcpq_* series the dashboard reads is served by the web tier or a worker
    (the earlier tests of this module made every counter move)."""
    served = {name for name, _ in scrape(f"{stack.web_urls[0]}/metrics")}
    served |= {name for name, _ in scrape(stack.worker_metrics_url)}
    used = dashboard_metric_names("mcpq_")
    assert used, "the dashboard reads no mcpq metric"
    assert used <= served, sorted(used - served)


def test_readyz_follows_redis_healthz_does_not(stack: MetricsStack, client: OpsClient) -> None:
    base = stack.web_urls[0]
    with httpx.Client(base_url=base, timeout=10) as http:

        def ready() -> bool:
            return http.get("/readyz").status_code == 200

        wait_until(ready, timeout=20, interval=0.2, message="/readyz 200")
        report = http.get("/readyz").json()
        assert report["redis"] is True and report["workers"] >= 1 and report["ready"] is True

        stack.stop_redis()
        stopped = time.monotonic()
        try:

            def not_ready() -> bool:
                assert http.get("/healthz").status_code == 200
                return http.get("/readyz").status_code == 503

            wait_until(not_ready, timeout=5, interval=0.1, message="/readyz 503 without Redis")
            assert time.monotonic() - stopped < 5
            assert http.get("/readyz").json()["redis"] is False
            down = client.call_tool("slow_compute", {"seconds": 0.1})
            assert down.status == 503, down
            assert http.get("/healthz").status_code == 200
            assert value(scrape(f"{base}/metrics"), "mcpq_store_errors_total") >= 1
        finally:
            stack.start_redis_again()  # the same port and arguments

        def back() -> bool:
            assert http.get("/healthz").status_code == 200
            return http.get("/readyz").status_code == 200

        wait_until(back, timeout=30, interval=0.2, message="/readyz 200 after Redis returned")
    task_id = client.create_task("slow_compute", {"seconds": 0.1})["taskId"]
    client.wait_for_status(task_id, "completed", timeout=30)  # the worker reconnected too
