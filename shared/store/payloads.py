"""How the store writes and reads payloads: sealed with ``MCPQ_DATA_KEYS`` (``shared.sealing``),
or plain JSON when the operator opted out (``MCPQ_DATA_KEYS=plaintext``).

Payloads are what a client or a tool put in a task: the task hash's ``args``, ``caps``, ``pre``,
``result``, ``error`` and ``msg`` (a status message is the tool's text), every value of the
input requests (``:in``), answers (``:ans``) and steps (``:steps``) hashes, and a 2025-era
session's ``caps``. Everything the Lua scripts read (status, timestamps, owner, tool, queue,
generation, lease, indexes) stays plain: no script looks inside a payload, they only store,
move and hand back whole values (``answer.lua`` and ``request_input.lua`` copy answers by key,
``save_step.lua`` keeps the first value by key), so sealing happens here, at the edge, in the
process that writes or reads.

Each value is bound to where it is stored (``<redis key>|<field>``): a value copied to another
task, field or hash does not open. Plain JSON found where a sealed value is expected is read as
it is: values written before encryption was turned on stay readable (a rolling upgrade), and
``mcpq keys rotate-data`` seals them. A sealed value never falls back to anything: if it does not
open, the read fails (:class:`UnreadablePayload`), logged with the key id and the setting.
"""

from __future__ import annotations

import logging
from typing import Any

from mcpq.shared import jsonutil
from mcpq.shared.errors import INTERNAL_ERROR, McpError
from mcpq.shared.sealing import (
    NOT_SET,
    PLAINTEXT,
    SETTING,
    DataKeyError,
    Sealer,
    Unsealable,
    parse_data_keys,
    sealed_kid,
)
from mcpq.shared.store.keyspace import Keys

log = logging.getLogger("mcpq.store")

#: The task hash's sealed fields; ``msg`` is text, the others JSON.
TASK_FIELDS = ("args", "caps", "pre", "result", "error", "msg")
TEXT_FIELDS = frozenset({"msg"})
#: The session hash's sealed field.
SESSION_FIELDS = ("caps",)


class UnreadablePayload(McpError):
    """A stored payload does not open with this server's keys: the client gets -32603 without
    details; the log line names the key id and ``MCPQ_DATA_KEYS``."""

    def __init__(self) -> None:
        super().__init__(INTERNAL_ERROR, "stored task data could not be decrypted")


def where(key: str, name: str) -> str:
    """The associated data of a value: the Redis key and field that hold it."""
    return f"{key}|{name}"


class Payloads:
    """Seals what goes into Redis and opens what comes out (see module docs).

    ``sealer``: the keys (``None``: plain JSON). ``missing``: ``MCPQ_DATA_KEYS`` was not set at
    all; a production server refuses to start then (``ops.runtime.preflight``), and a store opened
    anyway (``mcpq status``) reads plain values but writes none."""

    def __init__(self, sealer: Sealer | None, keys: Keys, *, missing: bool = False) -> None:
        self.sealer = sealer
        self.keys = keys
        self._missing = missing

    @classmethod
    def from_setting(cls, raw: str, keys: Keys) -> Payloads:
        """From ``MCPQ_DATA_KEYS``; raises :class:`~shared.sealing.DataKeyError` when malformed."""
        if not raw.strip():
            return cls(None, keys, missing=True)
        parsed = parse_data_keys(raw)
        return cls(None if parsed is None else Sealer(parsed), keys)

    # -- one value --------------------------------------------------------------------------------
    def seal_text(self, text: str, key: str, name: str) -> str:
        if self.sealer is None:
            if self._missing:
                raise DataKeyError(NOT_SET)
            return text
        # An empty status message stays empty: emptiness is all it would show.
        return self.sealer.seal(text.encode(), where(key, name)) if text else ""

    def open_text(self, raw: str, key: str, name: str) -> str:
        if sealed_kid(raw) is None:
            return raw  # plain: opted out, or written before encryption was turned on
        return self._open(raw, key, name).decode()

    def dump(self, value: Any, key: str, name: str) -> str:
        plain = jsonutil.dumps(value)
        if self.sealer is None:
            if self._missing:
                raise DataKeyError(NOT_SET)
            return plain
        return self.sealer.seal(plain.encode(), where(key, name))

    def load(self, raw: str, key: str, name: str) -> Any:
        if sealed_kid(raw) is None:
            return jsonutil.loads(raw)  # plain JSON (see module docs)
        return jsonutil.loads(self._open(raw, key, name))

    def _open(self, raw: str, key: str, name: str) -> bytes:
        if self.sealer is None:
            log.error(
                "a stored value is sealed but %s is %s",
                SETTING,
                "not set" if self._missing else "plaintext",
            )
            raise UnreadablePayload()
        try:
            return self.sealer.open(raw, where(key, name))
        except Unsealable as exc:
            log.error("a stored value could not be decrypted: %s (%s)", exc, SETTING)
            raise UnreadablePayload() from None

    def reseal(self, raw: str, key: str, name: str) -> str | None:
        """``raw`` sealed under the current key, or ``None`` when it is already (or empty).
        Plain values (written before encryption) are sealed as they are. Raises
        :class:`~mcpq.shared.sealing.Unsealable` when ``raw`` does not open."""
        if self.sealer is None:
            raise DataKeyError(f"re-encryption needs keys in {SETTING}, not {PLAINTEXT!r}")
        kid = sealed_kid(raw)
        if not raw or kid == self.sealer.current:
            return None
        plain = raw.encode() if kid is None else self.sealer.open(raw, where(key, name))
        return self.sealer.seal(plain, where(key, name))

    # -- the store's shapes ---------------------------------------------------------------------
    def field(self, ref: str, name: str, value: Any) -> str:
        """A task hash field (``args``, ``result``...), sealed."""
        key = self.keys.task(ref)
        if name in TEXT_FIELDS:
            return self.seal_text(str(value), key, name)
        return self.dump(value, key, name)

    def open_task(self, ref: str, h: dict[str, str]) -> dict[str, Any]:
        """The task hash's payload fields, opened (absent or empty ones are left out)."""
        key = self.keys.task(ref)
        opened: dict[str, Any] = {}
        for name in TASK_FIELDS:
            raw = h.get(name)
            if raw:
                opened[name] = (
                    self.open_text(raw, key, name)
                    if name in TEXT_FIELDS
                    else self.load(raw, key, name)
                )
        return opened

    def dump_entries(self, key: str, values: dict[str, Any]) -> list[str]:
        """``values`` of the hash at ``key`` (``:in``, ``:ans``), flattened for ARGV, sealed."""
        return [x for name, value in values.items() for x in (name, self.dump(value, key, name))]

    def load_entries(self, key: str, raw: dict[str, str]) -> dict[str, Any]:
        return {name: self.load(value, key, name) for name, value in raw.items()}


#: Plain JSON, for tests and tools that build a store on a bare client.
PLAIN = Payloads(None, Keys())
