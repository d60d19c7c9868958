"""Where a running `mcpq dev` records itself, so that ``mcpq status``, ``mcpq tasks`` and
``mcpq call`` run beside it without ``REDIS_URL``.

While it runs, the launcher keeps a small state file (:func:`state_path`: per user, mode 0600)
with its pid, its ``REDIS_URL`` and its web URL (:func:`record_state`); it removes the file when it
stops, and a file left by one that was killed is recognised by its pid and ignored
(:func:`running_dev`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DevState:
    """What a running `mcpq dev` recorded: its pid, its ``REDIS_URL`` (``None`` when that URL
    carries a password, which the file never holds; ``redis_shown`` is its redacted form) and
    its MCP endpoint."""

    pid: int
    redis_url: str | None
    redis_shown: str
    web_url: str
    path: Path


def state_dir(environ: Mapping[str, str]) -> Path:
    """Per user, under ``$XDG_RUNTIME_DIR`` (a private tmpfs that logging out empties) when
    set, else under ``~/.cache``."""
    runtime = environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "mcpq"
    home = environ.get("HOME") or str(Path.home())
    return Path(home) / ".cache" / "mcpq"


def state_path(environ: Mapping[str, str]) -> Path:
    """Where `mcpq dev` records itself."""
    return state_dir(environ) / "dev.json"


def record_state(
    environ: Mapping[str, str], *, redis_url: str, redis_shown: str, web_url: str
) -> Path:
    """Write the state file (mode 0600, replaced atomically); ``OSError`` when it cannot."""
    path = state_path(environ)
    body = {
        "pid": os.getpid(),
        # A password never goes to disk: the file then names the Redis but cannot reach it.
        "redis_url": redis_url if redis_shown == redis_url else None,
        "redis_shown": redis_shown,
        "web_url": web_url,
    }
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(body, out)
    os.replace(scratch, path)  # readers see the old file or the new one, never half
    return path


def remove_state(path: Path) -> None:
    """Remove the state file if it is still this launcher's (a second `mcpq dev` started
    meanwhile owns it now)."""
    found = _read_state(path)
    if found is not None and found.pid == os.getpid():
        path.unlink(missing_ok=True)


def running_dev(environ: Mapping[str, str]) -> DevState | None:
    """The `mcpq dev` of this user that runs now, from its state file; ``None`` when there is
    none, or the file is stale (its pid is gone) or not this user's own."""
    found = _read_state(state_path(environ))
    return found if found is not None and _alive(found.pid) else None


def _read_state(path: Path) -> DevState | None:
    try:
        info = path.stat()
        if info.st_uid != os.getuid() or info.st_mode & 0o022:
            return None  # written by someone else, or writable by others: not to be trusted
        raw = json.loads(path.read_text())
        return DevState(
            pid=int(raw["pid"]),
            redis_url=None if raw.get("redis_url") is None else str(raw["redis_url"]),
            redis_shown=str(raw["redis_shown"]),
            web_url=str(raw.get("web_url", "")),
            path=path,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid > 0
