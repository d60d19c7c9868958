"""The documented least-privilege Redis user runs the whole deployment.

The user is created from the ``ACL SETUSER`` line of ``docs/deploy.md`` (the one place it is
written; ``docs/security.md`` must show the same line), the default user is password-protected,
and every process of the stack connects as that user: ``mcpq web``, ``mcpq worker`` (the
Procfile's command: io pool, Celery's gossip and mingle), Flower and ``mcpq status``. The
end-to-end lifecycle, input and synchronous-call tests run here again against that stack (they
are imported below, and use this module's ``stack``), then the sweeper, ``/metrics`` and
``/readyz``, and the user's limits themselves.
"""

from __future__ import annotations

import re
import secrets
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from mcpq.ops.harness.mcp_client import McpClient
from mcpq.ops.runtime.processes import wait_until
from mcpq.ops.runtime.redis_binary import RedisProcess
from mcpq.shared.store import Keys, task_ref
from tests.e2e.conftest import E2E_TOOLS

# The end-to-end tests below are collected here again, and run against this module's stack.
from tests.e2e.test_input_required import (
    test_cancel_input_required_task_clears_its_requests,
    test_confirm_delete_accept_after_the_run_parked,
    test_confirm_delete_accept_hot_path_latency,
    test_multi_input_partial_answers,
)
from tests.e2e.test_sync_path import (
    test_abandoned_sync_call_stops_its_run,
    test_confirm_delete_without_opt_in_goes_through_mrtr,
    test_greet_with_opt_in_is_a_plain_result,
    test_slow_compute_without_opt_in_is_a_plain_call_tool_result,
)
from tests.e2e.test_task_lifecycle import (
    test_cancel_queued_task_never_runs,
    test_cancel_running_task_stops_within_2s,
    test_cancel_terminal_task_acks_and_changes_nothing,
    test_failing_job_completes_with_is_error,
    test_protocol_error_job_fails_with_error_and_status_message,
    test_slow_compute_task_completes_with_content,
)
from tests.support.stacks import FAST_KNOBS, LiveStack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

DOCS = Path(__file__).resolve().parents[2] / "docs"
NODE = "acl"
METRICS_TOKEN = secrets.token_urlsafe(32)


def documented_acl_line(page: str = "deploy.md") -> str:
    (line,) = re.findall(r"^ *(ACL SETUSER mcpq .*)$", (DOCS / page).read_text(), re.M)
    return str(line)


class AclStack(LiveStack):
    """A stack whose processes connect as the documented ACL user; the default user needs a
    password only the test knows (:attr:`admin_url`)."""

    password = secrets.token_urlsafe(24)
    admin_password = secrets.token_urlsafe(24)

    def start_redis(self, executable: str | None = None) -> RedisProcess:
        server = super().start_redis(executable)
        admin = redis.Redis.from_url(server.url, decode_responses=True)
        try:
            line = documented_acl_line().replace(">PASSWORD", f">{self.password}")
            assert admin.execute_command(*shlex.split(line)) in ("OK", True)
            admin.config_set("requirepass", self.admin_password)
        finally:
            admin.close()
        return server

    @property
    def plain_url(self) -> str:
        assert self.redis_server is not None, "start_redis() first"
        return self.redis_server.url

    @property
    def redis_url(self) -> str:
        return self.plain_url.replace("redis://", f"redis://mcpq:{self.password}@", 1)

    @property
    def admin_url(self) -> str:
        return self.plain_url.replace("redis://", f"redis://:{self.admin_password}@", 1)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclStack]:
    """Overrides the e2e layer's ``stack`` for this module: redis (ACL) + Flower + ``mcpq
    worker`` + two ``mcpq web`` replicas."""
    knobs = {**FAST_KNOBS, "MCPQ_METRICS_TOKEN": METRICS_TOKEN}
    running = AclStack("acl", tmp_path_factory.mktemp("acl-stack"), tools=E2E_TOOLS, env=knobs)
    try:
        running.start_redis()
        running.start_flower()
        pool = running.spawn_pool("mcpq", NODE)
        running.start_web()
        running.start_web()
        running.wait_ready(pool)
    except BaseException:
        running.abort()
        raise
    yield running
    running.close()


def test_docs_show_one_line() -> None:
    assert documented_acl_line("security.md") == documented_acl_line("deploy.md")


def test_the_sweeper_works_as_the_user(stack: AclStack, client: McpClient) -> None:
    """A run nobody consumes (``bulk``: no worker here) is sent again once it is due."""
    task_id = client.create_task("build_report", {"topic": "acl", "steps": 1})["taskId"]
    admin = redis.Redis.from_url(stack.admin_url, decode_responses=True)
    try:
        # Due now (instead of in MCPQ_UNCLAIMED_AFTER_S): the next sweep sends it again.
        assert admin.zadd(Keys().unclaimed, {task_ref(task_id): 0}, xx=True, ch=True) == 1
    finally:
        admin.close()
    stack.worker.wait_for_log("sweeper re-enqueued", timeout=15)
    assert "sweep failed" not in stack.worker.log()
    client.cancel(task_id)


def test_status_metrics_and_health_as_the_user(stack: AclStack, client: McpClient) -> None:
    task_id = client.create_task("slow_compute", {"seconds": 0.1})["taskId"]
    client.wait_for_status(task_id, "completed", timeout=20)
    ready = httpx.get(f"{stack.web_urls[0]}/readyz", timeout=5)
    assert ready.status_code == 200 and ready.json()["ready"] is True, ready.text
    bearer = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    completed = r'^mcpq_tasks_completed_total\{tool="slow_compute"\} [1-9]'

    def scraped() -> str:
        metrics = httpx.get(f"{stack.web_urls[0]}/metrics", headers=bearer, timeout=5)
        assert metrics.status_code == 200
        return metrics.text

    # (an outcome reaches the counters within MCPQ_STATS_FLUSH_MS: mcpq.shared.store.tally)
    wait_until(lambda: re.search(completed, scraped(), re.M), timeout=10, interval=0.2)
    status = subprocess.run(
        [sys.executable, "-m", "mcpq", "status"],
        env=stack.child_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert status.returncode == 0, status.stderr
    assert "workers answering a Celery ping: 1" in status.stdout, status.stdout
    workers = httpx.get(f"{stack.flower_url}/api/workers?refresh=1", timeout=20)
    assert workers.status_code == 200 and any(n.startswith(f"{NODE}@") for n in workers.json())
    for child in [*stack.webs, *stack.workers, *stack.extras]:
        log = child.log()
        assert "NOPERM" not in log and "NoPermission" not in log, (child.name, child.tail())


def test_nothing_was_denied(stack: AclStack) -> None:
    """Runs after the others but the next one (which is refused things on purpose): nothing
    run as the user (the reused tests included) needed more than the line grants, in any
    process, whether or not that process would have noticed (Redis's ACL log)."""
    admin = redis.Redis.from_url(stack.admin_url, decode_responses=True)
    try:
        entries = admin.acl_log()
    finally:
        admin.close()
    assert entries == [], entries


def test_the_user_is_limited(stack: AclStack) -> None:
    user = redis.Redis.from_url(stack.redis_url, decode_responses=True)
    try:
        for command in (
            ("FLUSHALL",),
            ("CONFIG", "GET", "maxmemory"),
            ("KEYS", "*"),
            ("SCRIPT", "FLUSH"),
            ("SHUTDOWN",),
            ("ACL", "LIST"),
            ("GET", "someone-else:key"),
        ):
            with pytest.raises(redis.exceptions.NoPermissionError):
                user.execute_command(*command)
        with pytest.raises(redis.exceptions.NoPermissionError):
            user.publish("someone-else", "hi")
    finally:
        user.close()
    admin = redis.Redis.from_url(stack.admin_url, decode_responses=True)
    try:
        denied = {entry["object"] for entry in admin.acl_log()}
    finally:
        admin.close()
    assert {"flushall", "config|get", "keys", "someone-else"} <= denied, denied
    anonymous = redis.Redis.from_url(stack.plain_url)
    try:
        with pytest.raises(redis.exceptions.AuthenticationError):
            anonymous.ping()
    finally:
        anonymous.close()


REUSED = (
    test_abandoned_sync_call_stops_its_run,
    test_cancel_input_required_task_clears_its_requests,
    test_cancel_queued_task_never_runs,
    test_cancel_running_task_stops_within_2s,
    test_cancel_terminal_task_acks_and_changes_nothing,
    test_confirm_delete_accept_after_the_run_parked,
    test_confirm_delete_accept_hot_path_latency,
    test_confirm_delete_without_opt_in_goes_through_mrtr,
    test_failing_job_completes_with_is_error,
    test_greet_with_opt_in_is_a_plain_result,
    test_multi_input_partial_answers,
    test_protocol_error_job_fails_with_error_and_status_message,
    test_slow_compute_task_completes_with_content,
    test_slow_compute_without_opt_in_is_a_plain_call_tool_result,
)
"""The reused tests (named here so that they read as used)."""
