"""Envelope encryption of values at rest: AES-256-GCM with the keys of ``MCPQ_DATA_KEYS``.

What a task carries (arguments, answers, results, errors, step values, status messages) is
sealed before it reaches Redis, so a Redis dump, an AOF file, an RDB backup or a replica shows
none of it. The keys live in configuration only, never in Redis.

``MCPQ_DATA_KEYS`` is a comma-separated list of ``id:key`` entries (a bare ``key`` gets an id
derived from a hash of it); a key is 32 random bytes as base64url / base64 or as 64 hex
characters. The first entry seals, every entry opens: a key is rotated by putting a new one
first, then running ``mcpq keys rotate-data`` before the old one is dropped.
``MCPQ_DATA_KEYS=plaintext`` is the explicit opt-out (values are stored as plain JSON).

Token: ``v1.<key id>.<base64url(nonce ‖ ciphertext ‖ tag)>``, a 96-bit random nonce per value.
The associated data is the token's ``v1.<key id>`` head and the caller's ``where`` (the store
passes the Redis key and field that hold the value), so a token moved to another task, another
field or another key id does not open. Opening never falls back to anything: a token that does
not open is an :class:`Unsealable` error.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

SETTING = "MCPQ_DATA_KEYS"
VERSION = "v1"
#: The explicit opt-out: payloads are stored as plain JSON (a warning at startup).
PLAINTEXT = "plaintext"
KEY_BYTES = 32
_NONCE = 12  # 96 random bits per value, as GCM wants
_TAG = 16
_KID = re.compile(r"[A-Za-z0-9_-]{1,32}")
_HEX_KEY = re.compile(r"[0-9a-fA-F]{64}")
#: A sealed value, exactly: nothing JSON (a payload) can look like this, and a status message
#: only if it is built to (it then reads as an error, never as someone else's data).
_TOKEN = re.compile(r"v1\.([A-Za-z0-9_-]{1,32})\.([A-Za-z0-9_-]{38,})")

NOT_SET = (
    f"{SETTING} is not set: task payloads are encrypted at rest with it (`mcpq keys "
    f"new-data-key` prints an entry), or set {SETTING}={PLAINTEXT} to store them unencrypted"
)


class DataKeyError(ValueError):
    """``MCPQ_DATA_KEYS`` is unusable; the message is one line naming the setting."""


class Unsealable(ValueError):
    """A sealed value does not open: its key is not configured, or it was changed or moved.
    The message names the key id, never the value."""


@dataclass(frozen=True)
class DataKey:
    kid: str
    key: bytes = field(repr=False)


def derived_kid(key: bytes) -> str:
    """The id of a bare key: a hash of it, which says nothing about the key."""
    return hashlib.sha256(b"mcpq-data-kid:" + key).hexdigest()[:8]


def new_data_key() -> str:
    """A fresh ``MCPQ_DATA_KEYS`` entry: ``<id>:<32 random bytes, base64url>``."""
    key = secrets.token_bytes(KEY_BYTES)
    return f"{derived_kid(key)}:{_b64(key)}"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    """Strict base64url (``-_``) or standard base64 (``+/``), padded or not."""
    alphabet = b"-_" if ("-" in text or "_" in text) else b"+/"
    padded = text + "=" * (-len(text) % 4)
    return base64.b64decode(padded.encode(), altchars=alphabet, validate=True)


def _key_bytes(text: str, where: str) -> bytes:
    if _HEX_KEY.fullmatch(text):  # what Heroku's app.json "generator": "secret" makes
        key = bytes.fromhex(text)
    else:
        try:
            key = _unb64(text)
        except (binascii.Error, ValueError):
            key = b""
    if len(key) != KEY_BYTES:
        raise DataKeyError(
            f"{where} is not a key: use 32 random bytes as base64url or 64 hex characters "
            "(`mcpq keys new-data-key` prints one)"
        )
    # A random 32-byte key has about 30 distinct bytes; fewer than 16 is not random (zeros,
    # a repeated pattern): refused, like a placeholder.
    if len(set(key)) < 16:
        raise DataKeyError(f"{where} is not random: use `mcpq keys new-data-key`")
    return key


def parse_data_keys(raw: str) -> list[DataKey] | None:
    """The keys of ``MCPQ_DATA_KEYS`` (first seals, all open), or ``None`` for the explicit
    opt-out; raises :class:`DataKeyError` for an unset or malformed value."""
    text = raw.strip()
    if not text:
        raise DataKeyError(NOT_SET)
    if text.lower() == PLAINTEXT:
        return None
    entries = [part.strip() for part in text.split(",")]
    keys: list[DataKey] = []
    for n, entry in enumerate(entries, 1):
        where = SETTING if len(entries) == 1 else f"{SETTING} entry {n}"
        if not entry:
            raise DataKeyError(f"{where} is empty")
        if entry.lower() == PLAINTEXT:
            raise DataKeyError(f"{where}: {PLAINTEXT} stands alone, not in a list of keys")
        kid, sep, key_text = entry.rpartition(":")
        if sep and not _KID.fullmatch(kid):
            raise DataKeyError(f"{where}: a key id is 1-32 letters, digits, '-' or '_'")
        key = _key_bytes(key_text, where)
        keys.append(DataKey(kid if sep else derived_kid(key), key))
    kids = [k.kid for k in keys]
    if len(set(kids)) != len(kids):
        dup = next(kid for kid in kids if kids.count(kid) > 1)
        raise DataKeyError(f"{SETTING} names key id {dup!r} twice")
    return keys


def sealed_kid(value: str) -> str | None:
    """The key id of a sealed value, ``None`` for anything else (plain JSON, a plain message)."""
    found = _TOKEN.fullmatch(value)
    return found.group(1) if found else None


class Sealer:
    """Seals with the first key, opens with any. One AESGCM object per key, built once."""

    def __init__(self, keys: Sequence[DataKey]) -> None:
        if not keys:
            raise DataKeyError(NOT_SET)
        self._aeads = {k.kid: AESGCM(k.key) for k in keys}
        self.current = keys[0].kid
        self._seal_with = self._aeads[self.current]

    @property
    def kids(self) -> list[str]:
        return list(self._aeads)

    def seal(self, plain: bytes, where: str) -> str:
        nonce = secrets.token_bytes(_NONCE)
        head = f"{VERSION}.{self.current}"
        sealed = self._seal_with.encrypt(nonce, plain, f"{head}|{where}".encode())
        return f"{head}.{_b64(nonce + sealed)}"

    def open(self, token: str, where: str) -> bytes:
        found = _TOKEN.fullmatch(token)
        if not found:
            raise Unsealable("not a sealed value")
        kid = found.group(1)
        aead = self._aeads.get(kid)
        if aead is None:
            raise Unsealable(f"sealed with key id {kid!r}, which {SETTING} does not hold")
        try:
            raw = _unb64(found.group(2))
        except (binascii.Error, ValueError):
            raise Unsealable(f"a value sealed with key id {kid!r} is malformed") from None
        if len(raw) < _NONCE + _TAG:
            raise Unsealable(f"a value sealed with key id {kid!r} is malformed")
        try:
            return aead.decrypt(raw[:_NONCE], raw[_NONCE:], f"{VERSION}.{kid}|{where}".encode())
        except InvalidTag:
            raise Unsealable(
                f"a value sealed with key id {kid!r} failed verification (changed, or moved "
                "from another task or field)"
            ) from None
