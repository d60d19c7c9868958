"""MRTR ``requestState``: an integrity-protected token the client echoes back byte for byte.

It is attacker-controlled input, so it is signed (HMAC-SHA256 with ``MCPQ_SECRET``) and bound to
the principal, the tool, a digest of the arguments and an expiry. It carries the answers
collected in earlier rounds (so no server memory is needed between rounds) and, for a
synchronous call that asked for input mid-run, the storage ref of its hidden task.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import Any

import orjson

from shared import jsonutil


class InvalidRequestState(ValueError):
    """The token is malformed, forged, expired or bound to another request."""


def arguments_digest(tool: str, arguments: dict[str, Any]) -> str:
    canonical = orjson.dumps({"tool": tool, "arguments": arguments}, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class RequestStateSigner:
    def __init__(self, secret: str, ttl_s: int) -> None:
        # A key derived for this one purpose: MCPQ_SECRET itself never signs anything.
        self._key = hashlib.sha256(b"mcpq-request-state:" + secret.encode()).digest()
        self._ttl_s = ttl_s

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()

    def seal(
        self, principal: str, tool: str, arguments: dict[str, Any], state: dict[str, Any]
    ) -> str:
        body = {
            "v": 1,
            "sub": principal,
            "tool": tool,
            "args": arguments_digest(tool, arguments),
            "exp": int(time.time()) + self._ttl_s,
            **state,
        }
        payload = jsonutil.dumpb(body)
        return f"v1.{_b64(payload)}.{_b64(self._mac(payload))}"

    def open(
        self, token: Any, principal: str, tool: str, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        if not isinstance(token, str) or token.count(".") != 2 or not token.startswith("v1."):
            raise InvalidRequestState("malformed requestState")
        try:
            payload, mac = _unb64(token.split(".")[1]), _unb64(token.split(".")[2])
        except ValueError:
            raise InvalidRequestState("malformed requestState") from None
        # Constant-time comparison, and nothing of the payload is read before it verifies.
        if not hmac.compare_digest(mac, self._mac(payload)):
            raise InvalidRequestState("requestState failed verification")
        body = jsonutil.loads(payload)
        if not isinstance(body, dict) or body.get("exp", 0) < time.time():
            raise InvalidRequestState("requestState expired")
        # Bound to who asked and what for: a token is no use to another principal, another
        # tool, or the same tool with other arguments.
        if body.get("sub") != principal or body.get("tool") != tool:
            raise InvalidRequestState("requestState belongs to another request")
        if body.get("args") != arguments_digest(tool, arguments):
            raise InvalidRequestState("requestState belongs to other arguments")
        return body
