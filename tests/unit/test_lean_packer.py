"""The workers' command packer (``mcpq.shared.store.lean.LeanPacker``) packs what redis-py's own
hiredis packer packs, byte for byte, and leaves to it what hiredis cannot take (with redis-py's
error); a renewal's answers, parsed from a table, are what the enums would make."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from redis.connection import HiredisRespSerializer

from mcpq.shared.store import Reply, TaskStatus
from mcpq.shared.store.lean import LeanPacker, sync_packer
from mcpq.shared.store.run_calls import Renewal, _parse_renewal

COMMANDS: list[tuple[Any, ...]] = [
    ("EVALSHA", "a" * 40, 3, "{mcpq}:due", "{mcpq}:t:abc", "k", 60_000, 2, "abc", 7),
    ("HSET", "k", "f", b"\x00\xffbytes", 1.5, -3),
    ("SCRIPT LOAD", "return 1"),  # a command named in two words
    ("SET", "k", memoryview(b"view")),
    ("SET", "k", bytearray(b"array")),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: str(c[0]))
def test_packs_what_redis_py_packs(command: tuple[Any, ...]) -> None:
    theirs: Any = HiredisRespSerializer()  # (its stub types each argument as a list)
    assert LeanPacker().pack(*command) == theirs.pack(*command)


def test_what_hiredis_cannot_take_gets_redis_py_s_error() -> None:
    with pytest.raises(redis.DataError):
        LeanPacker().pack("SET", "k", None)


def test_the_workers_connections_pack_with_it() -> None:
    connection = redis.Connection(**sync_packer())  # type: ignore[no-untyped-call]
    assert isinstance(connection._command_packer, LeanPacker)


@pytest.mark.parametrize("reply", list(Reply))
def test_a_renewal_parsed_from_the_table_is_the_enums(reply: Reply) -> None:
    assert _parse_renewal([reply.value]) == Renewal(reply, None)
    for status in TaskStatus:
        assert _parse_renewal([reply.value, status.value]) == Renewal(reply, status)
    with pytest.raises(ValueError):
        _parse_renewal([reply.value, "no-such-status"])
    with pytest.raises(ValueError):
        _parse_renewal(["NO-SUCH-REPLY"])
