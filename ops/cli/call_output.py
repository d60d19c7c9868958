"""What ``mcpq call`` and ``mcpq task`` print, and the exit status it means.

Exit codes (``EXIT_*``): 0 completed, 1 the tool reported an error (``isError``), 2 usage, 3 the
task failed, 4 cancelled, 5 the server could not be reached or refused the request, 6 the task
asked a question nobody can answer here (stdin is not a terminal and ``--answer`` does not
cover it), 130 detached by a second Ctrl-C (the task goes on). ``--output json`` prints one
object instead of text; the status line and prompts go to stderr either way.

A failure is one line on stderr, never a traceback (:func:`failure`). The SDK reports an HTTP
error status only as an ``MCPError`` (a stand-in ``-32603`` when the body is not JSON-RPC), so
:class:`Refusals` watches the connection's responses and the line says what the server said:
the status, and what to do about it.
"""

from __future__ import annotations

import errno
import json
import re
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcpq.ops.cli.call_prompts import CannotPrompt, UsageError

if TYPE_CHECKING:
    import httpx2
    import mcp_types as types

    from mcpq.client import Task

EXIT_COMPLETED = 0
EXIT_TOOL_ERROR = 1
EXIT_USAGE = 2
EXIT_FAILED = 3
EXIT_CANCELLED = 4
EXIT_UNREACHABLE = 5
EXIT_NO_ANSWER = 6
EXIT_DETACHED = 130
_STATUS_EXIT = {"completed": EXIT_COMPLETED, "failed": EXIT_FAILED, "cancelled": EXIT_CANCELLED}


def print_result(
    task: Task | None, status: str, result: types.CallToolResult | None, output: str
) -> int:
    """The outcome on stdout (text, or one JSON object); the exit status it means."""
    import mcp_types as types

    code = _STATUS_EXIT.get(status, EXIT_COMPLETED)
    if result is not None and result.is_error:
        code = EXIT_TOOL_ERROR
    if output == "json":
        body: dict[str, Any] = {"status": status}
        if task is not None:
            body["taskId"] = task.task_id
            body["statusMessage"] = task.status_message
            if task.error is not None:
                body["error"] = task.error
        if result is not None:
            body["result"] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        print(json.dumps(body))
        return code
    if result is not None:
        texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
        shown = "\n".join(texts) if texts else json.dumps(result.structured_content)
        print(shown, file=sys.stderr if result.is_error else sys.stdout)
    elif task is not None and not task.done:
        message = f": {task.status_message}" if task.status_message else ""
        print(f"{task.status}{message}")
    elif task is not None:
        error = (task.error or {}).get("message") or task.status_message or ""
        print(f"task {status}" + (f": {error}" if error else ""), file=sys.stderr)
    return code


def print_task_id(output: str, task_id: str, status: str) -> None:
    """A task left running (``--detach``, or detached by Ctrl-C): its taskId, or one JSON
    object with its status too."""
    body = {"taskId": task_id, "status": status}
    print(json.dumps(body) if output == "json" else task_id)


# -- failures ----------------------------------------------------------------------------------
#: An mcpq API key's prefix (``mcpq keys create``); any other bearer token is "a token".
_API_KEY_PREFIX = "mcpq_"
#: Error bodies are read only up to this size (a refusal says little; a proxy's page is big).
_MAX_BODY = 64 * 1024


@dataclass(frozen=True)
class HttpRefusal:
    """An HTTP error status the server answered a request with, and what it said: the
    JSON-RPC error of the body (``code``, ``message``, ``data``), or an OAuth-style body's
    ``error_description``, or a short plain text; the ``WWW-Authenticate`` parameters; the
    ``Retry-After``. ``host``: the ``Host`` the client sent; ``credential``: ``""`` (none),
    ``"key"`` (an mcpq API key) or ``"token"`` (another bearer token), never the secret."""

    status: int
    reason: str
    host: str
    credential: str
    retry_after: str | None = None
    challenge: Mapping[str, str] = field(default_factory=dict)
    code: int | None = None
    message: str = ""
    data: Any = None


class Refusals:
    """An httpx2 response hook (``mcpq.client.connect(on_response=...)``): :attr:`last` is the
    refusal of the connection's last MCP request (a POST), ``None`` once one succeeds. The
    command sends one request at a time, so the ``MCPError`` it stops on is that request's."""

    def __init__(self) -> None:
        self.last: HttpRefusal | None = None

    async def __call__(self, response: httpx2.Response) -> None:
        if response.request.method != "POST":
            return
        if response.status_code < 400:
            self.last = None
            return
        size = response.headers.get("content-length")
        if size is None or (size.isdigit() and int(size) <= _MAX_BODY):
            await response.aread()  # kept: the SDK reads the same body after this hook
        self.last = refusal_of(response)


def refusal_of(response: httpx2.Response) -> HttpRefusal:
    """What ``response`` (an HTTP error) said, its body read if it was small."""
    sent = response.request.headers.get("authorization", "")
    secret = sent.partition(" ")[2].strip()
    credential = "" if not secret else "key" if secret.startswith(_API_KEY_PREFIX) else "token"
    challenge = dict(
        re.findall(r'([\w-]+)="((?:[^"\\]|\\.)*)"', response.headers.get("www-authenticate", ""))
    )
    code, message, data = None, challenge.get("error_description", ""), None
    body = _body(response)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):  # JSON-RPC
        code, data = body["error"].get("code"), body["error"].get("data")
        message = str(body["error"].get("message") or "")
    elif isinstance(body, dict):  # OAuth-style: {"error": ..., "error_description": ...}
        message = str(body.get("error_description") or message)
    elif isinstance(body, str):
        message = body
    return HttpRefusal(
        status=response.status_code,
        reason=response.reason_phrase,
        host=response.request.headers.get("host", response.request.url.netloc.decode()),
        credential=credential,
        retry_after=response.headers.get("retry-after"),
        challenge=challenge,
        code=code if isinstance(code, int) else None,
        message=message,
        data=data,
    )


def _body(response: httpx2.Response) -> object:
    """The body as JSON, or its first line of plain text, or ``None`` (unread, or a page)."""
    import httpx2

    try:
        content = response.content
    except httpx2.ResponseNotRead:  # too big to read
        return None
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json":
        try:
            return json.loads(content)
        except ValueError:
            return None
    if kind == "text/plain":
        lines = content.decode("utf-8", "replace").strip().splitlines()
        return lines[0][:200] if lines else None
    return None


def refusal_line(refused: HttpRefusal, url: str) -> str:
    """The one line an HTTP refusal is shown as: the status, then what it means here."""
    status, message = refused.status, refused.message
    if status == 421:
        return f"421 this server does not answer to host {refused.host} (set MCPQ_ALLOWED_HOSTS)"
    if status == 401:
        if not refused.credential:
            return "401 no API key (set MCPQ_TOKEN)"
        if refused.credential == "token" and message:
            return f"401 the token was refused: {message}"
        return "401 the key was revoked or is wrong"
    if status == 403:
        scopes = _missing_scopes(refused)
        if scopes:
            return f"403 missing scope {scopes}"
        return f"403 forbidden: {message}" if message else "403 forbidden"
    if status in {429, 503}:
        what = re.sub(r":? retry after \d+ ?ms$", "", message) or (
            "too many requests" if status == 429 else "the server is unavailable"
        )
        setting = refused.data.get("setting") if isinstance(refused.data, dict) else None
        if setting:
            what += f" ({setting})"
        return f"{status} {what}: {_retry(refused.retry_after)}"
    if status == 404 and refused.code is None:
        return f"404 no MCP endpoint at {url} (check --url or MCPQ_URL)"
    if refused.code is not None:
        return f"{status} {message} (code {refused.code})"
    if message and not message.lower().startswith(refused.reason.lower()):
        return f"{status} {refused.reason}: {message}"
    return f"{status} {message or refused.reason}"


def _missing_scopes(refused: HttpRefusal) -> str:
    """The scopes a 403 names: those its description says are missing (mcpq: "... needs scope
    S"), else the challenge's ``scope``, else the error's ``requiredScopes``."""
    for text in (refused.challenge.get("error_description", ""), refused.message):
        if found := re.search(r"needs scopes? (.+)$", text):
            return found.group(1)
    if scope := refused.challenge.get("scope"):
        return scope
    required = refused.data.get("requiredScopes") if isinstance(refused.data, dict) else None
    return " ".join(map(str, required)) if isinstance(required, list) else ""


def _retry(retry_after: str | None) -> str:
    if retry_after is None:
        return "retry later"
    if retry_after.strip().isdigit():
        return f"retry in {int(retry_after)} s"
    return f"retry after {retry_after.strip()}"


def failure(
    exc: BaseException, url: str, refused: HttpRefusal | None, mcp_error: type[Exception]
) -> tuple[str, int]:
    """The line (without the command's name) and exit status of what stopped a command."""
    line, status = _described(exc, url, refused, mcp_error)
    return _one_line(line), status


def _described(
    exc: BaseException, url: str, refused: HttpRefusal | None, mcp_error: type[Exception]
) -> tuple[str, int]:
    if isinstance(exc, CannotPrompt):
        return str(exc), EXIT_NO_ANSWER
    if isinstance(exc, UsageError):
        return str(exc), EXIT_USAGE
    if isinstance(exc, mcp_error):
        if refused is not None:
            return refusal_line(refused, url), EXIT_UNREACHABLE
        error = exc.error  # type: ignore[attr-defined]
        return f"{error.message} (code {error.code})", EXIT_UNREACHABLE
    if (why := _unreachable(exc)) is not None:
        return f"cannot reach {url}: {why}", EXIT_UNREACHABLE
    return f"{url}: {type(exc).__name__}: {exc}", EXIT_UNREACHABLE


def _one_line(text: str, limit: int = 500) -> str:
    """What a server said, safe on a terminal: control characters (escapes, line breaks) as
    spaces, runs of spaces as one, at most ``limit`` characters."""
    shown = " ".join("".join(" " if ord(c) < 32 or ord(c) == 127 else c for c in text).split())
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def _unreachable(exc: BaseException) -> str | None:
    """Why a connection could not be made (``None``: it was not that)."""
    import httpx2

    if isinstance(exc, httpx2.ConnectTimeout):
        return "no connection within 10 s"
    if not isinstance(exc, httpx2.ConnectError):
        return None
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused (is the server running?)"
        if isinstance(cause, socket.gaierror):
            return "unknown host"
        if isinstance(cause, OSError) and cause.errno in {errno.ENETUNREACH, errno.EHOSTUNREACH}:
            return "no route to host"
        cause = cause.__cause__ or cause.__context__
    return str(exc) or type(exc).__name__
