"""The end-to-end harness: a real mcpq stack as child processes, and a raw 2026-07-28 client.

``Stack`` runs its own ``redis-server`` on a free loopback port (never the shared one on 6379),
web processes (``python -m ops.cli web``: gunicorn + ``uvicorn_worker.UvicornWorker``, one worker
each) and Celery workers (prefork). Every child leads its own process group, logs to a file under
the stack's directory, and is stopped by signalling its group (SIGTERM, then SIGKILL); ``close()``
then asserts that no process of any group is left.

``McpClient`` speaks the stateless 2026-07-28 wire with httpx: ``MCP-Protocol-Version``,
``Mcp-Method``, ``Mcp-Name`` (tool name, or ``taskId`` on ``tasks/*``) and the ``_meta`` envelope
(protocolVersion, clientInfo, clientCapabilities with or without the Tasks extension, elicitation
and sampling) on every request.

Nothing here sleeps blindly: every wait is ``wait_until`` on an observable condition.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import secrets
import signal
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

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

REPO = Path(__file__).resolve().parents[2]
PROTOCOL = "2026-07-28"
TASKS_EXT = "io.modelcontextprotocol/tasks"
TEST_TOOLS = "tests.e2e.tools_fixture"
TERMINAL = frozenset({"completed", "failed", "cancelled"})

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
@dataclass
class Reply:
    status: int
    body: dict[str, Any]
    headers: httpx.Headers
    elapsed_s: float

    @property
    def result(self) -> dict[str, Any]:
        assert self.status == 200 and "result" in self.body, f"expected a result: {self}"
        return self.body["result"]  # type: ignore[no-any-return]

    @property
    def error(self) -> dict[str, Any]:
        assert "error" in self.body, f"expected an error: {self}"
        return self.body["error"]  # type: ignore[no-any-return]

    def __str__(self) -> str:
        return f"HTTP {self.status} {json.dumps(self.body)[:1500]}"


_AUTO: Any = object()
_NAME_PARAM = {
    "tools/call": "name",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}


class McpClient:
    """Sends one JSON-RPC request per POST, with the 2026-07-28 headers and ``_meta`` envelope."""

    def __init__(
        self,
        url: str,
        *,
        tasks: bool = True,
        elicitation: bool = True,
        sampling: bool = False,
        client_name: str = "mcpq-e2e",
    ) -> None:
        self.url = url
        self.tasks, self.elicitation, self.sampling = tasks, elicitation, sampling
        self.client_info = {"name": client_name, "version": "1.0.0"}
        self.http = httpx.Client(timeout=httpx.Timeout(30.0, connect=5.0))
        self._ids = itertools.count(1)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> McpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def capabilities(
        self,
        *,
        tasks: bool | None = None,
        elicitation: bool | None = None,
        sampling: bool | None = None,
    ) -> dict[str, Any]:
        caps: dict[str, Any] = {}
        if self.tasks if tasks is None else tasks:
            caps["extensions"] = {TASKS_EXT: {}}
        if self.elicitation if elicitation is None else elicitation:
            caps["elicitation"] = {"form": {}}
        if self.sampling if sampling is None else sampling:
            caps["sampling"] = {}
        return caps

    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        name: str | None = _AUTO,
        headers: Mapping[str, str] | None = None,
        **caps: bool | None,
    ) -> Reply:
        params = dict(params or {})
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL,
            "io.modelcontextprotocol/clientInfo": self.client_info,
            "io.modelcontextprotocol/clientCapabilities": self.capabilities(**caps),
        }
        sent = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL,
            "Mcp-Method": method,
        }
        if name is _AUTO:
            name = params.get(_NAME_PARAM.get(method, ""))
        if name is not None:
            sent["Mcp-Name"] = name
        sent.update(headers or {})
        message = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        started = time.monotonic()
        response = self.http.post(self.url, headers=sent, content=json.dumps(message))
        elapsed = time.monotonic() - started
        return Reply(response.status_code, _decode(response), response.headers, elapsed)

    # -- tools ----------------------------------------------------------------------------------
    def call_tool(
        self,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        input_responses: dict[str, Any] | None = None,
        request_state: str | None = None,
        **kwargs: Any,
    ) -> Reply:
        params: dict[str, Any] = {"name": tool, "arguments": arguments or {}}
        if input_responses is not None:
            params["inputResponses"] = input_responses
        if request_state is not None:
            params["requestState"] = request_state
        return self.request("tools/call", params, **kwargs)

    def create_task(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """``tools/call`` with the opt-in; asserts a ``CreateTaskResult`` came back."""
        result = self.call_tool(tool, arguments, tasks=True).result
        assert result["resultType"] == "task", result
        assert result["status"] == "working", result
        return result

    # -- tasks/* --------------------------------------------------------------------------------
    def get(self, task_id: str, **kwargs: Any) -> Reply:
        return self.request("tasks/get", {"taskId": task_id}, **kwargs)

    def task(self, task_id: str) -> dict[str, Any]:
        result = self.get(task_id).result
        assert result["resultType"] == "complete", result
        return result

    def update(self, task_id: str, responses: dict[str, Any], **kwargs: Any) -> Reply:
        return self.request(
            "tasks/update", {"taskId": task_id, "inputResponses": responses}, **kwargs
        )

    def cancel(self, task_id: str, **kwargs: Any) -> Reply:
        return self.request("tasks/cancel", {"taskId": task_id}, **kwargs)

    def wait_for_status(
        self, task_id: str, *statuses: str, timeout: float = 15.0, interval: float = 0.05
    ) -> dict[str, Any]:
        """Poll ``tasks/get`` until the status is one of ``statuses``; fails at once on another
        terminal status. Returns the task as last read."""
        seen: list[str] = []

        def reached() -> dict[str, Any] | None:
            task = self.task(task_id)
            if not seen or seen[-1] != task["status"]:
                seen.append(task["status"])
            if task["status"] in statuses:
                return task
            assert task["status"] not in TERMINAL, (
                f"task ended {task['status']}, wanted {statuses}: {task}"
            )
            return None

        try:
            return wait_until(
                reached, timeout=timeout, interval=interval, message=f"status in {statuses}"
            )
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; statuses seen: {seen}") from None


def _decode(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a JSON or SSE reply (the last ``data:`` event of a stream)."""
    if not response.content:
        return {}
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [ln[5:].strip() for ln in response.text.splitlines() if ln.startswith("data:")]
        return json.loads(data[-1]) if data else {}
    try:
        body = response.json()
    except ValueError:
        return {"_raw": response.text}
    return body if isinstance(body, dict) else {"_raw": body}


def text_of(result: dict[str, Any]) -> str:
    """All text content of a ``CallToolResult``, joined."""
    return "\n".join(
        c.get("text", "") for c in result.get("content", []) if c.get("type") == "text"
    )


def ref_of(task_id: str) -> str:
    """The storage ref (and Celery task id) of a task."""
    return task_ref(task_id)


__all__ = [
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
