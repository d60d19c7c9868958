"""``shared.request_state``: the signed MRTR ``requestState`` (spec digest §6.1, §10)."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest

from shared.request_state import InvalidRequestState, RequestStateSigner, arguments_digest

ARGS = {"target": "db", "force": False}


def seal(signer: RequestStateSigner, **state: Any) -> str:
    return signer.seal("alice", "guarded", ARGS, {"kind": "pre", "answers": {}, **state})


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@pytest.fixture
def signer() -> RequestStateSigner:
    return RequestStateSigner("secret", 60)


def test_round_trip_carries_the_state_and_its_bindings(signer: RequestStateSigner) -> None:
    token = seal(signer, answers={"confirm": {"action": "accept"}})
    body = signer.open(token, "alice", "guarded", dict(ARGS))
    assert body["kind"] == "pre"
    assert body["answers"] == {"confirm": {"action": "accept"}}
    assert (body["v"], body["sub"], body["tool"]) == (1, "alice", "guarded")
    assert body["args"] == arguments_digest("guarded", ARGS)
    assert time.time() < body["exp"] <= time.time() + 61


def test_token_shape_is_header_and_url_safe(signer: RequestStateSigner) -> None:
    token = seal(signer)
    version, payload, mac = token.split(".")
    assert version == "v1"
    assert all(part and set(part) <= set(b64(bytes(range(256))) + "-_") for part in (payload, mac))
    assert len(unb64(mac)) == 32


def test_expired_token_is_refused() -> None:
    signer = RequestStateSigner("secret", -1)
    with pytest.raises(InvalidRequestState, match="expired"):
        signer.open(seal(signer), "alice", "guarded", ARGS)


def test_expiry_follows_the_clock(
    signer: RequestStateSigner, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = seal(signer)
    later = time.time() + 120
    monkeypatch.setattr(time, "time", lambda: later)
    with pytest.raises(InvalidRequestState, match="expired"):
        signer.open(token, "alice", "guarded", ARGS)


def test_another_secret_cannot_forge(signer: RequestStateSigner) -> None:
    forged = seal(RequestStateSigner("other", 60))
    with pytest.raises(InvalidRequestState, match="verification"):
        signer.open(forged, "alice", "guarded", ARGS)


def test_edited_payload_fails_verification(signer: RequestStateSigner) -> None:
    version, payload, mac = seal(signer).split(".")
    body = json.loads(unb64(payload))
    body["answers"] = {"confirm": {"action": "accept"}}
    edited = ".".join([version, b64(json.dumps(body).encode()), mac])
    with pytest.raises(InvalidRequestState, match="verification"):
        signer.open(edited, "alice", "guarded", ARGS)


def test_edited_mac_fails_verification(signer: RequestStateSigner) -> None:
    version, payload, mac = seal(signer).split(".")
    raw = bytearray(unb64(mac))
    raw[0] ^= 1
    with pytest.raises(InvalidRequestState, match="verification"):
        signer.open(".".join([version, payload, b64(bytes(raw))]), "alice", "guarded", ARGS)


@pytest.mark.parametrize(
    ("principal", "tool", "arguments", "match"),
    [
        ("mallory", "guarded", ARGS, "another request"),
        ("alice", "survey", ARGS, "another request"),
        ("alice", "guarded", {"target": "prod", "force": False}, "other arguments"),
        ("alice", "guarded", {"target": "db"}, "other arguments"),
    ],
)
def test_token_is_bound_to_principal_tool_and_arguments(
    signer: RequestStateSigner, principal: str, tool: str, arguments: dict[str, Any], match: str
) -> None:
    with pytest.raises(InvalidRequestState, match=match):
        signer.open(seal(signer), principal, tool, arguments)


@pytest.mark.parametrize(
    "token",
    [None, 12, b"v1.a.b", "", "v1", "v1.abc", "v2.abc.def", "v1.a.b.c", "x1.abc.def", "v1.!!.@@"],
)
def test_malformed_tokens_are_refused(signer: RequestStateSigner, token: Any) -> None:
    with pytest.raises(InvalidRequestState):
        signer.open(token, "alice", "guarded", ARGS)


def test_refusals_are_value_errors() -> None:
    assert issubclass(InvalidRequestState, ValueError)


def test_digest_depends_on_tool_and_arguments() -> None:
    base = arguments_digest("guarded", ARGS)
    assert base == arguments_digest("guarded", dict(ARGS))
    assert base != arguments_digest("other", ARGS)
    assert base != arguments_digest("guarded", {**ARGS, "force": True})
    assert len(base) == 64


def test_digest_ignores_key_order() -> None:
    nested = {"filters": {"a": 1, "b": 2}}
    reordered = {"filters": {"b": 2, "a": 1}}
    assert arguments_digest("t", nested) == arguments_digest("t", reordered)
