"""MRTR on ``tools/call`` (spec digest §6.1): ``ask_first`` rounds before a task exists, with a
signed ``requestState``; and a synchronous call whose worker asks for input mid-run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mcpq.shared.request_state import RequestStateSigner, parse_secrets
from mcpq.shared.results import call_tool_result
from mcpq.shared.store.records import TaskRecord
from mcpq.shared.tools import elicitation
from tests.unit.fakes import CONFIRM_SCHEMA, SERVER_INFO, Mcp, Reply

ELICIT: dict[str, Any] = {"elicitation": {}}
BOTH: dict[str, Any] = {"elicitation": {}, "sampling": {}}
YES = {"action": "accept", "content": {"ok": True}}
BLUE = {"action": "accept", "content": {"color": "blue"}}
BIG = {"role": "assistant", "content": {"type": "text", "text": "big"}, "model": "m"}


def round_one(mcp: Mcp, target: str = "db", **kw: Any) -> dict[str, Any]:
    reply = mcp.call("guarded", {"target": target}, caps=ELICIT, **kw)
    assert reply.status == 200, reply.content
    return reply.result


def retry(
    mcp: Mcp, tool: str, arguments: dict[str, Any], state: Any, responses: Any, **kw: Any
) -> Reply:
    extra = {"inputResponses": responses, "requestState": state}
    return mcp.call(tool, arguments, extra=extra, rid=2, **kw)


# -- ask_first before a task ---------------------------------------------------------------------
def test_round_one_asks_and_creates_nothing(mcp: Mcp) -> None:
    result = round_one(mcp)
    assert set(result) == {"resultType", "inputRequests", "requestState", "_meta"}
    assert result["resultType"] == "input_required"
    assert result["inputRequests"] == {"confirm": elicitation("Delete db?", CONFIRM_SCHEMA)}
    assert result["requestState"].startswith("v2.")
    assert set(result["_meta"]) == {SERVER_INFO}
    assert mcp.producer.calls == []
    assert not mcp.peek.keys(mcp.keys.task_prefix + "*")


def test_round_two_creates_the_task_with_the_answers_as_prelude(mcp: Mcp) -> None:
    state = round_one(mcp)["requestState"]
    result = retry(mcp, "guarded", {"target": "db"}, state, {"confirm": YES}, caps=ELICIT).result
    assert result["resultType"] == "task"
    assert "requestState" not in result
    assert "inputRequests" not in result
    record = mcp.record(result["taskId"])
    assert record is not None
    assert record.pre == {"confirm": YES}
    assert len(mcp.producer.enqueues) == 1
    assert mcp.get(result["taskId"]).result["status"] == "working"


def test_a_task_creating_state_is_single_use(mcp: Mcp) -> None:
    state = round_one(mcp)["requestState"]
    first = retry(mcp, "guarded", {"target": "db"}, state, {"confirm": YES}, caps=ELICIT)
    assert first.result["resultType"] == "task"
    replay = retry(mcp, "guarded", {"target": "db"}, state, {"confirm": YES}, caps=ELICIT)
    assert replay.code() == (400, -32602)
    assert "already used" in replay.error["message"]
    assert len(mcp.producer.enqueues) == 1


def test_a_decline_is_an_answer_too(mcp: Mcp) -> None:
    state = round_one(mcp)["requestState"]
    no = {"action": "decline"}
    result = retry(mcp, "guarded", {"target": "db"}, state, {"confirm": no}, caps=ELICIT).result
    record = mcp.record(result["taskId"])
    assert record is not None
    assert record.pre == {"confirm": no}


def tamper(token: str) -> str:
    """Change one character in the middle of the sealed part. (Not the last one: in unpadded
    base64 its low bits may be padding the decoder ignores, so the bytes would not change.)"""
    version, kid, sealed = token.split(".")
    i = len(sealed) // 2
    flipped = "A" if sealed[i] != "A" else "B"
    return ".".join([version, kid, sealed[:i] + flipped + sealed[i + 1 :]])


@pytest.mark.parametrize(
    "make_state",
    [tamper, lambda t: t[:-4], lambda t: "v2.00000000.AAAA", lambda t: "garbage", lambda t: 12345],
)
def test_tampered_or_malformed_request_state_is_32602(
    mcp: Mcp, make_state: Callable[[str], Any]
) -> None:
    state = make_state(round_one(mcp)["requestState"])
    reply = retry(mcp, "guarded", {"target": "db"}, state, {"confirm": YES}, caps=ELICIT)
    assert reply.code() == (400, -32602)
    assert mcp.producer.calls == []


def test_request_state_for_other_arguments_is_32602(mcp: Mcp) -> None:
    state = round_one(mcp, target="db")["requestState"]
    reply = retry(mcp, "guarded", {"target": "prod"}, state, {"confirm": YES}, caps=ELICIT)
    assert reply.code() == (400, -32602)
    assert "arguments" in reply.error["message"]


def test_request_state_for_another_tool_is_32602(mcp: Mcp) -> None:
    state = round_one(mcp)["requestState"]
    assert retry(mcp, "survey", {}, state, {}, caps=BOTH).code() == (400, -32602)


def test_request_state_of_another_principal_is_32602(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp(auth=("apikey",))
    alice, mallory = mcp.api_key("alice"), mcp.api_key("mallory")
    mcp.token = alice
    state = round_one(mcp)["requestState"]
    mcp.token = mallory
    reply = retry(mcp, "guarded", {"target": "db"}, state, {"confirm": YES}, caps=ELICIT)
    assert reply.code() == (400, -32602)


def test_expired_request_state_is_32602(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp(mrtr_state_ttl_s=-1)
    state = round_one(mcp)["requestState"]
    reply = retry(mcp, "guarded", {"target": "db"}, state, {"confirm": YES}, caps=ELICIT)
    assert reply.code() == (400, -32602)
    assert "expired" in reply.error["message"]


def test_request_state_from_a_server_with_another_secret_is_32602(
    make_mcp: Callable[..., Mcp],
) -> None:
    state = round_one(make_mcp(secret="one-" + "k" * 43 + "abcdefghijklmn"))["requestState"]
    other = make_mcp(secret="two-" + "k" * 43 + "abcdefghijklmn")
    reply = retry(other, "guarded", {"target": "db"}, state, {"confirm": YES}, caps=ELICIT)
    assert reply.code() == (400, -32602)


def test_partial_answers_ask_again_only_for_what_is_missing(mcp: Mcp) -> None:
    first = mcp.call("survey", {}, caps=BOTH).result
    assert set(first["inputRequests"]) == {"color", "size"}
    second = retry(mcp, "survey", {}, first["requestState"], {"color": BLUE}, caps=BOTH).result
    assert second["resultType"] == "input_required"
    assert set(second["inputRequests"]) == {"size"}
    assert second["inputRequests"]["size"]["method"] == "sampling/createMessage"
    assert mcp.producer.calls == []
    third = retry(mcp, "survey", {}, second["requestState"], {"size": BIG}, caps=BOTH).result
    assert third["resultType"] == "task"
    record = mcp.record(third["taskId"])
    assert record is not None
    assert record.pre == {"color": BLUE, "size": BIG}


def test_answers_to_unasked_keys_are_ignored(mcp: Mcp) -> None:
    state = round_one(mcp)["requestState"]
    result = retry(mcp, "guarded", {"target": "db"}, state, {"bogus": YES}, caps=ELICIT).result
    assert result["resultType"] == "input_required"
    assert set(result["inputRequests"]) == {"confirm"}


@pytest.mark.parametrize("responses", ["yes", ["confirm"], {"confirm": "yes"}])
def test_ill_typed_input_responses_are_32602(mcp: Mcp, responses: Any) -> None:
    state = round_one(mcp)["requestState"]
    reply = retry(mcp, "guarded", {"target": "db"}, state, responses, caps=ELICIT)
    assert reply.code() == (400, -32602)


@pytest.mark.parametrize(
    ("tool", "caps", "missing"),
    [
        ("guarded", {}, {"elicitation": {}}),
        ("guarded", {"sampling": {}}, {"elicitation": {}}),
        ("survey", ELICIT, {"sampling": {}}),
        ("survey", {}, {"elicitation": {}, "sampling": {}}),
    ],
)
def test_input_request_types_the_client_lacks_are_32021(
    mcp: Mcp, tool: str, caps: dict[str, Any], missing: dict[str, Any]
) -> None:
    arguments = {"target": "db"} if tool == "guarded" else {}
    reply = mcp.call(tool, arguments, caps=caps)
    assert reply.code() == (400, -32021)
    assert reply.error["data"] == {"requiredCapabilities": missing}


def test_ask_first_without_opt_in_runs_synchronously_with_the_prelude(mcp: Mcp) -> None:
    seen: list[dict[str, Any]] = []

    def outcome(record: TaskRecord, answers: dict[str, str]) -> tuple[str, dict[str, Any]]:
        seen.append(record.pre)
        return "completed", call_tool_result("deleted db").dump()

    mcp.producer.on_enqueue = mcp.worker.runs(outcome)
    state = round_one(mcp, opt_in=False)["requestState"]
    reply = retry(
        mcp, "guarded", {"target": "db"}, state, {"confirm": YES}, caps=ELICIT, opt_in=False
    )
    assert reply.result["content"] == [{"type": "text", "text": "deleted db"}]
    assert "taskId" not in reply.result
    assert seen == [{"confirm": YES}]


# -- a synchronous call whose worker asks mid-run ------------------------------------------------
ASK = {"k": elicitation("Name?", {"type": "object", "properties": {}})}


def asks_then_greets(record: TaskRecord, answers: dict[str, str]) -> tuple[str, dict[str, Any]]:
    if "k" not in answers:
        return "ask", ASK
    return "completed", call_tool_result(f"hello {answers['k']}").dump()


def test_mid_run_input_becomes_mrtr_and_the_retry_resumes_the_same_call(mcp: Mcp) -> None:
    mcp.producer.on_enqueue = mcp.worker.runs(asks_then_greets)
    first = mcp.call("quick", {"x": 1}, caps=ELICIT, opt_in=False).result
    assert set(first) == {"resultType", "inputRequests", "requestState", "_meta"}
    assert (first["resultType"], first["inputRequests"]) == ("input_required", ASK)
    answer = {"action": "accept", "content": {"name": "Ada"}}
    second = retry(mcp, "quick", {"x": 1}, first["requestState"], {"k": answer}, caps=ELICIT)
    assert second.result["resultType"] == "complete"
    text = second.result["content"][0]["text"]
    assert text == 'hello {"action":"accept","content":{"name":"Ada"}}'
    refs = {call[2] for call in mcp.producer.enqueues}
    assert len(mcp.producer.enqueues) == 2
    assert len(refs) == 1  # the retry resumed the same hidden task


def test_mid_run_input_without_the_capability_is_32021_and_cancels(mcp: Mcp) -> None:
    mcp.producer.on_enqueue = mcp.worker.runs(asks_then_greets)
    reply = mcp.call("quick", {"x": 1}, opt_in=False, Accept="application/json")
    assert reply.code() == (400, -32021)
    assert reply.error["data"] == {"requiredCapabilities": {"elicitation": {}}}
    [(_, _, ref, _, _)] = mcp.producer.enqueues
    hidden = mcp.record_by_ref(ref)
    assert hidden is not None
    assert hidden.status == "cancelled"


def test_sync_request_state_is_bound_to_its_arguments(mcp: Mcp) -> None:
    mcp.producer.on_enqueue = mcp.worker.runs(asks_then_greets)
    state = mcp.call("quick", {"x": 1}, caps=ELICIT, opt_in=False).result["requestState"]
    reply = retry(mcp, "quick", {"x": 2}, state, {"k": YES}, caps=ELICIT)
    assert reply.code() == (400, -32602)


def forge_sync_state(mcp: Mcp, task_id: str, tool: str, arguments: dict[str, Any]) -> str:
    """What an attacker holding the server's key could not do anyway, done with it: a sync
    state naming a task that is not the hidden call it claims (resume must check)."""
    signer = RequestStateSigner(parse_secrets(mcp.settings.secret), 60)
    state = {"kind": "sync", "task": task_id}
    return signer.seal("anonymous", "tools/call", tool, arguments, state)


def test_a_sync_state_cannot_reach_a_task_that_is_not_its_hidden_call(mcp: Mcp) -> None:
    visible = mcp.call("echo", {"text": "a"}, caps=ELICIT).result  # a task with a public id
    assert visible["resultType"] == "task"
    state = forge_sync_state(mcp, visible["taskId"], "echo", {"text": "a", "times": 1})
    reply = retry(mcp, "echo", {"text": "a"}, state, {"k": YES}, caps=ELICIT)
    assert reply.code() == (400, -32602)
    assert "expired" in reply.error["message"]
    record = mcp.record(visible["taskId"])
    assert record is not None and record.status == "working"  # untouched


def test_an_old_v1_state_naming_a_ref_is_refused(mcp: Mcp) -> None:
    mcp.producer.on_enqueue = mcp.worker.runs(asks_then_greets)
    mcp.call("quick", {"x": 1}, caps=ELICIT, opt_in=False)
    [(_, _, ref, _, _)] = mcp.producer.enqueues
    forged = "v1." + "e30" + "." + ref  # the public ref in any wrapper is not a state
    reply = retry(mcp, "quick", {"x": 1}, forged, {"k": YES}, caps=ELICIT)
    assert reply.code() == (400, -32602)


@pytest.mark.parametrize(
    "inside",
    [
        {"kind": "other", "task": "x"},  # a kind this server never seals
        {"kind": "sync", "task": 7},  # a running call's state without its task's id
        {"kind": "pre", "answers": [], "jti": "j"},  # answers that are not an object
        {"kind": "pre", "answers": {}},  # a gathering state that is not single-use
    ],
)
def test_a_state_whose_inside_is_not_one_of_ours_is_refused(
    mcp: Mcp, inside: dict[str, Any]
) -> None:
    """Each kind of state has one typed model (mcpq.frontend.calls.state); a sealed body that fits
    none is -32602, never read as the nearest kind."""
    signer = RequestStateSigner(parse_secrets(mcp.settings.secret), 60)
    state = signer.seal("anonymous", "tools/call", "echo", {"text": "a", "times": 1}, inside)
    reply = retry(mcp, "echo", {"text": "a"}, state, {}, caps=ELICIT)
    assert reply.code() == (400, -32602)
    assert "not one this server gave" in reply.error["message"]
    assert mcp.producer.enqueues == []  # nothing was created
