"""``tasks/get``, ``tasks/update`` and ``tasks/cancel``: params (-32602), the capability gate
(-32021, before any lookup), the lookup (-32602 for unknown and foreign tasks alike), and the
wire shapes for every status (spec digest §4.6-§4.8, §6.2, §7)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mcpq.shared.store import task_ref
from mcpq.shared.tools import elicitation
from tests.unit.fakes import SERVER_INFO, TASKS, Mcp

METHODS = ["tasks/get", "tasks/update", "tasks/cancel"]
NOT_FOUND = "Failed to retrieve task: Task not found"
ASK = elicitation("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
ACCEPT = {"action": "accept", "content": {"name": "Ada"}}


def params_for(method: str, task_id: Any, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"taskId": task_id, **extra}
    if method == "tasks/update":
        params.setdefault("inputResponses", {})
    return params


def update(mcp: Mcp, task_id: str, responses: Any, **kw: Any) -> Any:
    return mcp.post("tasks/update", {"taskId": task_id, "inputResponses": responses}, **kw)


def cancel(mcp: Mcp, task_id: str, **kw: Any) -> Any:
    return mcp.post("tasks/cancel", {"taskId": task_id}, **kw)


def waiting_for_input(mcp: Mcp, keys: tuple[str, ...] = ("k1",), park: bool = False) -> str:
    """A task whose (fake) worker asked for ``keys`` and, with ``park``, let go of it."""
    task_id = mcp.new_task()
    claim = mcp.worker.claim_now(task_id)
    mcp.worker.ask_now(task_id, claim.gen, {key: ASK for key in keys})
    if park:
        assert mcp.worker.park_now(task_id, claim.gen) == "PARKED"
    return task_id


# -- params --------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("task_id", [None, 7, "", ["a"], {"id": "a"}])
def test_missing_or_ill_typed_task_id_is_32602(mcp: Mcp, method: str, task_id: Any) -> None:
    params = params_for(method, task_id)
    if task_id is None:
        del params["taskId"]
    name = task_id if isinstance(task_id, str) else "some-task"
    reply = mcp.post(method, params, Mcp_Name=name)
    assert reply.code() == (400, -32602)


@pytest.mark.parametrize("responses", [None, [], "yes", 3, {"k1": "accept"}, {"k1": None}])
def test_input_responses_must_be_an_object_of_objects(mcp: Mcp, responses: Any) -> None:
    task_id = waiting_for_input(mcp)
    params: dict[str, Any] = {"taskId": task_id}
    if responses is not None:
        params["inputResponses"] = responses
    assert mcp.post("tasks/update", params).code() == (400, -32602)
    assert mcp.get(task_id).result["status"] == "input_required"


@pytest.mark.parametrize("action", ["maybe", "ACCEPT", "", None])
def test_bad_action_is_32602(mcp: Mcp, action: Any) -> None:
    task_id = waiting_for_input(mcp)
    assert update(mcp, task_id, {"k1": {"action": action}}).code() == (400, -32602)
    assert mcp.get(task_id).result["status"] == "input_required"


# -- capability gate -----------------------------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("known", [True, False])
def test_no_opt_in_is_32021_with_required_capabilities(mcp: Mcp, method: str, known: bool) -> None:
    task_id = mcp.new_task() if known else "gate-test"
    reply = mcp.post(method, params_for(method, task_id), opt_in=False)
    assert reply.code() == (400, -32021)
    assert reply.error["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
    if known:
        assert mcp.get(task_id).result["status"] == "working"
    assert mcp.producer.revokes == []


def test_other_extensions_are_no_opt_in(mcp: Mcp) -> None:
    caps: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/ui": {}}, "elicitation": {}}
    reply = mcp.get(mcp.new_task(), opt_in=False, caps=caps)
    assert reply.code() == (400, -32021)


# -- lookup and authorization --------------------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
def test_unknown_task_with_opt_in_is_32602(mcp: Mcp, method: str) -> None:
    reply = mcp.post(method, params_for(method, "no-such-task"))
    assert reply.code() == (400, -32602)
    assert reply.error["message"] == NOT_FOUND


@pytest.mark.parametrize("method", METHODS)
def test_another_principals_task_reads_like_an_unknown_one(
    make_mcp: Callable[..., Mcp], method: str
) -> None:
    mcp = make_mcp(auth=("apikey",))
    alice, mallory = mcp.api_key("alice"), mcp.api_key("mallory")
    mcp.token = alice
    task_id = waiting_for_input(mcp)
    mcp.token = mallory
    stolen = mcp.post(method, params_for(method, task_id, inputResponses={"k1": ACCEPT}))
    unknown = mcp.post(method, params_for(method, "no-such-task"))
    assert stolen.code() == unknown.code() == (400, -32602)
    assert stolen.error == unknown.error
    mcp.token = alice
    after = mcp.get(task_id).result
    assert after["status"] == "input_required"
    assert list(after["inputRequests"]) == ["k1"]
    assert mcp.producer.revokes == []


# -- tasks/get for each status -------------------------------------------------------------------
TASK_FIELDS = {"taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}
ENVELOPE = {"resultType", "_meta"}


def test_get_working(mcp: Mcp) -> None:
    task_id = mcp.new_task()
    result = mcp.get(task_id).result
    assert set(result) == TASK_FIELDS | ENVELOPE
    assert result["resultType"] == "complete"
    assert (result["taskId"], result["status"]) == (task_id, "working")


def test_get_input_required_lists_all_outstanding_requests(mcp: Mcp) -> None:
    task_id = waiting_for_input(mcp, ("k1", "k2"))
    first = mcp.get(task_id).result
    assert set(first) == TASK_FIELDS | ENVELOPE | {"inputRequests"}
    assert first["resultType"] == "complete"
    assert first["status"] == "input_required"
    assert first["inputRequests"] == {"k1": ASK, "k2": ASK}
    assert mcp.get(task_id).result == first  # a pure read


def test_get_completed_inlines_the_result(mcp: Mcp) -> None:
    task_id = mcp.new_task()
    claim = mcp.worker.claim_now(task_id)
    payload = {"resultType": "complete", "content": [{"type": "text", "text": "hi"}]}
    assert mcp.worker.finish_now(task_id, claim.gen, "completed", payload) == "OK"
    result = mcp.get(task_id).result
    assert set(result) == TASK_FIELDS | ENVELOPE | {"result"}
    assert (result["resultType"], result["status"]) == ("complete", "completed")
    assert result["result"] == payload
    assert "io.modelcontextprotocol/related-task" not in result["result"].get("_meta", {})


def test_get_failed_inlines_the_error_and_a_status_message(mcp: Mcp) -> None:
    task_id = mcp.new_task()
    claim = mcp.worker.claim_now(task_id)
    error = {"code": -32603, "message": "API rate limit exceeded"}
    mcp.worker.finish_now(task_id, claim.gen, "failed", error)
    result = mcp.get(task_id).result
    assert set(result) == TASK_FIELDS | ENVELOPE | {"error", "statusMessage"}
    assert (result["status"], result["error"]) == ("failed", error)
    assert result["statusMessage"] == "API rate limit exceeded"


# -- tasks/update --------------------------------------------------------------------------------
def assert_ack(reply: Any) -> None:
    assert reply.status == 200
    assert set(reply.result) == {"resultType", "_meta"}
    assert reply.result["resultType"] == "complete"
    assert set(reply.result["_meta"]) == {SERVER_INFO}


def test_partial_update_keeps_the_task_waiting_for_the_rest(mcp: Mcp) -> None:
    task_id = waiting_for_input(mcp, ("k1", "k2"))
    assert_ack(update(mcp, task_id, {"k1": ACCEPT}))
    result = mcp.get(task_id).result
    assert result["status"] == "input_required"
    assert list(result["inputRequests"]) == ["k2"]
    assert result["lastUpdatedAt"] >= result["createdAt"]


def test_full_update_of_a_parked_task_re_enqueues_it(mcp: Mcp) -> None:
    task_id = waiting_for_input(mcp, ("k1",), park=True)
    assert_ack(update(mcp, task_id, {"k1": ACCEPT}))
    assert mcp.get(task_id).result["status"] == "working"
    ref = task_ref(task_id)
    assert mcp.producer.enqueues == [("enqueue", "echo", ref, "mcpq", True)] * 2
    claim = mcp.worker.claim_now(task_id)
    assert claim.answers is not None
    assert claim.answers["k1"] == '{"action":"accept","content":{"name":"Ada"}}'


def test_full_update_of_a_held_task_wakes_it_without_enqueueing(mcp: Mcp) -> None:
    task_id = waiting_for_input(mcp, ("k1",))
    assert_ack(update(mcp, task_id, {"k1": ACCEPT}))
    assert mcp.get(task_id).result["status"] == "working"
    assert len(mcp.producer.enqueues) == 1


@pytest.mark.parametrize("responses", [{}, {"bogus": ACCEPT}])
def test_update_with_nothing_applicable_is_acked_and_ignored(mcp: Mcp, responses: Any) -> None:
    task_id = waiting_for_input(mcp)
    assert_ack(update(mcp, task_id, responses))
    assert list(mcp.get(task_id).result["inputRequests"]) == ["k1"]


def test_update_of_a_working_task_is_acked_and_ignored(mcp: Mcp) -> None:
    task_id = mcp.new_task()
    assert_ack(update(mcp, task_id, {"k1": ACCEPT}))
    assert mcp.get(task_id).result["status"] == "working"


def test_replayed_answer_is_acked_and_ignored(mcp: Mcp) -> None:
    task_id = waiting_for_input(mcp, ("k1", "k2"))
    assert_ack(update(mcp, task_id, {"k1": ACCEPT}))
    assert_ack(update(mcp, task_id, {"k1": {"action": "decline"}}))
    claim = mcp.worker.claim_now(task_id)
    assert claim.reply == "BUSY"  # the first worker still holds its lease


# -- tasks/cancel --------------------------------------------------------------------------------
def test_cancel_a_working_task(mcp: Mcp) -> None:
    task_id = mcp.new_task()
    assert_ack(cancel(mcp, task_id))
    result = mcp.get(task_id).result
    assert result["status"] == "cancelled"
    assert set(result) == TASK_FIELDS | ENVELOPE | {"statusMessage"}
    assert mcp.producer.revokes == [task_ref(task_id)]


def test_cancel_clears_outstanding_requests_so_updates_cannot_resume(mcp: Mcp) -> None:
    task_id = waiting_for_input(mcp, park=True)
    assert_ack(cancel(mcp, task_id))
    assert "inputRequests" not in mcp.get(task_id).result
    assert_ack(update(mcp, task_id, {"k1": ACCEPT}))
    assert mcp.get(task_id).result["status"] == "cancelled"
    assert len(mcp.producer.enqueues) == 1


@pytest.mark.parametrize("status", ["completed", "failed", "cancelled"])
def test_cancel_a_terminal_task_is_an_ack_that_changes_nothing(mcp: Mcp, status: str) -> None:
    task_id = mcp.new_task()
    if status == "cancelled":
        assert_ack(cancel(mcp, task_id))
    else:
        claim = mcp.worker.claim_now(task_id)
        payload = {"content": []} if status == "completed" else {"code": -1, "message": "x"}
        mcp.worker.finish_now(task_id, claim.gen, status, payload)
    before = mcp.get(task_id).result
    revokes = list(mcp.producer.revokes)
    assert_ack(cancel(mcp, task_id))
    assert mcp.get(task_id).result == before
    assert mcp.producer.revokes == revokes


def test_revoke_failure_still_acks(mcp: Mcp, monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(ref: str) -> None:
        raise ConnectionError("broker down")

    monkeypatch.setattr(mcp.producer, "revoke", broken)
    task_id = mcp.new_task()
    assert_ack(cancel(mcp, task_id))
    assert mcp.get(task_id).result["status"] == "cancelled"
