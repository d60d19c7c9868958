"""`mcpq.client`, the Python tasks client, against a live stack.

The stack refuses ``tasks/*`` without ``Mcp-Name`` (``MCPQ_REQUIRE_TASK_NAME=1``), so every test
here also checks that the client sends the taskId in that header.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from mcpq import client as tasks
from mcpq.ops.harness.mcp_client import McpClient
from mcpq.ops.harness.stack import Stack
from mcpq.shared.settings import DEFAULT_TOOLS
from tests.support.stacks import FAST_KNOBS, LiveStack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture(scope="module")
def client_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    env = {**FAST_KNOBS, "MCPQ_REQUIRE_TASK_NAME": "1"}
    running = LiveStack(
        "pyclient", tmp_path_factory.mktemp("pyclient"), tools=DEFAULT_TOOLS, env=env
    )
    running.start(webs=1, workers=1, pool="io")
    yield running
    running.close()


def run(main: Callable[[], Awaitable[None]]) -> None:
    anyio.run(main)


def text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def readme_example() -> str:
    """The ```python block of README.md's "Python client" section, as written."""
    section = README.read_text().split("## Python client\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README.md: no python block under 'Python client'"
    return match.group(1)


def test_readme_example_runs_against_a_live_stack(client_stack: Stack) -> None:
    code = readme_example()
    assert len(code.strip().splitlines()) < 15
    assert "http://127.0.0.1:8000/mcp" in code
    code = code.replace("http://127.0.0.1:8000/mcp", client_stack.url(0))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "Approve deploying api 1 to production?" in lines
    # on_status reports the first read: `working`, or already `input_required` when the worker
    # asked before the client's first tasks/get arrived (a race: the run's message goes out
    # with the create, and a client process in its first calls can take 10+ ms to poll)
    assert lines[0] in {"working None", "input_required None"}
    assert "input_required None" in lines
    assert lines[-1] == "Deployed api 1."


def test_capabilities_follow_the_callbacks(client_stack: Stack) -> None:
    """Without an elicitation callback, elicitation is not declared: the tool cannot ask, and
    the task ends with a tool error instead of waiting for an answer nobody can give."""

    async def main() -> None:
        async with tasks.connect(client_stack.url(0)) as client:
            result = await tasks.call(
                client, "approve_deployment", {"service": "a", "version": "2"}
            )
            assert result.is_error, result
            assert "elicitation" in text(result)

    run(main)


def test_decline_and_status_callbacks(client_stack: Stack) -> None:
    asked: list[types.ElicitRequestParams] = []
    seen: list[str] = []

    async def decline(form: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(form)
        return types.ElicitResult(action="decline")

    async def main() -> None:
        async with tasks.connect(client_stack.url(0), on_input=decline) as client:
            result = await tasks.call(
                client,
                "approve_deployment",
                {"service": "web", "version": "3"},
                on_status=lambda task: seen.append(task.status),
            )
            assert text(result) == "Deployment of web 3 was not approved."

    run(main)
    assert len(asked) == 1
    assert isinstance(asked[0], types.ElicitRequestFormParams)
    assert asked[0].requested_schema["required"] == ["approve"]
    assert seen[-1] == "completed" and "input_required" in seen


def test_sampling_callback(client_stack: Stack) -> None:
    async def model(request: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        assert request.max_tokens == 50
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="short version"),
            model="test-model",
        )

    async def main() -> None:
        async with tasks.connect(client_stack.url(0), on_sampling=model) as client:
            result = await tasks.call(client, "summarize", {"text": "long text", "max_tokens": 50})
            assert text(result) == "short version"

    run(main)


def test_failed_and_cancelled_are_typed_errors(client_stack: Stack) -> None:
    async def main() -> None:
        async with tasks.connect(client_stack.url(0)) as client:
            with pytest.raises(tasks.TaskFailed) as failed:
                await tasks.call(client, "protocol_error_job")
            assert failed.value.code == -32603
            assert failed.value.task.status == "failed"

            handle = await tasks.start(client, "slow_compute", {"seconds": 60, "label": "c"})
            assert isinstance(handle, tasks.TaskHandle) and handle.status == "working"
            await tasks.cancel(client, handle.task_id)
            with pytest.raises(tasks.TaskCancelled) as cancelled:
                await tasks.wait(client, handle.task_id)
            assert cancelled.value.task_id == handle.task_id

            # A tool error is a completed task with an isError result, not an exception.
            result = await tasks.call(client, "failing_job")
            assert result.is_error and "failed on purpose" in text(result)

    run(main)


def test_manual_control_and_sync_tools(client_stack: Stack) -> None:
    async def unused(form: types.ElicitRequestParams) -> types.ElicitResult:
        raise AssertionError("answered by hand")

    async def main() -> None:
        # The callback only declares elicitation; tasks/get + tasks/update answer by hand.
        async with tasks.connect(client_stack.url(0), on_input=unused) as client:
            handle = await tasks.start(client, "confirm_delete", {"filename": "x.txt"})
            assert isinstance(handle, tasks.TaskHandle)
            task = await tasks.get(client, handle.task_id)
            with anyio.fail_after(20):
                while task.status != "input_required":
                    await anyio.sleep(0.1)
                    task = await tasks.get(client, handle.task_id)
            ((key, request),) = (task.input_requests or {}).items()
            assert isinstance(request, types.ElicitRequest)
            answer = types.ElicitResult(action="accept", content={"confirm": True})
            await tasks.update(client, handle.task_id, {key: answer})
            result = await tasks.wait(client, handle.task_id)
            assert text(result) == "Deleted x.txt"

            # A tool that never runs as a task answers at once.
            greeting = await tasks.start(client, "greet", {"name": "py"})
            assert isinstance(greeting, types.CallToolResult) and text(greeting) == "Hello, py!"

            with pytest.raises(tasks.MCPError) as unknown:
                await tasks.get(client, "no-such-task")
            assert unknown.value.code == -32602

    run(main)


def test_mrtr_before_the_task_goes_through_the_callback(client_stack: Stack) -> None:
    async def name(form: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def main() -> None:
        async with tasks.connect(client_stack.url(0), on_input=name) as client:
            result = await tasks.call(client, "test_tool_with_task")
            assert text(result) == "Hello, Ada! Your task is complete."

    run(main)


def test_cancelling_the_caller_cancels_the_task(client_stack: Stack) -> None:
    started: list[str] = []

    async def main() -> None:
        async with tasks.connect(client_stack.url(0)) as client:
            with anyio.move_on_after(3):
                await tasks.call(
                    client,
                    "slow_compute",
                    {"seconds": 60, "label": "abandoned"},
                    on_status=lambda task: started.append(task.task_id),
                )

    run(main)
    assert started
    with McpClient(client_stack.url(0)) as raw:
        raw.wait_for_status(started[0], "cancelled", timeout=10)
