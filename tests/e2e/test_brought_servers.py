"""A FastMCP 4.1 server and an MCP SDK 2.3 ``MCPServer`` (``tests/brought``, written as their
documentation shows), served unchanged by one mcpq stack (``MCPQ_TOOLS=module:mcp`` each): its own
Redis, a web process, two io-pool Celery workers.

- the official ``mcp`` 2.3 client (2026-07-28) lists their tools, resources, templates and
  prompts as the servers list them, reads and renders them;
- it runs each server's eliciting tool as a task: ``tasks/get`` shows the question the tool's
  own ``ctx.elicit`` built from its model, ``tasks/update`` answers it, the tool gets its typed
  answer;
- a synchronous call of each server's reporting tool gets ``notifications/progress`` and the
  log messages at or above the level it set;
- the worker running the eliciting tool is SIGKILLed while the tool waits for the answer: the
  other worker resumes the task, the question is not asked again (the same key), and the answer
  completes it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext

from mcpq import client as tasks
from mcpq.ops.harness.mcp_client import McpClient, text_of
from mcpq.ops.harness.stack import Stack
from mcpq.shared.store import task_ref
from tests.clients.node_clients import NodeInstall, installed_or_skip, run_sdk_scenario
from tests.e2e.test_tool_idiom import poll, the_question
from tests.faults.support import TaskWatch
from tests.support.anyio_run import run
from tests.support.procs import wait_until
from tests.support.stacks import LiveStack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

TOOLS = "tests.brought.fastmcp_shop:mcp,tests.brought.sdk_shop:mcp,tests.brought.fastmcp_steps:mcp"
CLIENT_INFO = types.Implementation(name="mcpq-e2e-brought", version="1.0.0")
KNOBS = {"MCPQ_INPUT_HOLD_S": "60", "MCPQ_LEASE_S": "2"}
Logged = tuple[str, str | None, Any]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    running = LiveStack("brought", tmp_path_factory.mktemp("brought"), tools=TOOLS, env=KNOBS)
    running.start(webs=1, workers=2, pool="io")
    yield running
    running.close()


async def never_asked(context: ClientRequestContext, params: Any) -> types.ElicitResult:
    """Declares elicitation (a task's questions are answered through ``tasks/update``)."""
    raise AssertionError(f"the SDK was asked through its callback: {params}")


def sdk(stack: Stack, *, task_client: bool = True, **options: Any) -> Client:
    """The official client; with the tasks extension (``mcpq.client``'s) unless ``task_client``
    is false (an ``optional`` tool is then called synchronously)."""
    return Client(
        stack.url(0),
        extensions=[tasks.TasksExtension()] if task_client else None,
        client_info=CLIENT_INFO,
        elicitation_callback=never_asked,
        **options,
    )


def texts(result: types.CallToolResult | None) -> str:
    assert result is not None
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def test_both_servers_are_listed_as_they_list_themselves(stack: Stack) -> None:
    async def main() -> None:
        async with sdk(stack) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {
                "refund",
                "reindex",
                "book_table",
                "long_running_task",
                "charge_and_ship",
            }
            refund = tools["refund"]
            assert (refund.title, refund.description) == (
                "Refund",
                "Refund an order once a person approves it.",
            )
            assert refund.input_schema["required"] == ["order_id", "amount"]
            assert tools["book_table"].input_schema["properties"]["party_size"]["type"] == (
                "integer"
            )
            resources = {str(r.uri) for r in (await client.list_resources()).resources}
            assert resources == {"shop://policy", "config://settings"}
            listed = (await client.list_resource_templates()).resource_templates
            assert {t.uri_template for t in listed} == {
                "shop://orders/{order_id}",
                "menu://dishes/{name}",
            }
            prompts = {p.name: p for p in (await client.list_prompts()).prompts}
            assert set(prompts) == {"apology", "review_code"}
            assert [(a.name, a.required) for a in prompts["apology"].arguments or []] == [
                ("customer", True),
                ("issue", False),
            ]

    run(main)


def test_their_resources_templates_and_prompts_are_read_and_rendered(stack: Stack) -> None:
    async def main() -> None:
        async with sdk(stack) as client:
            (policy,) = (await client.read_resource("shop://policy")).contents
            assert isinstance(policy, types.TextResourceContents), policy
            assert (policy.mime_type, policy.text) == (
                "text/markdown",
                "# Refunds\n\nWithin 30 days of delivery.",
            )
            (order,) = (await client.read_resource("shop://orders/A-9")).contents
            assert isinstance(order, types.TextResourceContents), order
            assert '"id":"A-9"' in order.text.replace(" ", ""), order.text
            (dish,) = (await client.read_resource("menu://dishes/risotto")).contents
            assert isinstance(dish, types.TextResourceContents), dish
            assert dish.text == "risotto: a house speciality"
            got = await client.get_prompt("apology", {"customer": "Ada"})
            (message,) = got.messages
            assert isinstance(message.content, types.TextContent), message
            assert message.content.text == "Write a short apology to Ada for a late delivery."
            review = await client.get_prompt("review_code", {"code": "x = 1"})
            assert isinstance(review.messages[0].content, types.TextContent), review
            assert review.messages[0].content.text == "Please review this code:\n\nx = 1"

    run(main)


@pytest.mark.parametrize(
    ("tool", "arguments", "answer", "message", "expected"),
    [
        (
            "refund",
            {"order_id": "A-1", "amount": 12.5},
            {"approve": True, "note": "damaged"},
            "Refund 12.50 on A-1?",
            "refunded 12.50 on A-1 (damaged)",
        ),
        (
            "book_table",
            {"date": "2024-12-25", "time": "19:00", "party_size": 4},
            {"checkAlternative": True, "alternativeDate": "2024-12-27"},
            "No tables available for 4 on 2024-12-25. Try another date?",
            "[SUCCESS] Booked for 2024-12-27 at 19:00",
        ),
    ],
    ids=["fastmcp", "sdk"],
)
def test_the_eliciting_tool_runs_as_a_task_answered_by_tasks_update(
    stack: Stack,
    tool: str,
    arguments: dict[str, Any],
    answer: dict[str, Any],
    message: str,
    expected: str,
) -> None:
    reads: list[tasks.Task] = []
    forms: list[types.ElicitRequestFormParams] = []

    async def main() -> None:
        async with sdk(stack) as client:
            handle = await tasks.start(client, tool, arguments)
            assert isinstance(handle, tasks.TaskHandle), handle
            waiting = await poll(client, handle.task_id, lambda t: t.status == "input_required")
            key, form = the_question(waiting[-1])
            forms.append(form)
            result = types.ElicitResult(action="accept", content=answer)
            await tasks.update(client, handle.task_id, {key: result})
            reads.extend(await poll(client, handle.task_id, lambda t: t.done))

    run(main)
    (form,) = forms
    assert form.message == message
    # The question is the one the tool's own elicit built from its model.
    assert set(form.requested_schema["properties"]) == set(answer), form.requested_schema
    assert reads[-1].status == "completed", reads[-1]
    assert texts(reads[-1].call_tool_result()) == expected


@pytest.mark.parametrize(
    ("tool", "arguments", "expected_logs", "expected"),
    [
        (
            "reindex",
            {"items": 3},
            [
                ("info", None, {"msg": "reindexing 3 items", "extra": None}),
                ("warning", "catalog", {"msg": "reindex finished", "extra": None}),
            ],
            '{"items":3,"status":"reindexed"}',
        ),
        (
            "long_running_task",
            {"task_name": "inventory", "steps": 3},
            [("info", None, "Starting: inventory")],
            "Task 'inventory' completed",
        ),
    ],
    ids=["fastmcp", "sdk"],
)
def test_a_synchronous_call_gets_progress_and_the_logs_of_its_level(
    stack: Stack,
    tool: str,
    arguments: dict[str, Any],
    expected_logs: list[Logged],
    expected: str,
) -> None:
    logs: list[Logged] = []
    progress: list[tuple[float, float | None, str | None]] = []
    outcome: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append((params.level, params.logger, params.data))

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async def main() -> None:
        options = {"log_level": "info", "logging_callback": on_log}
        async with sdk(stack, task_client=False, **options) as client:
            result = await client.call_tool(tool, arguments, progress_callback=on_progress)
            outcome.append(texts(result).replace(" ", ""))

    run(main)
    assert outcome == [expected.replace(" ", "")]
    assert logs == expected_logs, "at or above info, in order, as the server sends them"
    assert progress, "notifications/progress on the call's stream"
    assert [p[0] for p in progress] == sorted(p[0] for p in progress), progress
    # The last report (written just before the result, whatever was written on the way).
    assert progress[-1][:2] in {(3, 3), (1, 1)}, progress


@pytest.mark.parametrize(
    ("tool", "arguments", "content", "expected"),
    [
        (
            "refund",
            {"order_id": "K-1", "amount": 3},
            {"approve": True, "note": "after a crash"},
            "refunded 3.00 on K-1 (after a crash)",
        ),
        (
            "book_table",
            {"date": "2024-12-25", "time": "21:00", "party_size": 6},
            {"checkAlternative": True, "alternativeDate": "2024-12-28"},
            "[SUCCESS] Booked for 2024-12-28 at 21:00",
        ),
    ],
    ids=["fastmcp", "sdk"],
)
def test_sigkill_while_the_tool_waits_for_its_answer_asks_once_and_completes(
    stack: Stack, tool: str, arguments: dict[str, Any], content: dict[str, Any], expected: str
) -> None:
    with McpClient(stack.url(0)) as client:
        created = client.create_task(tool, arguments)
        task_id, ref = created["taskId"], task_ref(created["taskId"])
        watch = TaskWatch(client)
        watch.add([task_id])
        watch.wait_all("input_required", timeout=30)
        ((key, question),) = watch.last[task_id]["inputRequests"].items()
        victims = wait_until(
            lambda: stack.worker_that_received(tool, ref), timeout=10, message="its worker"
        )
        (victim,) = victims
        assert stack.task_hash(ref)["runs"] == "1"

        killed_at = stack.kill_group(victim, signal.SIGKILL)
        stack.start_worker(pool="io")  # a replacement: the module's stack keeps two workers
        stack.wait_runs(ref, 2, timeout=30)
        stack.reap(victim)
        # The resumed run waits on the same question (a second of reads after its start).
        for _ in range(10):
            task = watch.poll()[task_id]
            time.sleep(0.1)
        assert task["status"] == "input_required", task
        assert task["inputRequests"] == {key: question}, task["inputRequests"]

        answer = {"action": "accept", "content": content}
        assert client.update(task_id, {key: answer}).result["resultType"] == "complete"
        watch.wait_all("completed", timeout=30)
        print(f"\n[brought SIGKILL] kill -> completed: {time.monotonic() - killed_at:.2f}s")

    assert text_of(watch.last[task_id]["result"]) == expected
    assert watch.keys[task_id] == {key}, "the client saw one question over the task's life"
    assert stack.task_hash(ref)["runs"] == "2", "one resumed run"


# -- the TypeScript SDK (1.32.2), 2025-11-25 ---------------------------------------------------
@pytest.fixture(scope="module")
def node() -> NodeInstall:
    return installed_or_skip()


def test_typescript_sdk_lists_reads_and_renders_them(stack: Stack, node: NodeInstall) -> None:
    ran = run_sdk_scenario(node, stack.url(0), "initialize", {})
    assert ran.ok and ran.report.get("error") is None, ran.describe()
    listed = {t["name"] for t in ran.report["tools"]}
    assert {"refund", "reindex", "book_table", "long_running_task"} <= listed, ran.describe()
    reads = ["shop://policy", "config://settings", "shop://orders/B-2", "menu://dishes/soup"]
    ran = run_sdk_scenario(node, stack.url(0), "resources", {"read": reads})
    report, describe = ran.report, ran.describe()
    assert ran.ok and report.get("error") is None, describe
    assert report["protocolVersion"] == "2025-11-25", describe
    assert {r["uri"] for r in report["resources"]} == {"shop://policy", "config://settings"}
    templates = {t["uriTemplate"] for t in report["resourceTemplates"]}
    assert templates == {"shop://orders/{order_id}", "menu://dishes/{name}"}, describe
    texts_read = {uri: contents[0]["text"] for uri, contents in report["reads"].items()}
    assert texts_read["shop://policy"].startswith("# Refunds"), describe
    assert texts_read["config://settings"] == '{"theme": "dark", "language": "en"}', describe
    assert '"B-2"' in texts_read["shop://orders/B-2"], describe
    assert texts_read["menu://dishes/soup"] == "soup: a house speciality", describe

    got = [{"name": "apology", "arguments": {"customer": "Bo", "issue": "a cold soup"}}]
    ran = run_sdk_scenario(node, stack.url(0), "prompts", {"get": got})
    report, describe = ran.report, ran.describe()
    assert ran.ok and report.get("error") is None, describe
    assert {p["name"] for p in report["prompts"]} == {"apology", "review_code"}, describe
    (rendered,) = report["got"]
    text = rendered["messages"][0]["content"]["text"]
    assert text == "Write a short apology to Bo for a cold soup.", describe


@pytest.mark.parametrize(
    ("tool", "arguments", "progress", "logs", "expected"),
    [
        (
            "reindex",
            {"items": 2},
            [2, 2],
            [
                ["info", None, {"msg": "reindexing 2 items", "extra": None}],
                ["warning", "catalog", {"msg": "reindex finished", "extra": None}],
            ],
            '{"items":2,"status":"reindexed"}',
        ),
        (
            "long_running_task",
            {"task_name": "stock", "steps": 2},
            [1, 1],
            [
                ["info", None, "Starting: stock"],
                ["debug", None, "Completed step 1"],
                ["debug", None, "Completed step 2"],
            ],
            "Task 'stock' completed",
        ),
    ],
    ids=["fastmcp", "sdk"],
)
def test_typescript_sdk_synchronous_call_gets_progress_and_logs(
    stack: Stack,
    node: NodeInstall,
    tool: str,
    arguments: dict[str, Any],
    progress: list[int],
    logs: list[list[Any]],
    expected: str,
) -> None:
    """A 2025-era session hears every level until it sets one; the progress that reaches the
    call's stream ends where the tool ended."""
    ran = run_sdk_scenario(node, stack.url(0), "idiom", {"tool": tool, "arguments": arguments})
    report, describe = ran.report, ran.describe()
    assert ran.ok and report.get("error") is None, describe
    assert report["text"].replace(" ", "") == expected.replace(" ", ""), describe
    assert [[e["level"], e["logger"], e["data"]] for e in report["logs"]] == logs, describe
    assert report["progress"], f"no notifications/progress\n{describe}"
    last = report["progress"][-1]
    assert [last["progress"], last["total"]] == progress, describe
    assert all((e["via"] or "").startswith("tools/call") for e in report["logs"]), describe


def test_a_step_in_a_brought_tool_runs_once_across_a_sigkill(stack: Stack, tmp_path: Path) -> None:
    """``from mcpq import step`` in a FastMCP tool: its charge is written once, though the run
    that wrote it was killed and the tool ran again from the top."""
    ledger = tmp_path / "ledger.txt"
    with McpClient(stack.url(0)) as client:
        created = client.create_task("charge_and_ship", {"order_id": "S-1", "ledger": str(ledger)})
        task_id, ref = created["taskId"], task_ref(created["taskId"])
        watch = TaskWatch(client)
        watch.add([task_id])
        watch.wait_all("input_required", timeout=30)
        ((key, _),) = watch.last[task_id]["inputRequests"].items()
        assert ledger.read_text() == "charged S-1\n"
        (victim,) = wait_until(
            lambda: stack.worker_that_received("charge_and_ship", ref), timeout=10, message="it"
        )
        stack.kill_group(victim, signal.SIGKILL)
        stack.start_worker(pool="io")
        stack.wait_runs(ref, 2, timeout=30)
        stack.reap(victim)
        watch.wait_all("input_required", timeout=30)
        answer = {"action": "accept", "content": {"ship": True}}
        assert client.update(task_id, {key: answer}).result["resultType"] == "complete"
        watch.wait_all("completed", timeout=30)
    assert text_of(watch.last[task_id]["result"]) == "ch-S-1-53 shipped"
    assert ledger.read_text() == "charged S-1\n", "charged once across two runs"
    assert stack.task_hash(ref)["runs"] == "2"


# -- mcpq call, from a terminal's point of view (no terminal: answers given up front) ------------
def mcpq_call(stack: Stack, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpq", "call", "--url", stack.url(0), *argv],
        env=stack.child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["refund", "order_id=C-3", "amount=4.5", "--answer", "approve=true"],
            "refunded 4.50 on C-3 (no note)",
        ),
        (
            [
                *("book_table", "date=2024-12-25", "time=20:00", "party_size=2"),
                *("--answer", "checkAlternative=false"),
            ],
            "[CANCELLED] No booking made",
        ),
        (["long_running_task", "task_name=audit", "steps=2"], "Task 'audit' completed"),
    ],
    ids=["fastmcp-task", "sdk-task", "sdk-synchronous"],
)
def test_mcpq_call_runs_their_tools(stack: Stack, argv: list[str], expected: str) -> None:
    done = mcpq_call(stack, *argv)
    assert done.returncode == 0, done.stdout + done.stderr
    assert expected in done.stdout, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
