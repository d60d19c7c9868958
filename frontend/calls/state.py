"""The MRTR ``requestState`` of ``tools/call``: which retry this is, one typed model per kind.

- :class:`Gathering`: the answers to a tool's ``ask_first`` questions collected in earlier
  rounds, before any task exists. Single-use: the create it leads to marks its ``jti`` used,
  in the same script (``Once``), so a replayed state creates no second task.
- :class:`RunningCall`: a synchronous call whose hidden task asked for input mid-run; it
  carries the hidden task's own secret id (never its ref, which Flower and the logs show), and
  expires with that task.

Both are sealed by :class:`mcpq.shared.request_state.RequestStateSigner` (AES-GCM, bound to the
principal, the method, the tool, a digest of the validated arguments and an expiry); this module
is the only one that builds or reads what is inside.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcpq.frontend.jsonrpc import RpcRequest
from mcpq.frontend.task_service import Once
from mcpq.shared.errors import invalid_params
from mcpq.shared.request_state import InvalidRequestState, RequestStateSigner
from mcpq.shared.tools import Tool

#: The ``kind`` inside a sealed state (the wire names of states already handed out).
_GATHERING, _RUNNING = "pre", "sync"


@dataclass(frozen=True)
class Gathering:
    answers: dict[str, Any]
    #: The state this round came with (``None``: the first call, with no state).
    once: Once | None


@dataclass(frozen=True)
class RunningCall:
    task_id: str


RequestState = Gathering | RunningCall


@dataclass(frozen=True)
class StateSeal:
    """Seals and opens the states of one call: one principal, method, tool and arguments."""

    signer: RequestStateSigner
    rpc: RpcRequest
    tool: Tool
    arguments: dict[str, Any]

    def open(self, token: object | None) -> RequestState | None:
        """The state ``token`` carries (``None`` for a first call), or -32602 when it is not one
        this server sealed for this very call, or has expired."""
        if token is None:
            return None
        try:
            body = self.signer.open(
                token, self.rpc.owner, self.rpc.method, self.tool.name, self.arguments
            )
        except InvalidRequestState as exc:
            raise invalid_params(f"Invalid params: {exc}") from None
        kind = body.get("kind")
        if kind == _RUNNING and isinstance(body.get("task"), str):
            return RunningCall(body["task"])
        answers, jti = body.get("answers"), body.get("jti")
        if kind == _GATHERING and isinstance(answers, dict) and isinstance(jti, str):
            return Gathering(answers, Once(jti, int(float(body["exp"]) * 1000)))
        raise invalid_params("Invalid params: requestState is not one this server gave")

    def gathering(self, answers: dict[str, Any], jti: str) -> str:
        return self._seal({"kind": _GATHERING, "answers": answers, "jti": jti})

    def running(self, task_id: str, expires_ms: int | None) -> str:
        return self._seal({"kind": _RUNNING, "task": task_id}, expires_ms)

    def _seal(self, body: dict[str, Any], expires_ms: int | None = None) -> str:
        rpc = self.rpc
        return self.signer.seal(
            rpc.owner, rpc.method, self.tool.name, self.arguments, body, expires_ms=expires_ms
        )
