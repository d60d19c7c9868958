"""Tools in the FastMCP/SDK idiom (``tests/support/idiom_tools.py``: ``App``, ``Context``,
``await ctx.elicit(..., schema=Model)``, ``ctx.report_progress``, ``ctx.info``, ``asyncio.gather``)
served by ``mcpq dev`` exactly as a developer runs it (``MCPQ_TOOLS=module:app``), driven by the
official clients:

- the Python SDK (``mcp`` 2.3, 2026-07-28) runs ``refund`` as a task: ``tasks/get`` shows the
  typed question, ``tasks/update`` answers it, the result names the model's field; a declined and
  a cancelled question give the tool ``data=None``; an answer the model's form refuses is
  ``-32602`` and the task still waits for it;
- the Python SDK calls it synchronously: progress always, log messages only at or above the
  level the requests set (``_meta["io.modelcontextprotocol/logLevel"]``);
- the TypeScript SDK (1.32.2, 2025-11-25) calls it synchronously: its elicitation handler answers
  on the call's stream, and ``notifications/progress`` and ``notifications/message`` arrive there;
- the worker process running the tool is SIGKILLed while the tool awaits the answer: the task is
  resumed by another process, the question is not asked again, and the answer completes it.

One ``mcpq dev`` serves the module (its own Redis, web and workers, on free ports). Its worker
pool is ``cpu`` (prefork): a pool process can be killed alone, Celery starts another, and the
launcher (which stops everything when one of its own children dies) runs on. Short lease and
sweep, and a long input hold (a run waits for its answer in its slot, as a hot path does).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import mcp_types as types
import pytest
import redis
from mcp import Client, MCPError
from mcp.client.session import ClientRequestContext

from mcpq import client as tasks
from mcpq.ops.harness.mcp_client import McpClient, text_of
from mcpq.shared.store import Keys, task_ref
from tests.clients.node_clients import NodeInstall, installed_or_skip, run_sdk_scenario
from tests.faults.support import TaskWatch, lines
from tests.support.anyio_run import run
from tests.support.procs import (
    OutputLines,
    descendant_pids,
    free_port,
    kill_process_group,
    pid_alive,
    start_process_group,
    wait_until,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
TOOLS = "tests.support.idiom_tools:app"
MODULE = REPO / "tests" / "support" / "idiom_tools.py"
MODERN, LEGACY = "2026-07-28", "2025-11-25"
CLIENT_INFO = types.Implementation(name="mcpq-tool-idiom", version="1.0.0")
DEV_KNOBS = {
    "MCPQ_TOOLS": TOOLS,
    "MCPQ_WORKER_POOL": "cpu",  # a pool process dies alone (see the module's doc)
    "MCPQ_WORKER_CONCURRENCY": "3",
    "WEB_CONCURRENCY": "2",
    "MCPQ_LEASE_S": "2",
    "MCPQ_SWEEP_INTERVAL_S": "1",
    "MCPQ_INPUT_HOLD_S": "60",
    "MCPQ_POLL_INTERVAL_MS": "200",
    "MCPQ_SSE_KEEPALIVE_S": "2",
}


# -- mcpq dev ------------------------------------------------------------------------------------
@dataclass
class Dev:
    launcher: subprocess.Popen[bytes]
    output: OutputLines
    url: str
    redis_url: str

    def tree(self) -> set[int]:
        return descendant_pids(self.launcher.pid)

    def task_hash(self, task_id: str) -> dict[str, str]:
        client = redis.Redis.from_url(self.redis_url, decode_responses=True, socket_timeout=5)
        try:
            return client.hgetall(Keys().task(task_ref(task_id)))  # type: ignore[return-value]
        finally:
            client.close()


def dev_environment(tmp: Path) -> dict[str, str]:
    """The caller's environment without a Redis of its own (``mcpq dev`` starts one), with a
    private runtime folder (its state file) and temp folder, and :data:`DEV_KNOBS`."""
    env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "MCPQ_SECRET", "PORT"}}
    runtime, scratch = tmp / "run", tmp / "tmp"
    runtime.mkdir(mode=0o700)
    scratch.mkdir()
    pythonpath = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    env.update(
        XDG_RUNTIME_DIR=str(runtime),
        TMPDIR=str(scratch),
        PYTHONPATH=os.pathsep.join(pythonpath),
        PYTHONUNBUFFERED="1",
        **DEV_KNOBS,
    )
    return env


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dev]:
    tmp = tmp_path_factory.mktemp("idiom-dev")
    port = free_port()
    launcher = start_process_group(
        [sys.executable, "-m", "mcpq", "dev", "--port", str(port)],
        env=dev_environment(tmp),
        cwd=str(REPO),
    )
    output = OutputLines(launcher)
    tree: set[int] = set()
    try:
        output.wait_for("; Ctrl-C stops", timeout=150)  # the web answers, both workers reported
        url = f"http://127.0.0.1:{port}/mcp"
        assert f"mcpq | MCP endpoint: {url}\n" in output.lines, output.text[-4000:]
        redis_line = output.wait_for("mcpq | redis: ", timeout=5)
        redis_url = redis_line.split("mcpq | redis: ", 1)[1].split()[0]
        assert f"tools from {TOOLS}: refund, restock" in output.text, output.text[-4000:]
        running = Dev(launcher, output, url, redis_url)
        tree = running.tree()
        yield running
        tree |= running.tree()
        assert launcher.poll() is None, f"mcpq dev stopped:\n{output.text[-6000:]}"
        launcher.send_signal(signal.SIGINT)
        assert launcher.wait(timeout=60) == 0, output.text[-6000:]
    finally:
        kill_process_group(launcher, timeout=5)
        for pid in tree | descendant_pids(launcher.pid):
            if pid_alive(pid):  # after a failure: what this fixture started, by pid
                os.kill(pid, signal.SIGKILL)


# -- the Python SDK ------------------------------------------------------------------------------
Logged = tuple[str, str | None, Any]


def sdk(
    url: str,
    *,
    task_client: bool = True,
    answer: types.ElicitResult | None = None,
    log_level: types.LoggingLevel | None = None,
    logs: list[Logged] | None = None,
) -> Client:
    """The official SDK's ``Client`` (2026-07-28): with the tasks extension (``mcpq.client``'s)
    unless ``task_client`` is false; declaring elicitation, answered with ``answer`` (``None``:
    answered by hand through ``tasks/update``, the callback must not run); log messages into
    ``logs``, opted in at ``log_level``."""

    async def on_input(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert answer is not None, f"the SDK was asked through its callback: {params}"
        return answer

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        if logs is not None:
            logs.append((params.level, params.logger, params.data))

    return Client(
        url,
        extensions=[tasks.TasksExtension()] if task_client else None,
        client_info=CLIENT_INFO,
        elicitation_callback=on_input,
        logging_callback=on_log,
        log_level=log_level,
    )


async def poll(
    client: Client, task_id: str, until: Callable[[tasks.Task], bool], timeout: float = 30.0
) -> list[tasks.Task]:
    """``tasks/get`` every 50 ms until ``until``; every read."""
    reads: list[tasks.Task] = []
    deadline = time.monotonic() + timeout
    while True:
        task = await tasks.get(client, task_id)
        reads.append(task)
        if until(task):
            return reads
        if time.monotonic() > deadline:
            seen = [(r.status, r.status_message) for r in reads]
            raise AssertionError(f"task {task_id}: not there in {timeout}s; reads: {seen[-20:]}")
        await anyio.sleep(0.05)


def the_question(task: tasks.Task) -> tuple[str, types.ElicitRequestFormParams]:
    """The key and form of the one elicitation an ``input_required`` task asks."""
    assert task.status == "input_required", task
    ((key, request),) = (task.input_requests or {}).items()
    assert isinstance(request, types.ElicitRequest), request
    assert isinstance(request.params, types.ElicitRequestFormParams), request
    return key, request.params


def text(result: types.CallToolResult | None) -> str:
    assert result is not None
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def run_pids(evidence: Path) -> list[int]:
    return [int(line.split("=", 1)[1]) for line in lines(evidence) if line.startswith("run pid=")]


# -- the module as written -----------------------------------------------------------------------
def test_the_tool_module_passes_mypy_strict_on_the_public_api() -> None:
    # pyproject's [tool.mypy] is strict; a file named on the command line replaces its packages
    # (a bare `mypy` checks the package `mcpq` only, not tests/support).
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", str(MODULE.relative_to(REPO))],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    imported = [line for line in MODULE.read_text().splitlines() if "mcpq" in line]
    assert [line for line in imported if line.startswith(("from ", "import "))] == [
        "from mcpq import App, Context, Elicited"
    ]


# -- 1. a task through the Python SDK ------------------------------------------------------------
def test_python_sdk_runs_refund_as_a_task_answered_by_tasks_update(
    dev: Dev, tmp_path: Path
) -> None:
    evidence = tmp_path / "refund.txt"
    logs: list[Logged] = []
    reads: list[tasks.Task] = []

    async def main() -> None:
        # Opted in to every log level: a task still gets no notifications/message.
        async with sdk(dev.url, log_level="debug", logs=logs) as client:
            assert client.protocol_version == MODERN
            handle = await tasks.start(
                client, "refund", {"order_id": "A-17", "evidence": str(evidence)}
            )
            assert isinstance(handle, tasks.TaskHandle), handle
            waiting = await poll(client, handle.task_id, lambda t: t.status == "input_required")
            key, form = the_question(waiting[-1])
            assert form.message == "Refund A-17?"
            schema = form.requested_schema
            assert schema["type"] == "object" and schema.get("required") == ["reason"], schema
            assert {n: p["type"] for n, p in schema["properties"].items()} == {
                "reason": "string",
                "restock": "boolean",
            }, schema
            answer = types.ElicitResult(
                action="accept", content={"reason": "arrived broken", "restock": True}
            )
            await tasks.update(client, handle.task_id, {key: answer})
            reads.extend(await poll(client, handle.task_id, lambda t: t.done))

    run(main)
    final = reads[-1]
    assert final.status == "completed", final
    assert (
        text(final.call_tool_result()) == "refunded A-17 (ch-A-17, rc-A-17) reason=arrived broken"
    )
    # ctx.report_progress's message is the task's statusMessage while it runs
    messages = [read.status_message for read in reads]
    assert "charging" in messages and "receipt" in messages, messages
    assert messages.index("charging") < messages.index("receipt"), messages
    assert logs == [], "notifications/message for a task"
    (pid,) = run_pids(evidence)
    assert lines(evidence) == [f"run pid={pid}", "answered accept", "charged", "done"]


# -- 3. declined, cancelled, refused -------------------------------------------------------------
@pytest.mark.parametrize(
    ("tool", "arguments", "action", "expected"),
    [
        ("refund", {"order_id": "C-1"}, "decline", "refund of C-1 not done"),
        ("refund", {"order_id": "C-2"}, "cancel", "refund of C-2 not done"),
        ("restock", {"sku": "bolts"}, "decline", "restock of bolts not done"),
        ("restock", {"sku": "nuts"}, "cancel", "restock of nuts not done"),
    ],
    ids=[
        "async-pydantic-decline",
        "async-pydantic-cancel",
        "sync-dataclass-decline",
        "sync-dataclass-cancel",
    ],
)
def test_a_declined_or_cancelled_question_gives_the_tool_no_data(
    dev: Dev,
    tool: str,
    arguments: dict[str, Any],
    action: Literal["decline", "cancel"],
    expected: str,
) -> None:
    reads: list[tasks.Task] = []

    async def main() -> None:
        async with sdk(dev.url) as client:
            handle = await tasks.start(client, tool, arguments)
            assert isinstance(handle, tasks.TaskHandle), handle
            waiting = await poll(client, handle.task_id, lambda t: t.status == "input_required")
            key, _ = the_question(waiting[-1])
            await tasks.update(client, handle.task_id, {key: types.ElicitResult(action=action)})
            reads.extend(await poll(client, handle.task_id, lambda t: t.done))

    run(main)
    assert reads[-1].status == "completed", reads[-1]
    assert text(reads[-1].call_tool_result()) == f"{expected}: action={action} data=None"


def test_an_answer_the_model_refuses_is_invalid_params_and_the_task_still_waits(
    dev: Dev, tmp_path: Path
) -> None:
    evidence = tmp_path / "refused.txt"
    refusals: list[MCPError] = []
    reads: list[tasks.Task] = []

    async def main() -> None:
        async with sdk(dev.url) as client:
            handle = await tasks.start(
                client, "refund", {"order_id": "R-9", "evidence": str(evidence)}
            )
            assert isinstance(handle, tasks.TaskHandle), handle
            waiting = await poll(client, handle.task_id, lambda t: t.status == "input_required")
            key, form = the_question(waiting[-1])
            wrong: list[dict[str, Any]] = [
                {"reason": "too late", "restock": "yes"},  # a string for the boolean
                {"restock": True},  # the required reason missing
                {"reason": 42},  # a number for the string
            ]
            for content in wrong:
                answer = types.ElicitResult(action="accept", content=content)
                with pytest.raises(MCPError) as refused:
                    await tasks.update(client, handle.task_id, {key: answer})
                refusals.append(refused.value)
                after = await tasks.get(client, handle.task_id)
                assert after.status == "input_required", after
                assert the_question(after) == (key, form), "the same question, still open"
            fitting = types.ElicitResult(action="accept", content={"reason": "too late"})
            await tasks.update(client, handle.task_id, {key: fitting})
            reads.extend(await poll(client, handle.task_id, lambda t: t.done))

    run(main)
    assert [r.error.code for r in refusals] == [-32602] * 3, [r.error for r in refusals]
    assert "restock" in refusals[0].error.message, refusals[0].error
    assert "reason" in refusals[1].error.message, refusals[1].error
    assert text(reads[-1].call_tool_result()) == "refunded R-9 (ch-R-9, rc-R-9) reason=too late"
    assert lines(evidence)[1:] == ["answered accept", "charged", "done"], "one answer reached it"


# -- the Python SDK's synchronous call: progress, and logs at the requests' level ---------------
@pytest.mark.parametrize(
    ("level", "expected"),
    [
        (None, []),
        (
            "info",
            [
                ("info", "shop.refunds", "refunding S-1"),
                ("warning", None, {"order": "S-1", "restock": False}),
            ],
        ),
        ("warning", [("warning", None, {"order": "S-1", "restock": False})]),
    ],
    ids=["no-log-level", "info", "warning"],
)
def test_python_sdk_synchronous_call_gets_progress_and_the_logs_of_its_level(
    dev: Dev, level: types.LoggingLevel | None, expected: list[Logged]
) -> None:
    logs: list[Logged] = []
    updates: list[tuple[float, float | None, str | None]] = []
    results: list[types.CallToolResult] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    async def main() -> None:
        answer = types.ElicitResult(action="accept", content={"reason": "sync"})
        # No tasks extension: an optional tool runs synchronously; its question goes by MRTR.
        async with sdk(
            dev.url, task_client=False, answer=answer, log_level=level, logs=logs
        ) as client:
            assert client.protocol_version == MODERN
            result = await client.call_tool(
                "refund", {"order_id": "S-1"}, progress_callback=on_progress
            )
            assert isinstance(result, types.CallToolResult), result
            results.append(result)

    run(main)
    assert text(results[0]) == "refunded S-1 (ch-S-1, rc-S-1) reason=sync"
    assert updates == [(1, 3, "charging"), (2, 3, "receipt")], updates
    assert logs == expected, logs


# -- 2. a synchronous call through the TypeScript SDK, 2025-11-25 -------------------------------
@pytest.fixture(scope="module")
def node() -> NodeInstall:
    return installed_or_skip()


@pytest.mark.parametrize(
    ("tool", "arguments", "content", "expected"),
    [
        (
            "refund",
            {"order_id": "B-2"},
            {"reason": "late", "restock": False},
            {
                "text": "refunded B-2 (ch-B-2, rc-B-2) reason=late",
                "question": "Refund B-2?",
                "progress": [[1, 3, "charging"], [2, 3, "receipt"]],
                "logs": [
                    ["info", "shop.refunds", "refunding B-2"],
                    ["warning", None, {"order": "B-2", "restock": False}],
                ],
            },
        ),
        (
            "restock",
            {"sku": "washers"},
            {"count": 4},
            {
                "text": "restocked washers: count=4 unit=box",
                "question": "How many washers?",
                "progress": [[1, 2, "ordering"]],
                "logs": [["info", None, {"sku": "washers", "count": 4}]],
            },
        ),
    ],
    ids=["async-pydantic", "sync-dataclass"],
)
def test_typescript_sdk_synchronous_call_answers_and_gets_progress_and_logs(
    dev: Dev,
    node: NodeInstall,
    tool: str,
    arguments: dict[str, Any],
    content: dict[str, Any],
    expected: dict[str, Any],
) -> None:
    elicit = {"action": "accept", "content": content}
    ran = run_sdk_scenario(
        node, dev.url, "idiom", {"tool": tool, "arguments": arguments, "elicit": elicit}
    )
    report, describe = ran.report, ran.describe()
    assert ran.ok and report.get("error") is None, describe
    assert report["protocolVersion"] == LEGACY, describe
    assert report["text"] == expected["text"] and report["isError"] is False, describe

    (asked,) = report["elicitations"]
    assert asked["message"] == expected["question"], describe
    assert set(asked["requestedSchema"]["properties"]) == set(content) | (
        {"restock"} if tool == "refund" else {"unit"}
    ), describe
    assert (asked["via"] or "").startswith("tools/call"), f"not on the call's stream\n{describe}"

    progress = [[p["progress"], p["total"], p["message"]] for p in report["progress"]]
    assert progress == expected["progress"], describe
    logs = [[entry["level"], entry["logger"], entry["data"]] for entry in report["logs"]]
    assert logs == expected["logs"], describe
    assert all((entry["via"] or "").startswith("tools/call") for entry in report["logs"]), describe
    # All of it on the call's own stream, before its response
    events = [e["msg"] for e in report["callStream"]["events"]]
    last = events.index(next(e for e in events if e.startswith("result#")))
    assert last == len(events) - 1, describe
    on_stream = [e for e in events if e.startswith("notifications/")]
    assert on_stream.count("notifications/progress") == len(expected["progress"]), describe
    assert on_stream.count("notifications/message") == len(expected["logs"]), describe


def test_typescript_sdk_task_gets_its_question_on_tasks_result_and_no_log_message(
    dev: Dev, node: NodeInstall
) -> None:
    """The 2025-11-25 task of the same tool: its question comes on ``tasks/result``'s stream,
    and no ``notifications/message`` on any stream (never log messages for a task)."""
    elicit = {"action": "accept", "content": {"reason": "as a task"}}
    arguments = {"tool": "refund", "arguments": {"order_id": "T-3"}, "elicit": elicit}
    ran = run_sdk_scenario(node, dev.url, "idiomTask", arguments)
    report, describe = ran.report, ran.describe()
    assert ran.ok and report.get("error") is None, describe
    assert report["protocolVersion"] == LEGACY and report["isToolTask"] is True, describe
    kinds = [m["type"] for m in report["messages"]]
    assert kinds[:1] == ["taskCreated"] and kinds[-1:] == ["result"], describe
    assert report["text"] == "refunded T-3 (ch-T-3, rc-T-3) reason=as a task", describe
    (asked,) = report["elicitations"]
    assert (asked["via"] or "").startswith("tasks/result"), describe
    assert report["logs"] == [], describe
    streamed = [e["msg"] for entry in report["http"] for e in entry.get("events") or []]
    assert "notifications/message" not in streamed, describe


def test_the_server_declares_the_logging_capability(dev: Dev, node: NodeInstall) -> None:
    """A server that sends ``notifications/message`` declares ``logging`` (2025-11-25 and
    2026-07-28 alike: "Servers that emit log message notifications MUST declare the logging
    capability"): in ``initialize`` and in ``server/discover``."""
    ran = run_sdk_scenario(node, dev.url, "initialize", {"listTools": False})
    assert ran.ok and ran.report["protocolVersion"] == LEGACY, ran.describe()
    legacy = ran.report["serverCapabilities"] or {}
    modern: list[dict[str, Any]] = []

    async def main() -> None:
        async with sdk(dev.url, task_client=False) as client:
            discovered = client.session.discover_result
            assert discovered is not None
            modern.append(discovered.capabilities.model_dump(by_alias=True, exclude_none=True))

    run(main)
    assert ("logging" in legacy, "logging" in modern[0]) == (True, True), (legacy, modern[0])


# -- 4. SIGKILL of the process running the tool while it awaits the answer ----------------------
def test_sigkill_while_the_tool_awaits_the_answer_asks_once_and_completes(
    dev: Dev, tmp_path: Path
) -> None:
    evidence = tmp_path / "killed.txt"
    with McpClient(dev.url) as client:
        task_id = client.create_task("refund", {"order_id": "K-1", "evidence": str(evidence)})[
            "taskId"
        ]
        watch = TaskWatch(client)
        watch.add([task_id])
        watch.wait_all("input_required", timeout=30)
        ((key, question),) = watch.last[task_id]["inputRequests"].items()
        assert question["params"]["message"] == "Refund K-1?"
        (victim,) = run_pids(evidence)
        assert victim in dev.tree(), "the run's process is one of mcpq dev's"
        assert dev.task_hash(task_id)["runs"] == "1"
        assert dev.task_hash(task_id)["parked"] == "0", "the run waits in its slot"

        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()

        def resumed() -> list[int] | None:
            watch.poll()
            pids = run_pids(evidence)
            return pids if len(pids) == 2 else None

        pids = wait_until(resumed, timeout=60, interval=0.1, message="the run resumed")
        resumed_after = time.monotonic() - killed_at
        assert pids[1] != victim and not pid_alive(victim), pids
        assert pids[1] in dev.tree(), pids
        # The resumed run waits on the same question, not a second one: the same key, as it was
        # (a second of reads after its start, in which it has asked again)
        for _ in range(10):
            task = watch.poll()[task_id]
            time.sleep(0.1)
        assert dev.task_hash(task_id)["runs"] == "2", "one resumed run"
        assert task["status"] == "input_required", task
        assert task["inputRequests"] == {key: question}, task["inputRequests"]

        ack = client.update(task_id, {key: {"action": "accept", "content": {"reason": "lost"}}})
        assert ack.result["resultType"] == "complete", ack
        watch.wait_all("completed", timeout=30)
        print(f"\n[idiom SIGKILL] the kill -> the resumed run: {resumed_after:.2f}s")

    assert text_of(watch.last[task_id]["result"]) == "refunded K-1 (ch-K-1, rc-K-1) reason=lost"
    assert watch.keys[task_id] == {key}, "the client saw one question over the task's life"
    assert lines(evidence) == [
        f"run pid={victim}",
        f"run pid={pids[1]}",
        "answered accept",
        "charged",
        "done",
    ], "one answer, one charge, across two runs"
    assert dev.task_hash(task_id)["runs"] == "2"
    assert dev.launcher.poll() is None, "mcpq dev runs on"
