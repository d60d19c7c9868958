"""Sealing of payloads at rest (mcpq.shared.sealing) and the store's use of it (payloads)."""

from __future__ import annotations

import base64
import logging
import secrets

import pytest

from mcpq.ops.runtime import preflight
from mcpq.shared.sealing import (
    DataKey,
    DataKeyError,
    Sealer,
    Unsealable,
    derived_kid,
    new_data_key,
    parse_data_keys,
    sealed_kid,
)
from mcpq.shared.settings import Settings
from mcpq.shared.store import Keys
from mcpq.shared.store.payloads import Payloads, UnreadablePayload
from mcpq.shared.store.records import TaskRecord

KEY1 = secrets.token_bytes(32)
KEY2 = secrets.token_bytes(32)


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def sealer(*keys: tuple[str, bytes]) -> Sealer:
    return Sealer([DataKey(kid, key) for kid, key in keys])


# -- the token ----------------------------------------------------------------------------------


def test_round_trip_with_a_fresh_nonce_each_time() -> None:
    s = sealer(("k1", KEY1))
    a, b = s.seal(b'{"x":"secret marker"}', "t|args"), s.seal(b'{"x":"secret marker"}', "t|args")
    assert a != b  # 96 random bits of nonce per value
    assert a.startswith("v1.k1.") and sealed_kid(a) == "k1"
    assert "secret" not in a
    assert s.open(a, "t|args") == s.open(b, "t|args") == b'{"x":"secret marker"}'


def test_the_first_key_seals_and_every_key_opens() -> None:
    old = sealer(("k1", KEY1))
    both = sealer(("k2", KEY2), ("k1", KEY1))
    token = old.seal(b"v", "w")
    assert both.open(token, "w") == b"v"
    assert sealed_kid(both.seal(b"v", "w")) == "k2"


def test_an_unknown_key_id_does_not_open() -> None:
    token = sealer(("k1", KEY1)).seal(b"v", "w")
    with pytest.raises(Unsealable, match="'k1'"):
        sealer(("k2", KEY2)).open(token, "w")


def test_the_same_key_under_another_id_does_not_open() -> None:
    # The key id is in the associated data: a token cannot be relabelled.
    token = sealer(("k1", KEY1)).seal(b"v", "w")
    with pytest.raises(Unsealable):
        sealer(("k9", KEY1)).open(token.replace("v1.k1.", "v1.k9."), "w")


def test_a_tampered_token_does_not_open() -> None:
    s = sealer(("k1", KEY1))
    token = s.seal(b"value", "w")
    head, body = token.rsplit(".", 1)
    for i in (0, len(body) // 2, len(body) - 2):
        flipped = body[:i] + ("A" if body[i] != "A" else "B") + body[i + 1 :]
        with pytest.raises(Unsealable):
            s.open(f"{head}.{flipped}", "w")
    with pytest.raises(Unsealable):
        s.open(f"{head}.{body[:20]}", "w")  # too short to hold a nonce and a tag


def test_a_value_moved_to_another_task_or_field_does_not_open() -> None:
    s = sealer(("k1", KEY1))
    token = s.seal(b'"x"', "{mcpq}:t:aaa|result")
    for elsewhere in ("{mcpq}:t:bbb|result", "{mcpq}:t:aaa|args", "{mcpq}:t:aaa:ans|result"):
        with pytest.raises(Unsealable, match="failed verification"):
            s.open(token, elsewhere)


# -- MCPQ_DATA_KEYS ----------------------------------------------------------------------------


def test_keys_parse_as_base64url_base64_and_hex_with_or_without_an_id() -> None:
    raw = ",".join([f"new:{b64url(KEY2)}", base64.b64encode(KEY1).decode(), f"hex_1:{KEY1.hex()}"])
    with pytest.raises(DataKeyError, match="twice"):
        parse_data_keys(raw + f",hex_1:{KEY2.hex()}")
    keys = parse_data_keys(raw)
    assert keys is not None
    assert [k.kid for k in keys] == ["new", derived_kid(KEY1), "hex_1"]
    assert [k.key for k in keys] == [KEY2, KEY1, KEY1]
    assert "key=" not in repr(keys[0]) and b64url(KEY2) not in repr(keys)


def test_a_generated_entry_parses() -> None:
    entry = new_data_key()
    keys = parse_data_keys(entry)
    assert keys is not None and keys[0].kid == entry.split(":")[0]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        # The random keys' cases are named: the same ids in every xdist worker.
        ("", "MCPQ_DATA_KEYS is not set"),
        ("   ", "MCPQ_DATA_KEYS is not set"),
        pytest.param("k1:" + b64url(KEY1[:16]), "MCPQ_DATA_KEYS is not a key", id="short-key"),
        pytest.param("k1:" + KEY1.hex()[:62], "MCPQ_DATA_KEYS is not a key", id="hex-key"),
        ("k1:not base64 at all!!", "MCPQ_DATA_KEYS is not a key"),
        ("k1:" + b64url(bytes(32)), "MCPQ_DATA_KEYS is not random"),
        pytest.param("bad.id:" + b64url(KEY1), "key id", id="bad-id"),
        pytest.param(f"k1:{b64url(KEY1)},,", "MCPQ_DATA_KEYS entry 2 is empty", id="empty-2nd"),
        pytest.param(
            f"k1:{b64url(KEY1)},k2:short", "MCPQ_DATA_KEYS entry 2 is not a key", id="short-2nd"
        ),
        pytest.param(f"plaintext,k1:{b64url(KEY1)}", "stands alone", id="plaintext-and-key"),
    ],
)
def test_a_malformed_value_is_one_line_naming_the_setting(raw: str, message: str) -> None:
    with pytest.raises(DataKeyError, match=message) as caught:
        parse_data_keys(raw)
    assert "\n" not in str(caught.value) and "MCPQ_DATA_KEYS" in str(caught.value)
    assert b64url(KEY1) not in str(caught.value)


def test_plaintext_is_the_explicit_opt_out() -> None:
    assert parse_data_keys("plaintext") is None
    assert parse_data_keys(" PlainText ") is None


def test_servers_refuse_to_start_without_keys_and_warn_on_the_opt_out() -> None:
    base = Settings(tools=("mcpq.demo",), auth=("none",))
    for problem in (
        preflight.web_problem(base, ["127.0.0.1"]),
        preflight.worker_problem(base),
    ):
        assert problem is not None and problem.startswith("MCPQ_DATA_KEYS is not set")
    bad = Settings(tools=("mcpq.demo",), data_keys="k1:short")
    assert "MCPQ_DATA_KEYS is not a key" in (preflight.worker_problem(bad) or "")
    opted_out = Settings(tools=("mcpq.demo",), data_keys="plaintext")
    assert preflight.worker_problem(opted_out) is None
    assert "unencrypted" in (preflight.data_keys_warning(opted_out) or "")
    keyed = Settings(tools=("mcpq.demo",), data_keys=new_data_key())
    assert preflight.worker_problem(keyed) is None
    assert preflight.data_keys_warning(keyed) is None


def test_settings_never_show_the_keys() -> None:
    entry = new_data_key()
    assert entry not in repr(Settings(data_keys=entry))


# -- the store's payloads ----------------------------------------------------------------------

KEYS = Keys("mcpq")


def test_a_task_hash_round_trips_sealed_with_state_left_plain() -> None:
    p = Payloads.from_setting(f"k1:{b64url(KEY1)}", KEYS)
    h = {
        "status": "completed",
        "created_ms": "1",
        "updated_ms": "2",
        "tool": "greet",
        "owner": "anonymous",
        "args": p.field("r1", "args", {"name": "MARKER-A"}),
        "result": p.field("r1", "result", {"content": [{"type": "text", "text": "MARKER-R"}]}),
        "msg": p.field("r1", "msg", "status MARKER-M"),
    }
    assert all("MARKER" not in value for value in h.values())
    record = TaskRecord.from_hash("r1", h, p)
    assert record.arguments == {"name": "MARKER-A"}
    assert record.result == {"content": [{"type": "text", "text": "MARKER-R"}]}
    assert record.message == "status MARKER-M"
    assert record.caps == {} and record.error is None
    # Bound to the task: the same hash under another ref does not open.
    with pytest.raises(UnreadablePayload):
        TaskRecord.from_hash("r2", h, p)


def test_plain_values_written_before_encryption_still_read() -> None:
    p = Payloads.from_setting(f"k1:{b64url(KEY1)}", KEYS)
    h = {"status": "working", "created_ms": "1", "updated_ms": "1", "args": '{"a":1}'}
    h["msg"] = "plain words"
    record = TaskRecord.from_hash("r1", h, p)
    assert record.arguments == {"a": 1} and record.message == "plain words"


def test_an_unopenable_value_is_an_error_logged_with_the_setting(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sealed = Payloads.from_setting(f"k1:{b64url(KEY1)}", KEYS).dump({"a": 1}, "k", "f")
    other = Payloads.from_setting(f"k2:{b64url(KEY2)}", KEYS)
    plain = Payloads.from_setting("plaintext", KEYS)
    with caplog.at_level(logging.ERROR, "mcpq.store"):
        for payloads in (other, plain):
            with pytest.raises(UnreadablePayload) as caught:
                payloads.load(sealed, "k", "f")
            assert caught.value.message == "stored task data could not be decrypted"
    assert "MCPQ_DATA_KEYS" in caplog.text and "'k1'" in caplog.text


def test_without_any_setting_nothing_is_written() -> None:
    unset = Payloads.from_setting("", KEYS)
    with pytest.raises(DataKeyError, match="MCPQ_DATA_KEYS is not set"):
        unset.dump({"a": 1}, "k", "f")
    with pytest.raises(DataKeyError):
        unset.field("r", "msg", "text")
    assert unset.load('{"a":1}', "k", "f") == {"a": 1}


def test_the_opt_out_writes_plain_json() -> None:
    plain = Payloads.from_setting("plaintext", KEYS)
    assert plain.dump({"a": "b"}, "k", "f") == '{"a":"b"}'
    assert plain.field("r", "msg", "hello") == "hello"


def test_reseal_moves_old_and_plain_values_to_the_current_key() -> None:
    old = Payloads.from_setting(f"k1:{b64url(KEY1)}", KEYS)
    new = Payloads.from_setting(f"k2:{b64url(KEY2)},k1:{b64url(KEY1)}", KEYS)
    under_old = old.dump({"a": 1}, "k", "f")
    moved = new.reseal(under_old, "k", "f")
    assert moved is not None and sealed_kid(moved) == "k2"
    assert new.load(moved, "k", "f") == {"a": 1}
    assert new.reseal(moved, "k", "f") is None  # already current: nothing to do
    assert new.reseal("", "k", "f") is None
    sealed_plain = new.reseal('{"b":2}', "k", "f")
    assert sealed_plain is not None and new.load(sealed_plain, "k", "f") == {"b": 2}
    with pytest.raises(Unsealable):
        Payloads.from_setting(f"k3:{b64url(secrets.token_bytes(32))}", KEYS).reseal(
            under_old, "k", "f"
        )
