"""Where a running `mcpq dev` records itself, so that ``mcpq status``, ``mcpq tasks`` and
``mcpq call`` run beside it without ``REDIS_URL``.

While it runs, the launcher keeps a small state file (:func:`state_path`: per user, mode 0600)
with its pid, its ``REDIS_URL`` and its web URL (:func:`record_state`); it removes the file when it
stops, and a file left by one that was killed is recognised by its pid and ignored
(:func:`running_dev`, :func:`running_dev_endpoint`).

The data key it generates for a Redis of the developer's (``REDIS_URL``, ``MCPQ_DATA_KEYS`` unset)
is kept too, per Redis URL (:func:`dev_data_key`), so that a restart against a Redis that kept its
data still opens the tasks it sealed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mcpq.shared.redis_urls import redact_url
from mcpq.shared.sealing import new_data_key


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
    #: Its tool modules (``MCPQ_TOOLS``) and the folder they are found in: ``mcpq tools``.
    tools: tuple[str, ...] = ()
    folder: str = ""


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
    environ: Mapping[str, str],
    *,
    redis_url: str,
    redis_shown: str,
    web_url: str,
    tools: Sequence[str] = (),
) -> Path:
    """Write the state file (mode 0600, replaced atomically); ``OSError`` when it cannot."""
    path = state_path(environ)
    body = {
        "pid": os.getpid(),
        # A password never goes to disk: the file then names the Redis but cannot reach it.
        "redis_url": redis_url if redis_shown == redis_url else None,
        "redis_shown": redis_shown,
        "web_url": web_url,
        "tools": list(tools),
        "folder": os.getcwd(),
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


def running_dev_endpoint(environ: Mapping[str, str]) -> str | None:
    """The MCP endpoint (``http://127.0.0.1:<port>/mcp``) of the `mcpq dev` this user runs now;
    ``None`` when none runs (see :func:`running_dev`)."""
    found = running_dev(environ)
    return found.web_url if found is not None and found.web_url else None


def data_key_path(environ: Mapping[str, str]) -> Path:
    """Where `mcpq dev` keeps the data keys it generated: on disk, per user, under
    ``$XDG_STATE_HOME`` (default ``~/.local/state``). Not in :func:`state_dir`, which may be a
    tmpfs that logging out empties: a key must last as long as the Redis data it sealed, which
    may outlive a reboot."""
    state = environ.get("XDG_STATE_HOME")
    if not state:
        home = environ.get("HOME") or str(Path.home())
        state = str(Path(home) / ".local" / "state")
    return Path(state) / "mcpq" / "dev-data-keys.json"


def dev_data_key(environ: Mapping[str, str], redis_url: str) -> str:
    """The ``MCPQ_DATA_KEYS`` entry `mcpq dev` uses with the Redis at ``redis_url``: the one
    generated for that URL at an earlier start, else a new one, recorded now.

    The file (:func:`data_key_path`) maps each URL, its password hidden, to its key; it is mode
    0600 in a folder of mode 0700, and a file of another user is refused. Two launchers
    starting at once against one Redis agree on its key (the file is locked while read and
    written). ``OSError`` when the file cannot be read or written."""
    path = data_key_path(environ)
    name = redact_url(redis_url)  # the password never goes to disk
    with _locked(path):
        keys = _read_keys(path)
        if name not in keys:
            keys[name] = new_data_key()
            scratch = path.with_name(f".{path.name}.{os.getpid()}")
            fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                json.dump({"keys": keys}, out, indent=1)
            os.replace(scratch, path)
        return keys[name]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _read_keys(path: Path) -> dict[str, str]:
    try:
        info = path.stat()
    except FileNotFoundError:
        return {}
    if info.st_uid != os.getuid():
        raise PermissionError(f"{path} belongs to another user")
    if info.st_mode & 0o077:
        path.chmod(0o600)  # ours, but readable by others: no longer
    try:
        raw = json.loads(path.read_text())
        return {str(url): str(key) for url, key in raw["keys"].items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise OSError(f"{path} is not a data key file of mcpq dev") from None


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
            tools=tuple(str(module) for module in raw.get("tools", ())),
            folder=str(raw.get("folder", "")),
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
