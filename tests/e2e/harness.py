"""The end-to-end harness: a real mcpq stack as child processes, and a raw 2026-07-28 client.

``Stack`` runs its own ``redis-server`` on a free loopback port (never the shared one on 6379),
web processes (``python -m ops.cli web``: gunicorn + ``uvicorn_worker.UvicornWorker``, one worker
each) and Celery workers (prefork). Every child leads its own process group, logs to a file under
the stack's directory, and is stopped by signalling its group (SIGTERM, then SIGKILL); ``close()``
then asserts that no process of any group is left.

``McpClient`` (``tests/e2e/client.py``, re-exported here) speaks the stateless 2026-07-28 wire.

Nothing here sleeps blindly: every wait is ``wait_until`` on an observable condition.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import secrets
import signal
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO

import httpx
import redis

from ops.processes import (
    descendant_pids,
    free_port,
    group_alive,
    read_proc_stat,
    signal_group,
    spawn_in_new_group,
    stop_groups,
    wait_until,
)
from ops.redis_binary import IN_MEMORY_ARGS, RedisProcess
from shared.keys import Keys, task_ref
from shared.settings import DEFAULT_TOOLS
from tests.e2e.client import (  # re-exported: tests import the whole harness from here
    PROTOCOL,
    TASKS_EXT,
    TERMINAL,
    McpClient,
    Reply,
    ref_of,
    text_of,
)

__all__ = [
    "FAST_KNOBS",
    "PROTOCOL",
    "REPO",
    "TASKS_EXT",
    "TERMINAL",
    "Child",
    "McpClient",
    "Reply",
    "Stack",
    "StackError",
    "live_stacks",
    "ref_of",
    "text_of",
    "wait_until",
]

REPO = Path(__file__).resolve().parents[2]
TEST_TOOLS = "tests.e2e.tools_fixture"

# Short knobs: tests must not wait on production-sized timers.
FAST_KNOBS = {
    "MCPQ_INPUT_HOLD_S": "3",  # a worker waits this long for answers, then parks the task
    "MCPQ_LEASE_S": "3",
    "MCPQ_CANCEL_GRACE_S": "1",
    "MCPQ_SYNC_TIMEOUT_S": "20",
    "MCPQ_SWEEP_INTERVAL_S": "1",
    "MCPQ_POLL_INTERVAL_MS": "200",
}
_STRIPPED_ENV = {"REDIS_URL", "PORT", "WEB_CONCURRENCY"}
_START_TIMEOUT_S = 45.0
_STOP_TIMEOUT_S = 8.0

_LIVE: list[Stack] = []


def live_stacks() -> list[Stack]:
    """Stacks started and not yet closed (the root conftest attaches their logs to failures)."""
    return list(_LIVE)


class StackError(RuntimeError):
    """A process of the stack failed to start or died."""


class Child:
    """One child process: its own process group, output in a log file."""

    def __init__(self, name: str, argv: list[str], env: Mapping[str, str], log_path: Path) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        with open(log_path, "wb") as log:  # the child keeps its own copy of the descriptor
            self.popen = spawn_in_new_group(argv, env=env, cwd=str(REPO), stdout=log)
        self.pgid = self.popen.pid
        self.pids: set[int] = {self.popen.pid}

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def remember_descendants(self) -> None:
        """Record every process the child forked so far (checked again after stop)."""
        self.pids |= descendant_pids(self.popen.pid)

    def wait_for_run_end(self, ref: str, timeout: float = 10.0, after: int = 0) -> str:
        """How the ``after``-th next run of task ``ref`` ended (``completed``, ``parked``,
        ``cancelled``, ``busy``, ...), from the worker's ``run ended`` log line."""

        def ended() -> list[str]:
            found = []
            for line in self.log().splitlines():
                if "run ended" not in line or ref[:12] not in line:
                    continue
                if line.startswith("{"):
                    found.append(str(json.loads(line).get("transition")))
                elif match := re.search(r"transition=(\S+)", line):
                    found.append(match.group(1))
            return found

        runs = wait_until(
            lambda: (found := ended())[after:] and found,
            timeout=timeout,
            message=f"run {after + 1} of {ref[:12]} to end in {self.name}",
        )
        return runs[after]

    def wait_for_log(self, needle: str, timeout: float = 10.0) -> str:
        """The first log line containing ``needle``; fails early if the process died."""

        def find() -> str | None:
            line = next((ln for ln in self.log().splitlines() if needle in ln), None)
            if line is None and not self.alive:
                raise StackError(f"{self.name} exited ({self.popen.returncode}):\n{self.tail()}")
            return line

        try:
            return wait_until(
                find, timeout=timeout, interval=0.05, message=f"{needle!r} in {self.name}"
            )
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; log tail:\n{self.tail()}") from None

    def leftovers(self) -> list[int]:
        """Processes of this child's group still alive (zombies aside)."""
        left = []
        for pid in self.pids:
            stat = read_proc_stat(pid)
            if stat is not None and stat.state != "Z" and stat.pgid == self.pgid:
                left.append(pid)
        if group_alive(self.popen):
            left.append(self.pgid)
        return sorted(set(left))


class Stack:
    """redis-server + web process(es) + Celery worker(s), all real, all owned by this object."""

    def __init__(
        self,
        name: str,
        workdir: Path,
        *,
        tools: str = f"{DEFAULT_TOOLS},{TEST_TOOLS}",
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.tools = tools
        self.secret = secrets.token_urlsafe(24)
        self.extra_env = dict(FAST_KNOBS if env is None else env)
        self.redis: RedisProcess | None = None
        self._redis_log: IO[bytes] | None = None
        self.webs: list[Child] = []
        self.web_urls: list[str] = []
        self.workers: list[Child] = []
        self.stopped: list[Child] = []
        self._names = itertools.count(1)
        _LIVE.append(self)

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self, *, webs: int = 1, workers: int = 1) -> Stack:
        try:
            self.start_redis()
            for _ in range(webs):
                self.start_web()
            for _ in range(workers):
                self.start_worker()
        except BaseException:
            self.close(check=False)
            raise
        return self

    def start_redis(self) -> RedisProcess:
        self._redis_log = open(self.workdir / "redis.log", "wb")  # noqa: SIM115 (closed by close())
        data_dir = self.workdir / "redis-data"
        data_dir.mkdir(exist_ok=True)
        self.redis = RedisProcess(
            extra_args=IN_MEMORY_ARGS, data_dir=data_dir, output=self._redis_log
        )
        self.redis.start()
        return self.redis

    @property
    def redis_url(self) -> str:
        assert self.redis is not None, "start_redis() first"
        return self.redis.url

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
            MCPQ_TOOLS=self.tools,
            PYTHONPATH=os.pathsep.join(pythonpath),
            PYTHONUNBUFFERED="1",
            WEB_CONCURRENCY="1",
        )
        env.update(self.extra_env)
        env.update(overrides)
        return env

    def start_web(self) -> str:
        """Start a web process (one gunicorn worker); returns its base URL once /healthz answers."""
        index = len(self.webs) + len(self.stopped)
        last_error: Exception | None = None
        for attempt in range(3):  # the free port may be taken between probe and bind
            port = free_port()
            argv = [
                sys.executable,
                "-m",
                "ops.cli",
                "web",
                "--port",
                str(port),
                "--host",
                "127.0.0.1",
            ]
            log_path = self.workdir / f"web{index}-{attempt}.log"
            child = Child(f"{self.name}/web{index}", argv, self.child_env(), log_path)
            base = f"http://127.0.0.1:{port}"
            try:
                self._wait_healthy(child, base)
            except StackError as exc:
                last_error = exc
                stop_groups([child.popen], timeout=_STOP_TIMEOUT_S)
                self.stopped.append(child)
                continue
            child.remember_descendants()
            self.webs.append(child)
            self.web_urls.append(base)
            return base
        raise StackError(f"web process did not start: {last_error}")

    def _wait_healthy(self, child: Child, base: str) -> None:
        def healthy() -> bool:
            if not child.alive:
                raise StackError(f"{child.name} exited ({child.popen.returncode}):\n{child.tail()}")
            try:
                return httpx.get(f"{base}/healthz", timeout=1.0).status_code == 200
            except httpx.HTTPError:
                return False

        try:
            wait_until(healthy, timeout=_START_TIMEOUT_S, interval=0.1, message=f"{base}/healthz")
        except TimeoutError as exc:
            raise StackError(f"{exc}; log tail:\n{child.tail()}") from None

    def start_worker(self, *, queues: str = "mcpq", concurrency: int = 2) -> Child:
        """Start a Celery prefork worker; returns once it logged ``ready.``."""
        node = f"e2e{next(self._names)}-{secrets.token_hex(3)}"
        argv = [
            sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker",
            "--pool", "prefork", "-c", str(concurrency), "-Q", queues, "-E",
            "--loglevel", "INFO", "-n", f"{node}@%h", "--without-mingle", "--without-gossip",
        ]  # fmt: skip
        index = len(self.workers) + len(self.stopped)
        child = Child(
            f"{self.name}/worker{index}",
            argv,
            self.child_env(),
            self.workdir / f"worker{index}.log",
        )
        self.workers.append(child)
        child.wait_for_log(f"{node}@", timeout=_START_TIMEOUT_S)
        child.wait_for_log(" ready.", timeout=_START_TIMEOUT_S)
        child.remember_descendants()
        return child

    @property
    def worker(self) -> Child:
        return self.workers[0]

    def url(self, index: int = 0) -> str:
        """The MCP endpoint of web process ``index``."""
        return f"{self.web_urls[index]}/mcp"

    def stop_child(self, child: Child) -> None:
        child.remember_descendants()
        stop_groups([child.popen], timeout=_STOP_TIMEOUT_S)
        for group in (self.webs, self.workers):
            if child in group:
                index = group.index(child)
                group.remove(child)
                if group is self.webs:
                    self.web_urls.pop(index)
        self.stopped.append(child)

    def kill_child(self, child: Child) -> None:
        """SIGKILL the child's whole process group at once (a crash), then reap it."""
        child.remember_descendants()
        signal_group(child.pgid, signal.SIGKILL)
        self.stop_child(child)

    def close(self, *, check: bool = True) -> None:
        """Stop every process group and Redis; with ``check``, assert nothing is left behind."""
        children = self.webs + self.workers
        for child in children:
            child.remember_descendants()
        stop_groups([c.popen for c in children], timeout=_STOP_TIMEOUT_S)
        self.stopped.extend(children)
        self.webs, self.workers, self.web_urls = [], [], []
        redis_pid = self.redis.process.pid if self.redis and self.redis.process else None
        if self.redis is not None:
            self.redis.close()
        if self._redis_log is not None:
            self._redis_log.close()
            self._redis_log = None
        if self in _LIVE:
            _LIVE.remove(self)
        if not check:
            return
        left = {c.name: c.leftovers() for c in self.stopped}
        left = {name: pids for name, pids in left.items() if pids}
        if redis_pid is not None and (stat := read_proc_stat(redis_pid)) and stat.state != "Z":
            left["redis"] = [redis_pid]
        assert not left, f"processes left after teardown: {left}"

    def tails(self, lines: int = 40) -> str:
        parts = []
        for child in self.webs + self.workers + self.stopped:
            parts.append(f"----- {child.name} ({child.log_path}) -----\n{child.tail(lines)}")
        return "\n".join(parts)

    # -- white-box helpers (read-only views of the task store) ----------------------------------
    @contextlib.contextmanager
    def redis_client(self) -> Iterator[redis.Redis]:
        client = redis.Redis.from_url(self.redis_url, decode_responses=True)
        try:
            yield client
        finally:
            client.close()

    def task_hash(self, task_id: str) -> dict[str, str]:
        """The stored hash of a task (keys are derived from the taskId, never the id itself)."""
        with self.redis_client() as client:
            return client.hgetall(Keys().task(task_ref(task_id)))  # type: ignore[return-value]


# -- the raw client ------------------------------------------------------------------------------
