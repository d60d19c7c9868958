"""A real mcpq deployment as child processes: the launcher of the tests and the benchmarks.

`Stack` owns a private redis-server on a free loopback port (`RedisProcess`: never the shared
one), web processes (``python -m mcpq web``, or gunicorn serving another ASGI app), Celery
workers (``celery worker`` itself, or ``mcpq worker`` as the Procfile runs it), Flower and any
other child a caller spawns. Its children are kept by `ops.harness.child_processes.ChildProcesses`
(each leads its own process group with a log file in the stack's directory, and is stopped by
signalling its group, never by name). `Stack.close` stops everything and returns what is still
alive afterwards (nothing, when all went well): every process a child was seen to fork, every
redis-server it started.

Children get the caller's environment without ``MCPQ_*``, ``REDIS_URL``,
``CELERY_BROKER_URL``, ``PORT`` and ``WEB_CONCURRENCY``, then the private Redis, one fresh
``MCPQ_SECRET`` and ``MCPQ_DATA_KEYS``,
``MCPQ_TOOLS``, the repository on ``PYTHONPATH``, ``WEB_CONCURRENCY=1``, the stack's broker
(``CELERY_BROKER_URL``, when it has one), the stack's knobs and per-child overrides.

Reads (`Stack.stats`, `Stack.wait_runs`, `Child.run_endings`) go through the task store and the
logs, for what a client cannot see (tests add raw Redis reads on top). Nothing here sleeps
blindly: every wait is `wait_until` on an observable condition.
"""

from __future__ import annotations

import itertools
import os
import re
import secrets
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import IO, Self

import httpx

from mcpq.ops.harness.child_processes import ChildProcesses
from mcpq.ops.harness.children import REPO, Child, StackError
from mcpq.ops.runtime import commands
from mcpq.ops.runtime.processes import (
    descendant_pids,
    free_port,
    listening_addresses,
    pid_alive,
    wait_until,
)
from mcpq.ops.runtime.redis_binary import IN_MEMORY_ARGS, RedisProcess
from mcpq.shared.sealing import new_data_key
from mcpq.shared.settings import DEFAULT_TOOLS, Settings
from mcpq.shared.store import StatsSnapshot, TaskStore, open_store

_PORT_RACE_RETRIES = 3
_STRIPPED_ENV = {"REDIS_URL", "CELERY_BROKER_URL", "PORT", "WEB_CONCURRENCY"}
_STORE_KNOBS = {"MCPQ_KEY_PREFIX", "MCPQ_STORE_SHARDS", "MCPQ_REDIS_CLUSTER"}


class Stack(ChildProcesses):
    """redis-server + web process(es) + Celery worker(s) + extras, all owned by this object.

    ``env``: knobs for every child (``MCPQ_LEASE_S``...); ``redis_args``: redis-server's
    persistence arguments (in memory by default); ``broker_url``: Celery's broker for every
    child (``CELERY_BROKER_URL``, e.g. a RabbitMQ vhost), else the private Redis is both.
    ``store_url``: a task store the caller runs (a Redis Cluster: with ``MCPQ_REDIS_CLUSTER``
    and ``MCPQ_STORE_SHARDS`` among the knobs); the stack then starts no redis-server.
    """

    def __init__(
        self,
        name: str,
        workdir: Path,
        *,
        tools: str = DEFAULT_TOOLS,
        env: Mapping[str, str] | None = None,
        redis_args: Sequence[str] = IN_MEMORY_ARGS,
        broker_url: str = "",
        store_url: str = "",
    ) -> None:
        super().__init__(name, workdir)
        self.broker_url = broker_url
        self.store_url = store_url
        self.tools = tools
        self.knobs = dict(env or {})
        self.redis_args = tuple(redis_args)
        self.secret = secrets.token_urlsafe(32)
        #: The stack's data key (payloads sealed at rest); a knob or override may replace it.
        self.data_keys = new_data_key()
        self.redis_server: RedisProcess | None = None
        self.flower_url = ""
        self._redis_log: IO[bytes] | None = None
        self._redis_pids: list[int] = []
        self._store: TaskStore | None = None
        self._nodes = itertools.count(1)

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self, *, webs: int = 1, workers: int = 1, pool: str = "cpu") -> Self:
        """redis-server, then ``webs`` web processes, then ``workers`` Celery workers of pool
        kind ``pool``; on a failure everything started so far is stopped again."""
        try:
            if not self.store_url:
                self.start_redis()
            for _ in range(webs):
                self.start_web()
            for _ in range(workers):
                self.start_worker(pool=pool)
        except BaseException:
            self.abort()
            raise
        return self

    def abort(self) -> None:
        """Stop everything after a failed start (`close`, whatever is left)."""
        self.close()

    def close(self) -> dict[str, list[int]]:
        """Stop every process group, then Redis; returns the pids still alive afterwards by
        child name (``redis`` for redis-servers), which should be none."""
        self._stop_running()
        if self._store is not None:
            # Its counts written while its Redis is still up (else lost, and said so at exit).
            self._store.close()
            self._store = None
        if self.redis_server is not None:
            self.redis_server.close()
        if self._redis_log is not None:
            self._redis_log.close()
            self._redis_log = None
        left = self._left_behind()
        if redis_left := [pid for pid in self._redis_pids if pid_alive(pid)]:
            left["redis"] = redis_left
        return left

    # -- Redis ----------------------------------------------------------------------------------
    def start_redis(self, executable: str | None = None) -> RedisProcess:
        """A redis-server (``executable``, else the one `choose_redis_server` picks) on a free
        loopback port, data under the stack's directory, log in ``redis.log``."""
        if self._redis_log is None:
            self._redis_log = open(self.workdir / "redis.log", "ab")  # noqa: SIM115 (close())
        data_dir = self.workdir / "redis-data"
        data_dir.mkdir(exist_ok=True)
        self.redis_server = RedisProcess(
            extra_args=self.redis_args,
            data_dir=data_dir,
            output=self._redis_log,
            executable=executable,
        )
        self.redis_server.start()
        self._redis_pids.append(self.redis_server.pid)
        return self.redis_server

    def stop_redis(self) -> None:
        """SIGTERM redis-server by pid and reap it (with AOF on, it fsyncs before exiting)."""
        assert self.redis_server is not None, "start_redis() first"
        self.redis_server.stop()

    def start_redis_again(self) -> None:
        """Start redis-server again on the same port, directory and arguments."""
        assert self.redis_server is not None, "start_redis() first"
        self.redis_server.start()
        self._redis_pids.append(self.redis_server.pid)

    @property
    def redis_url(self) -> str:
        if self.store_url:
            return self.store_url
        assert self.redis_server is not None, "start_redis() first"
        return self.redis_server.url

    # -- children -------------------------------------------------------------------------------
    def child_env(self, **overrides: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("MCPQ_") and k not in _STRIPPED_ENV
        }
        pythonpath = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
        env.update(
            REDIS_URL=self.redis_url,
            MCPQ_SECRET=self.secret,
            MCPQ_DATA_KEYS=self.data_keys,
            MCPQ_TOOLS=self.tools,
            PYTHONPATH=os.pathsep.join(pythonpath),
            PYTHONUNBUFFERED="1",
            WEB_CONCURRENCY="1",
            # A stack is one principal (no auth: `anonymous`) driven by load generators and
            # whole test suites: the per-principal limits are off unless a test sets them.
            MCPQ_CREATE_RATE="0",
            MCPQ_MAX_OPEN_TASKS="0",
            MCPQ_MAX_SYNC_CALLS="0",
        )
        if self.broker_url:
            env["CELERY_BROKER_URL"] = self.broker_url
        env.update(self.knobs)
        env.update(overrides)
        return env

    def spawn(self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Child:
        """Start an extra child (``env``: default `child_env()`); `close` stops it too."""
        child = self._spawn(name, argv, self.child_env() if env is None else env)
        self.extras.append(child)
        return child

    def start_web(self, *, app: str | None = None, **env: str) -> str:
        """A web process with one gunicorn worker: ``mcpq web``, or gunicorn with mcpq's config
        serving the ASGI ``app`` (``module:attribute``, or gunicorn's ``module:factory()``; a
        test's app, imported from the repository). Returns its base URL once ``/healthz``
        answers."""
        problem: Exception | None = None
        for _attempt in range(_PORT_RACE_RETRIES):  # the free port may be taken before the bind
            port = free_port()
            if app is None:
                argv = [sys.executable, "-m", "mcpq", "web", "--host", "127.0.0.1"]
                argv += ["--port", str(port)]
            else:
                argv = commands.web_command(port=port, workers=1, host="127.0.0.1", app=app)
            child = self._spawn(self._numbered("web"), argv, self.child_env(**env))
            base = f"http://127.0.0.1:{port}"
            try:
                # Its own /healthz: the free port may be taken before the bind by another
                # process (another test's web), whose answer must not pass for this one's.
                ready = partial(own_http_ok, child.popen.pid, port, f"{base}/healthz")
                self._ready(child, ready, "/healthz")
            except (StackError, TimeoutError) as exc:
                problem = exc
                self._stop([child])
                continue
            self.webs.append(child)
            self.web_urls.append(base)
            return base
        raise StackError(f"web process did not start: {problem}")

    def start_worker(
        self,
        *,
        queues: str = "mcpq",
        concurrency: int = 2,
        loglevel: str = "INFO",
        events: bool = True,
        ready: Callable[[], object] | None = None,
        pool: str = "cpu",
        **env: str,
    ) -> Child:
        """A Celery worker (``celery worker`` itself, node ``<stack name><n>-<hex>``) of mcpq's
        pool kind ``pool`` (``cpu``: prefork, ``io``: threads); returns once ``ready()`` holds,
        by default once it logged `` ready.``."""
        node = f"{self.name}{next(self._nodes)}-{secrets.token_hex(3)}"
        argv = [
            *commands.WORKER,
            "--pool", commands.CELERY_POOLS[pool], "-c", str(concurrency), "-Q", queues,
            *(["-E"] if events else []), "--loglevel", loglevel,
            "-n", f"{node}@%h", "--without-mingle", "--without-gossip",
        ]  # fmt: skip
        child = self._spawn(
            self._numbered("worker"), argv, self.child_env(**commands.IO_POOL_ENV, **env)
        )
        self.workers.append(child)
        return self.wait_ready(child, ready)

    def spawn_pool(
        self,
        queues: str,
        node: str,
        *,
        concurrency: int | None = 2,
        pool: str | None = None,
        **env: str,
    ) -> Child:
        """``mcpq worker --queues Q`` (the Procfile's worker command) as node ``node@%h``;
        ``concurrency``/``pool`` ``None``: the command's defaults. Returns at once (see
        `wait_ready`)."""
        argv = [
            sys.executable, "-m", "mcpq", "worker",
            "--queues", queues, "--hostname", f"{node}@%h",
        ]  # fmt: skip
        if concurrency is not None:
            argv += ["--concurrency", str(concurrency)]
        if pool is not None:
            argv += ["--pool", pool]
        child = self._spawn(f"worker-{node}", argv, self.child_env(**env))
        self.workers.append(child)
        return child

    def wait_ready(self, child: Child, ready: Callable[[], object] | None = None) -> Child:
        """Until ``ready()`` holds, by default until the worker logged Celery's `` ready.``."""

        def logged_ready() -> bool:
            return " ready." in child.log()

        return self._ready(child, ready or logged_ready, "ready")

    def start_flower(self) -> str:
        """Flower on a free loopback port, its API open (auth is off); returns its base URL."""
        for _attempt in range(_PORT_RACE_RETRIES):
            port = free_port()
            argv = commands.flower_command(port=port, address="127.0.0.1")
            env = self.child_env(FLOWER_UNAUTHENTICATED_API="true")
            child = self.spawn(self._numbered("flower"), argv, env)
            base = f"http://127.0.0.1:{port}"
            try:
                self._ready(child, partial(http_ok, f"{base}/healthcheck"), "/healthcheck")
            except StackError:  # lost the port race: try another port
                self.stop_child(child)
                continue
            self.flower_url = base
            return base
        raise StackError("Flower did not start")

    @property
    def worker(self) -> Child:
        return self.workers[0]

    def url(self, index: int = 0) -> str:
        """The MCP endpoint of web process ``index``."""
        return f"{self.web_urls[index]}/mcp"

    def worker_that_received(self, tool: str, ref: str) -> list[Child]:
        """Live workers whose log shows Celery received a message for this task (the web tier's
        sends carry the ref as their Celery id, the sweeper's the ref and a suffix)."""
        received = re.compile(rf"Task {re.escape(tool)}\[{ref}(-[0-9a-f]+)?\] received")
        return [w for w in self.workers if received.search(w.log())]

    # -- reads through the store --------------------------------------------------------------
    def store(self) -> TaskStore:
        """The task store of the stack (one, made on first use)."""
        if self._store is None:
            # With the children's data keys (a knob may name others): records open as theirs do.
            env = {"REDIS_URL": self.redis_url}
            env["MCPQ_DATA_KEYS"] = self.knobs.get("MCPQ_DATA_KEYS", self.data_keys)
            # And their key schema and kind of client (a sharded store, a Redis Cluster).
            env.update({k: v for k, v in self.knobs.items() if k in _STORE_KNOBS})
            self._store = open_store(Settings.from_env(env))
        return self._store

    def stats(self, queues: Sequence[str] = ()) -> StatsSnapshot:
        """Counters, gauges, worker heartbeats (and the depth of ``queues``), as the store
        keeps them."""
        return self.store().stats(list(queues))

    def wait_runs(self, ref: str, runs: int, timeout: float) -> float:
        """Poll the task until ``runs`` (bumped by every successful claim) reaches ``runs``;
        returns the ``time.monotonic()`` at which it was seen."""

        def reached() -> float | None:
            record = self.store().record(ref)
            return time.monotonic() if record is not None and record.runs >= runs else None

        return wait_until(reached, timeout=timeout, interval=0.01, message=f"runs >= {runs}")


def own_http_ok(pid: int, port: int, url: str) -> bool:
    """``http_ok(url)``, and the process ``pid`` (or one of its descendants) listens on
    127.0.0.1:``port`` (from the kernel's socket table; where there is none, the answer
    alone counts)."""
    listening = listening_addresses({pid, *descendant_pids(pid)})
    if listening is not None and ("127.0.0.1", port) not in listening:
        return False
    return http_ok(url)


def http_ok(url: str) -> bool:
    """Whether ``GET url`` answers 200 (False while nothing listens)."""
    try:
        return httpx.get(url, timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False
