"""MRTR ``requestState``: an encrypted, authenticated token the client echoes back byte for byte.

It is attacker-controlled input, so it is sealed with AES-256-GCM (``cryptography``'s AEAD):
the client can neither read nor change it. Inside, it is bound to the principal, the method,
the tool, a digest of the arguments and an expiry no later than what it stands for, and carries
the answers collected in earlier rounds (no server memory between rounds) or, for a synchronous
call that asked for input mid-run, the hidden task's own secret id (a random capability that
nothing else ever shows, never the task's ref, which Flower and the logs show).

Keys come from ``MCPQ_SECRET``: a comma-separated list whose first entry seals and whose every
entry opens, so a key is rotated by putting the new one first and dropping the old one once the
states it sealed have expired. Each token names its key by a key id.

Token: ``v2.<kid>.<base64url(nonce ‖ ciphertext ‖ tag)>``; the ``v2.<kid>`` prefix is the AEAD's
associated data, so a token cannot be moved to another key id or version.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from typing import Any

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from mcpq.shared import jsonutil

VERSION = "v2"
#: The least a secret may be: 32 random bytes as base64url (``mcpq secret`` prints one).
MIN_SECRET_CHARS = 43
#: Values that appeared in our own examples: never accepted, however long.
PLACEHOLDERS = frozenset(
    {
        "change-me-to-a-long-random-string",
        "the-same-long-random-string-on-every-web-host",
        "changeme",
        "secret",
    }
)
_NONCE = 12


class InvalidRequestState(ValueError):
    """The token is malformed, forged, expired or bound to another request."""


class WeakSecret(ValueError):
    """``MCPQ_SECRET`` is unusable; the message is one line naming the setting."""


def new_secret() -> str:
    """A fresh value for ``MCPQ_SECRET``: 32 random bytes, base64url."""
    return secrets.token_urlsafe(32)


def parse_secrets(raw: str) -> list[str]:
    """The entries of ``MCPQ_SECRET`` (first seals, all open), each checked."""
    entries = [part.strip() for part in raw.split(",") if part.strip()]
    if not entries:
        raise WeakSecret("MCPQ_SECRET is empty")
    for n, entry in enumerate(entries, 1):
        where = "MCPQ_SECRET" if len(entries) == 1 else f"MCPQ_SECRET entry {n}"
        if entry.lower() in PLACEHOLDERS:
            raise WeakSecret(f"{where} is a documented placeholder: set `mcpq secret`'s output")
        # Length is what can be checked of randomness: 43 base64url characters carry 256 bits
        # when random; the distinct-character floor refuses the obvious non-random long ones.
        if len(entry) < MIN_SECRET_CHARS or len(set(entry)) < 12:
            raise WeakSecret(
                f"{where} is too weak: use at least 32 random bytes "
                f"({MIN_SECRET_CHARS}+ base64url characters; `mcpq secret` prints one)"
            )
    return entries


def arguments_digest(tool: str, arguments: dict[str, Any]) -> str:
    canonical = orjson.dumps({"tool": tool, "arguments": arguments}, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _derive(secret: str) -> tuple[str, AESGCM]:
    """A key for this one purpose (HKDF): ``MCPQ_SECRET`` itself never encrypts anything, and
    the key id is a hash of the derived key, so it says nothing about the secret."""
    key = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=b"mcpq request state v2"
    ).derive(secret.encode())
    kid = hashlib.sha256(b"mcpq-kid:" + key).hexdigest()[:8]
    return kid, AESGCM(key)


class RequestStateSigner:
    """Seals and opens request states with the keys of ``MCPQ_SECRET`` (see module docs)."""

    def __init__(self, secret_list: list[str], ttl_s: int) -> None:
        if not secret_list:
            raise WeakSecret("MCPQ_SECRET is empty")
        derived = [_derive(secret) for secret in secret_list]
        self._current = derived[0]
        self._keys = dict(derived)
        self._ttl_s = ttl_s

    def seal(
        self,
        principal: str,
        method: str,
        tool: str,
        arguments: dict[str, Any],
        state: dict[str, Any],
        *,
        expires_ms: int | None = None,
    ) -> str:
        """Seal ``state``; it expires after ``MCPQ_MRTR_STATE_TTL_S``, or at ``expires_ms``
        (epoch ms: the end of what it stands for) when that is sooner."""
        exp = time.time() + self._ttl_s
        if expires_ms is not None:
            exp = min(exp, expires_ms / 1000)
        body = {
            "sub": principal,
            "m": method,
            "tool": tool,
            "args": arguments_digest(tool, arguments),
            "exp": exp,
            **state,
        }
        kid, aead = self._current
        nonce = secrets.token_bytes(_NONCE)  # 96 random bits per token, as GCM wants
        sealed = aead.encrypt(nonce, jsonutil.dumpb(body), f"{VERSION}.{kid}".encode())
        return f"{VERSION}.{kid}.{_b64(nonce + sealed)}"

    def open(
        self, token: Any, principal: str, method: str, tool: str, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        if not isinstance(token, str) or token.count(".") != 2:
            raise InvalidRequestState("malformed requestState")
        version, kid, text = token.split(".")
        aead = self._keys.get(kid)
        if version != VERSION or aead is None:
            raise InvalidRequestState("requestState failed verification")
        try:
            raw = _unb64(text)
        except ValueError:
            raise InvalidRequestState("malformed requestState") from None
        if len(raw) <= _NONCE:
            raise InvalidRequestState("malformed requestState")
        # Nothing of the payload is read before the tag verifies (AEAD: decrypt checks it).
        try:
            plain = aead.decrypt(raw[:_NONCE], raw[_NONCE:], f"{version}.{kid}".encode())
        except InvalidTag:
            raise InvalidRequestState("requestState failed verification") from None
        body = jsonutil.loads(plain)
        if not isinstance(body, dict) or not isinstance(body.get("exp"), int | float):
            raise InvalidRequestState("malformed requestState")
        if body["exp"] < time.time():
            raise InvalidRequestState("requestState expired")
        # Bound to who asked and what for: a token is no use to another principal, another
        # method or tool, or the same tool with other arguments.
        if body.get("sub") != principal or body.get("m") != method or body.get("tool") != tool:
            raise InvalidRequestState("requestState belongs to another request")
        if body.get("args") != arguments_digest(tool, arguments):
            raise InvalidRequestState("requestState belongs to other arguments")
        return body
