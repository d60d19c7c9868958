"""``mcpq tasks`` against a live stack: an operator finds a task left waiting for a human, reads
it, and cancels it; the client then sees it ``cancelled`` through ``tasks/get``. Finished tasks
are listed too (a walk of the task records), page by page. No output ever carries a taskId (the
bearer token): tasks are named by their ref."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpq.ops.harness.mcp_client import McpClient
from mcpq.ops.harness.stack import Stack
from mcpq.shared.settings import DEFAULT_TOOLS
from mcpq.shared.store import task_ref
from tests.support.stacks import LiveStack

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def admin_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    running = LiveStack("opscli", tmp_path_factory.mktemp("opscli"), tools=DEFAULT_TOOLS)
    running.start(webs=1, workers=1, pool="io")
    yield running
    running.close()


@pytest.fixture
def client(admin_stack: Stack) -> Iterator[McpClient]:
    with McpClient(admin_stack.url(0)) as raw:
        yield raw


def mcpq(stack: Stack, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpq", *args],
        env=stack.child_env(),
        cwd=str(REPO),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def listed(stack: Stack, *args: str) -> dict[str, Any]:
    run = mcpq(stack, "tasks", "list", "--output", "json", *args)
    assert run.returncode == 0, run.stderr
    body: dict[str, Any] = json.loads(run.stdout)
    return body


def every_page(stack: Stack, *args: str) -> list[list[str]]:
    """The refs of each page of ``mcpq tasks list --output json ARGS``, cursor after cursor."""
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        page = listed(stack, *args, *(["--cursor", cursor] if cursor else []))
        pages.append([t["ref"] for t in page["tasks"]])
        cursor = page["nextCursor"]
        assert len(pages) < 500, "the walk does not end"
        if cursor is None:
            return pages


def waiting_approval(client: McpClient) -> str:
    task_id = str(
        client.create_task("approve_deployment", {"service": "api", "version": "9"})["taskId"]
    )
    client.wait_for_status(task_id, "input_required", timeout=30)
    return task_id


def test_list_finds_the_waiting_task_and_not_the_finished_one(
    admin_stack: Stack, client: McpClient
) -> None:
    waiting = waiting_approval(client)
    done = str(client.create_task("slow_compute", {"seconds": 0})["taskId"])
    client.wait_for_status(done, "completed", timeout=30)
    time.sleep(1.2)  # both older than 1s (ages are counted on Redis's clock)

    run = mcpq(admin_stack, "tasks", "list", "--state", "input_required", "--older-than", "1s")
    assert run.returncode == 0, run.stderr
    assert task_ref(waiting) in run.stdout
    assert task_ref(done) not in run.stdout, "a finished task is not listed"
    line = next(x for x in run.stdout.splitlines() if x.startswith(task_ref(waiting)))
    assert "input_required" in line and "approve_deployment" in line and "anonymous" in line
    for output in (run.stdout, run.stderr):
        assert waiting not in output and done not in output, "a taskId was printed"
    assert run.stderr.startswith("redis: redis://127.0.0.1:"), run.stderr

    # The filters: tool, principal, age; JSON for scripts
    refs = {t["ref"] for t in listed(admin_stack, "--tool", "approve_deployment")["tasks"]}
    assert task_ref(waiting) in refs
    assert listed(admin_stack, "--tool", "greet")["tasks"] == []
    mine = listed(admin_stack, "--principal", "anonymous")["tasks"]
    assert task_ref(waiting) in {t["ref"] for t in mine}
    assert listed(admin_stack, "--principal", "key:nobody")["tasks"] == []
    assert listed(admin_stack, "--older-than", "1h")["tasks"] == []
    (entry,) = [t for t in mine if t["ref"] == task_ref(waiting)]
    assert entry["status"] == "input_required" and entry["tool"] == "approve_deployment"
    assert entry["ageS"] >= 1.0

    # Finished tasks are listed by their state (a walk of the records), never as unfinished
    finished = mcpq(admin_stack, "tasks", "list", "--state", "completed", "--older-than", "1s")
    assert finished.returncode == 0, finished.stderr
    assert task_ref(done) in finished.stdout and task_ref(waiting) not in finished.stdout
    line = next(x for x in finished.stdout.splitlines() if x.startswith(task_ref(done)))
    assert "completed" in line and "slow_compute" in line
    for output in (finished.stdout, finished.stderr):
        assert waiting not in output and done not in output, "a taskId was printed"
    (entry,) = [
        t
        for t in listed(admin_stack, "--state", "completed")["tasks"]
        if t["ref"] == task_ref(done)
    ]
    assert entry["status"] == "completed" and entry["tool"] == "slow_compute"
    assert entry["ageS"] >= 1.0 and entry["updatedMs"] >= entry["createdMs"]
    everything = {t["ref"]: t["status"] for t in listed(admin_stack, "--limit", "1000")["tasks"]}
    assert everything[task_ref(waiting)] == "input_required", "no --state: every state"
    assert everything[task_ref(done)] == "completed"


def test_pagination_walks_every_unfinished_task_once(admin_stack: Stack, client: McpClient) -> None:
    made = {task_ref(waiting_approval(client)) for _ in range(3)}
    unfinished = ("--state", "working", "--state", "input_required")
    pages = every_page(admin_stack, *unfinished, "--limit", "1")
    seen = [ref for page in pages for ref in page]
    assert made <= set(seen) and len(seen) == len(set(seen))
    assert all(len(page) == 1 for page in pages), "oldest first, one a page, none empty"
    created = {t["ref"]: t["createdMs"] for t in listed(admin_stack, *unfinished)["tasks"]}
    assert [created[ref] for ref in seen] == sorted(created[ref] for ref in seen), "oldest first"
    text = mcpq(admin_stack, "tasks", "list", *unfinished, "--limit", "1")
    assert text.returncode == 0 and "more: --cursor " in text.stdout
    assert "--cursor scan." not in text.stdout, "the index's cursor: createdAt.ref"
    bad = mcpq(admin_stack, "tasks", "list", "--cursor", "nonsense")
    assert bad.returncode == 2 and "not a cursor" in bad.stderr


def test_pagination_walks_every_finished_task_once(admin_stack: Stack, client: McpClient) -> None:
    made = []
    for i in range(10):
        task_id = str(
            client.create_task("slow_compute", {"seconds": 0, "label": f"n{i}"})["taskId"]
        )
        made.append(task_id)
    for task_id in made:
        client.wait_for_status(task_id, "completed", timeout=30)
    pages = every_page(admin_stack, "--state", "completed", "--limit", "3")
    seen = [ref for page in pages for ref in page]
    assert {task_ref(t) for t in made} <= set(seen), "every finished task"
    assert len(seen) == len(set(seen)), "none twice"
    assert all(1 <= len(page) <= 3 for page in pages), [len(page) for page in pages]
    text = mcpq(admin_stack, "tasks", "list", "--state", "completed", "--limit", "3")
    assert text.returncode == 0 and "more: --cursor scan." in text.stdout
    assert not any(task_id in text.stdout + text.stderr for task_id in made)
    mismatched = text.stdout.rpartition("--cursor ")[2].strip()
    other = mcpq(admin_stack, "tasks", "list", "--state", "working", "--cursor", mismatched)
    assert other.returncode == 2 and "belongs to a listing of other states" in other.stderr


def test_show_prints_every_field_and_the_input_request(
    admin_stack: Stack, client: McpClient
) -> None:
    waiting = waiting_approval(client)
    ref = task_ref(waiting)
    run = mcpq(admin_stack, "tasks", "show", ref[:12])  # the 12 digits a log line shows
    assert run.returncode == 0, run.stderr
    assert f"ref: {ref}" in run.stdout
    assert "  status: input_required" in run.stdout
    assert '"service": "api"' in run.stdout, "the arguments, opened"
    assert "input requests outstanding: 1" in run.stdout
    assert "Approve deploying api 9 to production?" in run.stdout
    assert waiting not in run.stdout + run.stderr
    as_json = json.loads(mcpq(admin_stack, "tasks", "show", ref, "--output", "json").stdout)
    assert as_json["fields"]["args"] == {"service": "api", "version": "9"}
    assert len(as_json["inputRequests"]) == 1
    missing = mcpq(admin_stack, "tasks", "show", "0" * 32)
    assert missing.returncode == 1 and "no task with ref" in missing.stderr


def test_cancel_asks_first_and_the_client_sees_cancelled(
    admin_stack: Stack, client: McpClient
) -> None:
    waiting = waiting_approval(client)
    ref = task_ref(waiting)

    refused = mcpq(admin_stack, "tasks", "cancel", ref, stdin="no\n")
    assert refused.returncode == 1 and "nothing cancelled" in refused.stderr
    assert client.task(waiting)["status"] == "input_required"

    confirmed = mcpq(admin_stack, "tasks", "cancel", ref, stdin="yes\n")
    assert confirmed.returncode == 0, confirmed.stderr
    assert f"{ref}  cancelled" in confirmed.stdout
    task = client.wait_for_status(waiting, "cancelled", timeout=15)
    assert task["statusMessage"] == "Cancelled by an operator"

    again = mcpq(admin_stack, "tasks", "cancel", ref, "--yes", "--output", "json")
    assert again.returncode == 0
    assert json.loads(again.stdout)["results"] == {ref: "already finished"}

    other = waiting_approval(client)
    quiet = mcpq(admin_stack, "tasks", "cancel", task_ref(other), "--yes")
    assert quiet.returncode == 0 and "type 'yes'" not in quiet.stderr
    client.wait_for_status(other, "cancelled", timeout=15)
