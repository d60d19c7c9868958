"""``mcpq.shared.request_state``: the sealed MRTR ``requestState`` (spec digest §6.1, §10)."""

from __future__ import annotations

import base64
import time
from typing import Any

import pytest

from mcpq.shared.request_state import (
    InvalidRequestState,
    RequestStateSigner,
    WeakSecret,
    arguments_digest,
    new_secret,
    parse_secrets,
)

ARGS = {"target": "db", "force": False}
KEY_A = new_secret()
KEY_B = new_secret()


def seal(signer: RequestStateSigner, **state: Any) -> str:
    return signer.seal("alice", "tools/call", "guarded", ARGS, {"kind": "pre", **state})


def open_(signer: RequestStateSigner, token: Any, **over: Any) -> dict[str, Any]:
    call = {"principal": "alice", "method": "tools/call", "tool": "guarded", "arguments": ARGS}
    call.update(over)
    return signer.open(token, call["principal"], call["method"], call["tool"], call["arguments"])


@pytest.fixture
def signer() -> RequestStateSigner:
    return RequestStateSigner([KEY_A], 60)


def test_round_trip_carries_the_state_and_its_bindings(signer: RequestStateSigner) -> None:
    token = seal(signer, answers={"confirm": {"action": "accept"}})
    body = open_(signer, token)
    assert body["answers"] == {"confirm": {"action": "accept"}}
    assert (body["sub"], body["m"], body["tool"]) == ("alice", "tools/call", "guarded")
    assert body["args"] == arguments_digest("guarded", ARGS)


def test_the_token_is_encrypted_and_url_safe(signer: RequestStateSigner) -> None:
    token = seal(signer, answers={"confirm": {"content": {"word": "swordfish"}}})
    version, kid, sealed = token.split(".")
    assert version == "v2" and len(kid) == 8
    raw = base64.urlsafe_b64decode(sealed + "=" * (-len(sealed) % 4))
    assert b"swordfish" not in raw and b"alice" not in raw
    assert all(c.isalnum() or c in "-_." for c in token)
    assert seal(signer) != seal(signer)  # a fresh nonce each time


def test_a_state_never_outlives_what_it_stands_for(signer: RequestStateSigner) -> None:
    soon = int(time.time() * 1000) + 5_000
    token = signer.seal("alice", "tools/call", "guarded", ARGS, {}, expires_ms=soon)
    assert open_(signer, token)["exp"] <= soon / 1000
    past = int(time.time() * 1000) - 1
    gone = signer.seal("alice", "tools/call", "guarded", ARGS, {}, expires_ms=past)
    with pytest.raises(InvalidRequestState, match="expired"):
        open_(signer, gone)


def test_expired_tokens_are_refused() -> None:
    signer = RequestStateSigner([KEY_A], -1)
    with pytest.raises(InvalidRequestState, match="expired"):
        open_(signer, seal(signer))


def test_another_key_cannot_forge_and_old_keys_still_open(signer: RequestStateSigner) -> None:
    other = RequestStateSigner([KEY_B], 60)
    with pytest.raises(InvalidRequestState, match="verification"):
        open_(signer, seal(other))
    rotated = RequestStateSigner([KEY_B, KEY_A], 60)  # new key first, old one still opens
    assert open_(rotated, seal(signer))["kind"] == "pre"
    assert open_(other, seal(rotated))["kind"] == "pre"  # and the new one seals


def test_an_edited_token_fails_verification(signer: RequestStateSigner) -> None:
    version, kid, sealed = seal(signer).split(".")
    flipped = sealed[:-2] + ("AA" if sealed[-2:] != "AA" else "BB")
    with pytest.raises(InvalidRequestState):
        open_(signer, ".".join([version, kid, flipped]))
    # The key id and version are authenticated data: moving the token to another fails.
    with pytest.raises(InvalidRequestState):
        open_(signer, ".".join(["v1", kid, sealed]))


@pytest.mark.parametrize(
    ("over", "match"),
    [
        ({"principal": "mallory"}, "another request"),
        ({"method": "tasks/update"}, "another request"),
        ({"tool": "other"}, "another request"),
        ({"arguments": {"target": "prod", "force": False}}, "other arguments"),
    ],
)
def test_bindings(signer: RequestStateSigner, over: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidRequestState, match=match):
        open_(signer, seal(signer), **over)


@pytest.mark.parametrize("token", [None, 5, "", "v2.x", "v2.abcdefgh.!!!", "a.b.c.d", "v2..AA"])
def test_malformed_tokens_are_refused(signer: RequestStateSigner, token: Any) -> None:
    with pytest.raises(InvalidRequestState):
        open_(signer, token)


@pytest.mark.parametrize(
    "raw",
    [
        "x",
        "short-but-not-empty",
        "a" * 64,  # long, not random
        "change-me-to-a-long-random-string",
        "the-same-long-random-string-on-every-web-host",
        pytest.param(f"{new_secret()},weak", id="strong,weak"),  # ids alike in every worker
        "",
    ],
)
def test_weak_or_placeholder_secrets_are_refused(raw: str) -> None:
    with pytest.raises(WeakSecret, match="MCPQ_SECRET"):
        parse_secrets(raw)


def test_a_list_of_strong_secrets_is_accepted() -> None:
    assert parse_secrets(f" {KEY_A} , {KEY_B} ") == [KEY_A, KEY_B]
    assert parse_secrets("0123456789abcdef" * 4) == ["0123456789abcdef" * 4]  # openssl rand -hex
