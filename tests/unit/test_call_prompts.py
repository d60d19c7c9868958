"""`mcpq call`'s questions: required fields insist, optional ones may be left out, nothing is
asked without a terminal on stdin (``--answer`` answers up front), and the endpoint follows a
running `mcpq dev`.

The keyboard is a fake stdin that says it is a terminal; rich's prompts read it through
``input()``. No server: the portal runs each call at once against a scripted task.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from rich.console import Console

from mcpq.client import Task, TaskHandle
from mcpq.ops.cli import call
from mcpq.ops.cli.call_arguments import parse_answers
from mcpq.ops.cli.call_prompts import CannotPrompt, UsageError, ask_field, ask_form, ask_sampling
from mcpq.ops.dev.state import record_state
from mcpq.shared.settings import Settings

NOT_A_TERMINAL = (
    "cannot prompt: stdin is not a terminal (answer with --answer KEY=JSON or run in a terminal)"
)
APPROVE = {
    "type": "object",
    "properties": {
        "approve": {"type": "boolean", "description": "Deploy api 1?"},
        "reason": {"type": "string", "description": "Why (optional)"},
    },
    "required": ["approve"],
}


class Keyboard(io.StringIO):
    """Lines typed at a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def screen() -> io.StringIO:
    return io.StringIO()


@pytest.fixture
def ui(screen: io.StringIO) -> Console:
    return Console(file=screen, width=120, highlight=False, color_system=None)


def typing(monkeypatch: pytest.MonkeyPatch, *lines: str) -> Keyboard:
    keyboard = Keyboard("".join(f"{line}\n" for line in lines))
    monkeypatch.setattr(sys, "stdin", keyboard)
    return keyboard


def piped(monkeypatch: pytest.MonkeyPatch, text: str = "\n") -> None:
    """stdin a pipe (``echo | mcpq call ...``): not a terminal."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))


def form(schema: dict[str, Any] = APPROVE) -> types.ElicitRequestParams:
    return types.ElicitRequestFormParams(
        message="Approve deploying api 1 to production?", requested_schema=schema
    )


def all_read(keyboard: Keyboard) -> bool:
    return keyboard.tell() == len(keyboard.getvalue())


# -- required fields insist, optional ones may be left out ---------------------------------------
def test_a_required_boolean_asks_again_on_enter(
    monkeypatch: pytest.MonkeyPatch, ui: Console, screen: io.StringIO
) -> None:
    """It used to take a bare Enter as "n": a deployment refused by a stray key."""
    keyboard = typing(monkeypatch, "", "", "y")
    assert ask_field(ui, "approve", {"type": "boolean"}, required=True) is True
    assert all_read(keyboard)
    assert screen.getvalue().count("approve [y/n]") == 3


def test_a_boolean_takes_the_forms_default_on_enter(
    monkeypatch: pytest.MonkeyPatch, ui: Console
) -> None:
    typing(monkeypatch, "")
    assert ask_field(ui, "notify", {"type": "boolean", "default": False}, required=True) is False


@pytest.mark.parametrize(
    "prop",
    [{"type": "boolean"}, {"type": "string"}, {"type": "integer"}, {"enum": ["a", "b"]}],
    ids=["boolean", "string", "integer", "enum"],
)
def test_an_optional_field_left_empty_is_not_given(
    monkeypatch: pytest.MonkeyPatch, ui: Console, prop: dict[str, Any]
) -> None:
    typing(monkeypatch, "")
    assert ask_field(ui, "field", prop, required=False) is None


def test_a_required_string_asks_until_it_gets_one(
    monkeypatch: pytest.MonkeyPatch, ui: Console, screen: io.StringIO
) -> None:
    keyboard = typing(monkeypatch, "", "ab", "abc")
    assert ask_field(ui, "name", {"type": "string", "minLength": 3}, required=True) == "abc"
    assert all_read(keyboard)
    assert "required" in screen.getvalue() and "at least 3 characters" in screen.getvalue()


def test_a_required_number_asks_until_it_is_in_range(
    monkeypatch: pytest.MonkeyPatch, ui: Console, screen: io.StringIO
) -> None:
    keyboard = typing(monkeypatch, "", "many", "0", "3")
    prop = {"type": "integer", "minimum": 1, "maximum": 9}
    assert ask_field(ui, "steps", prop, required=True) == 3
    assert all_read(keyboard)
    assert "expected an integer" in screen.getvalue() and "at least 1" in screen.getvalue()


def test_a_required_choice_asks_until_it_gets_one(
    monkeypatch: pytest.MonkeyPatch, ui: Console
) -> None:
    keyboard = typing(monkeypatch, "", "c", "b")
    assert ask_field(ui, "pick", {"type": "string", "enum": ["a", "b"]}, required=True) == "b"
    assert all_read(keyboard)


def test_a_form_from_the_keyboard(monkeypatch: pytest.MonkeyPatch, ui: Console) -> None:
    typing(monkeypatch, "accept", "", "y", "")
    answer = ask_form(ui, form())
    assert (answer.action, answer.content) == ("accept", {"approve": True})


# -- no terminal: nothing is asked, --answer answers -----------------------------------------------
def test_without_a_terminal_a_form_is_not_asked(
    monkeypatch: pytest.MonkeyPatch, ui: Console
) -> None:
    """It used to read the pipe and stop on ``EOFError: EOF when reading a line``."""
    piped(monkeypatch)
    with pytest.raises(CannotPrompt) as caught:
        ask_form(ui, form())
    assert str(caught.value) == NOT_A_TERMINAL


def test_the_end_of_input_at_a_terminal_is_no_answer(
    monkeypatch: pytest.MonkeyPatch, ui: Console
) -> None:
    typing(monkeypatch)  # Ctrl-D at once
    with pytest.raises(CannotPrompt) as caught:
        ask_form(ui, form())
    assert str(caught.value) == (
        "cannot prompt: stdin ended (answer with --answer KEY=JSON or run in a terminal)"
    )


def test_answers_given_up_front_need_no_terminal(
    monkeypatch: pytest.MonkeyPatch, ui: Console
) -> None:
    piped(monkeypatch)
    answer = ask_form(ui, form(), {"approve": False, "reason": "freeze", "unrelated": 1})
    assert (answer.action, answer.content) == ("accept", {"approve": False, "reason": "freeze"})


def test_a_required_field_not_given_up_front_is_asked(
    monkeypatch: pytest.MonkeyPatch, ui: Console
) -> None:
    schema = {**APPROVE, "required": ["approve", "reason"]}
    keyboard = typing(monkeypatch, "rollout window")  # no accept/decline question first
    answer = ask_form(ui, form(schema), {"approve": True})
    assert answer.content == {"approve": True, "reason": "rollout window"}
    assert all_read(keyboard)
    piped(monkeypatch)
    with pytest.raises(CannotPrompt):
        ask_form(ui, form(schema), {"approve": True})


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (1, "--answer approve: expected a JSON boolean, got 1"),
        ("yes", "--answer approve: expected a JSON boolean, got 'yes'"),
    ],
)
def test_an_answer_that_does_not_fit_the_field_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, ui: Console, value: Any, error: str
) -> None:
    piped(monkeypatch)
    with pytest.raises(UsageError) as caught:
        ask_form(ui, form(), {"approve": value})
    assert str(caught.value) == error


def test_answers_are_checked_like_typed_ones(ui: Console) -> None:
    schema = {
        "type": "object",
        "properties": {
            "steps": {"type": "integer", "maximum": 9},
            "env": {"type": "string", "enum": ["staging", "prod"]},
        },
    }
    with pytest.raises(UsageError, match=r"^--answer steps: at most 9$"):
        ask_form(ui, form(schema), {"steps": 10})
    with pytest.raises(UsageError, match=r"^--answer steps: expected a JSON integer, got True$"):
        ask_form(ui, form(schema), {"steps": True})
    with pytest.raises(UsageError, match=r"^--answer env: expected one of staging, prod$"):
        ask_form(ui, form(schema), {"env": "dev"})


def test_a_sampling_request_without_a_terminal_names_the_command_option(
    monkeypatch: pytest.MonkeyPatch, ui: Console
) -> None:
    piped(monkeypatch)
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text="Hi"))
    params = types.CreateMessageRequestParams(messages=[message], max_tokens=10)
    with pytest.raises(CannotPrompt) as caught:
        ask_sampling(ui, params, None)
    assert str(caught.value) == (
        "cannot prompt: stdin is not a terminal (answer with --sampling-command CMD or run in a "
        "terminal)"
    )


def test_answer_pairs_are_keys_and_json_values() -> None:
    assert parse_answers(["approve=true", 'reason="a, b"', "steps=3", "tags=[1]"]) == {
        "approve": True,
        "reason": "a, b",
        "steps": 3,
        "tags": [1],
    }
    assert parse_answers(None) == {}
    with pytest.raises(UsageError, match=r"^--answer: expected KEY=JSON, got 'approve'$"):
        parse_answers(["approve"])
    with pytest.raises(UsageError) as caught:
        parse_answers(["reason=freeze"])
    assert str(caught.value) == (
        """--answer reason: not JSON (a string keeps its quotes: reason='"freeze"')"""
    )


# -- mcpq call cancels the task it started when nobody can answer ----------------------------------
class ScriptedServer:
    """A tool whose task asks one form; each portal call runs at once."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.status = "input_required"

    def start_task_soon(self, func: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(self.handle(func.__name__, *args))
        return future

    def call(self, func: Callable[..., Any], *args: Any) -> Any:
        return self.start_task_soon(func, *args).result()

    async def list_tools(self) -> None:
        """Stands in for the SDK client's (the portal runs ``handle`` instead)."""

    def handle(self, name: str, *args: Any) -> Any:
        self.calls.append(name)
        if name == "list_tools":
            tool = types.Tool(name="approve_deployment", input_schema={"type": "object"})
            return types.ListToolsResult(tools=[tool])
        if name == "start":
            return TaskHandle(task_id="t-1", status="working")
        if name == "cancel":
            self.status = "cancelled"
            return None
        if name == "update":
            self.status = "completed"
            return None
        body: dict[str, Any] = {"taskId": "t-1", "status": self.status, "pollIntervalMs": 50}
        if self.status == "input_required":
            request = {"method": "elicitation/create", "params": form().model_dump(by_alias=True)}
            body["inputRequests"] = {"q": request}
        if self.status == "completed":
            body["result"] = {"content": [{"type": "text", "text": "Deployed api 1."}]}
        return Task.model_validate(body)


def call_args(*answers: str) -> argparse.Namespace:
    return argparse.Namespace(
        command="call",
        tool="approve_deployment",
        arguments=[],
        json_args=None,
        detach=False,
        sampling_command=None,
        output="text",
        answers=parse_answers(list(answers)),
    )


def test_call_cancels_its_task_when_nobody_can_answer(
    monkeypatch: pytest.MonkeyPatch, ui: Console
) -> None:
    piped(monkeypatch)
    server = ScriptedServer()
    with pytest.raises(CannotPrompt):
        call._call(server, server, ui, call_args())  # type: ignore[arg-type]
    assert server.calls[-1] == "cancel" and "update" not in server.calls


def test_call_answers_the_task_from_the_command_line(
    monkeypatch: pytest.MonkeyPatch, ui: Console, capsys: pytest.CaptureFixture[str]
) -> None:
    piped(monkeypatch)
    server = ScriptedServer()
    assert call._call(server, server, ui, call_args("approve=true")) == 0  # type: ignore[arg-type]
    assert "update" in server.calls and "cancel" not in server.calls
    assert capsys.readouterr().out.strip() == "Deployed api 1."


# -- the endpoint: --url, MCPQ_URL, the running mcpq dev, the default ----------------------------
@pytest.fixture
def dev_running(tmp_path: Path) -> dict[str, str]:
    """An environment whose user runs `mcpq dev --port 9000` (this process stands in for it)."""
    environ = {"XDG_RUNTIME_DIR": str(tmp_path)}
    record_state(
        environ,
        redis_url="redis://127.0.0.1:6390/0",
        redis_shown="redis://127.0.0.1:6390/0",
        web_url="http://127.0.0.1:9000/mcp",
    )
    return environ


def test_the_endpoint_follows_a_running_mcpq_dev(dev_running: dict[str, str]) -> None:
    settings = Settings.from_env(dev_running)
    assert call.endpoint(None, settings, dev_running) == "http://127.0.0.1:9000/mcp"


def test_the_url_given_wins_over_mcpq_dev(dev_running: dict[str, str]) -> None:
    environ = {**dev_running, "MCPQ_URL": "https://mcp.example.test/mcp"}
    settings = Settings.from_env(environ)
    assert call.endpoint(None, settings, environ) == "https://mcp.example.test/mcp"
    assert call.endpoint("http://h:1/mcp", settings, environ) == "http://h:1/mcp"
    # MCPQ_URL set to the default is still a choice: not the dev server's port.
    environ["MCPQ_URL"] = "http://127.0.0.1:8000/mcp"
    assert call.endpoint(None, Settings.from_env(environ), environ) == environ["MCPQ_URL"]


def test_without_mcpq_dev_the_endpoint_is_the_local_default(tmp_path: Path) -> None:
    environ = {"XDG_RUNTIME_DIR": str(tmp_path)}
    settings = Settings.from_env(environ)
    assert call.endpoint(None, settings, environ) == "http://127.0.0.1:8000/mcp"
    # A state file left by an `mcpq dev` that was killed names a pid that is gone.
    state = tmp_path / "mcpq" / "dev.json"
    state.parent.mkdir(mode=0o700)
    state.write_text('{"pid": 999999999, "redis_url": null, "redis_shown": "", "web_url": "x"}')
    os.chmod(state, 0o600)
    assert call.endpoint(None, settings, environ) == "http://127.0.0.1:8000/mcp"
