"""The private stack the benchmarks run, and a stdlib MCP client to drive it.

`BenchStack` owns a redis-server on a free loopback port (`RedisProcess`, never the shared one),
one ``mcpq web`` and the workers a benchmark starts, each in its own process group
(`spawn_in_new_group`), with its output in a log file of the work directory. `close()` stops them
all by process group and returns the pids still alive afterwards (none, when all went well).
`McpClient` speaks the 2026-07-28 JSON-RPC over plain ``http.client``.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import redis

from ops.processes import (
    descendant_pids,
    free_port,
    pid_alive,
    read_proc_stat,
    signal_group,
    spawn_in_new_group,
    stop_groups,
    wait_until,
)
from ops.redis_binary import IN_MEMORY_ARGS, RedisProcess

PROTOCOL = "2026-07-28"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
_STRIPPED = {"REDIS_URL", "PORT", "WEB_CONCURRENCY"}


@dataclass
class Proc:
    """One child process group with its log file; `pids` are the members seen so far."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    pids: set[int] = field(default_factory=set)

    @property
    def pgid(self) -> int:
        return self.popen.pid

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def remember(self) -> None:
        self.pids |= {self.popen.pid, *descendant_pids(self.popen.pid)}

    def leftovers(self) -> list[int]:
        """The remembered pids still alive in this process group."""
        stats = (read_proc_stat(pid) for pid in self.pids)
        return sorted(s.pid for s in stats if s and s.state != "Z" and s.pgid == self.pgid)

    def check_running(self) -> None:
        if self.popen.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.popen.returncode}:\n{self.tail()}")


class BenchStack:
    """redis-server + one web process + workers, owned (and stopped) by this object.

    Children get the caller's environment without ``MCPQ_*``, ``REDIS_URL``, ``PORT`` and
    ``WEB_CONCURRENCY``, then the private Redis, a fresh secret, ``MCPQ_TOOLS=tools``, the
    repository on ``PYTHONPATH``, ``WEB_CONCURRENCY=1`` and `knobs`; subclasses may add to `env`.
    """

    def __init__(self, workdir: Path, tools: str, knobs: Mapping[str, str] | None = None) -> None:
        self.workdir = workdir
        self.tools = tools
        self.knobs = dict(knobs or {})
        self.secret = secrets.token_urlsafe(32)
        data_dir = workdir / "redis"
        data_dir.mkdir(exist_ok=True)
        self.redis = RedisProcess(extra_args=IN_MEMORY_ARGS, data_dir=data_dir)
        self.web: Proc | None = None
        self.web_port = 0
        self.workers: list[Proc] = []
        self.stopped: list[Proc] = []

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}/mcp"

    def env(self, name: str) -> dict[str, str]:
        """The environment of the child called `name`."""
        env = {
            k: v for k, v in os.environ.items() if not k.startswith("MCPQ_") and k not in _STRIPPED
        }
        pythonpath = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
        env.update(
            REDIS_URL=self.redis.url,
            MCPQ_SECRET=self.secret,
            MCPQ_TOOLS=self.tools,
            PYTHONPATH=os.pathsep.join(pythonpath),
            PYTHONUNBUFFERED="1",
            WEB_CONCURRENCY="1",
            **self.knobs,
        )
        return env

    def redis_client(self) -> redis.Redis:
        return redis.Redis.from_url(self.redis.url, decode_responses=True, socket_timeout=5)

    def start(self) -> None:
        """The private redis-server, then ``mcpq web``; workers are the caller's to add."""
        print(f"starting {self.redis.binary.describe()}", file=sys.stderr, flush=True)
        self.redis.start()
        self.start_web()

    def spawn(self, name: str, argv: Sequence[str]) -> Proc:
        log_path = self.workdir / f"{name}.log"
        with open(log_path, "wb") as log:  # the child keeps its own copy of the descriptor
            popen = spawn_in_new_group(argv, env=self.env(name), cwd=str(REPO), stdout=log)
        proc = Proc(name, popen, log_path)
        proc.remember()
        return proc

    def start_web(self) -> Proc:
        """``mcpq web`` on a free loopback port; returns once ``/healthz`` answers 200."""
        self.web_port = free_port()
        argv = [sys.executable, "-m", "ops.cli", "web", "--host", "127.0.0.1"]
        self.web = web = self.spawn("web", [*argv, "--port", str(self.web_port)])
        self._wait_ready(web, lambda: _healthy(self.web_port), interval=0.1, what="/healthz")
        return web

    def start_worker(self, name: str, argv: Sequence[str], ready: Callable[[Proc], bool]) -> Proc:
        """Spawn a worker; returns once `ready(proc)` holds (fails early if it exits)."""
        proc = self.spawn(name, argv)
        self.workers.append(proc)
        self._wait_ready(proc, lambda: ready(proc), interval=0.05, what="ready")
        return proc

    def _wait_ready(
        self, proc: Proc, ready: Callable[[], bool], interval: float, what: str
    ) -> None:
        def check() -> bool:
            proc.check_running()
            return ready()

        wait_until(check, timeout=START_TIMEOUT_S, interval=interval, message=f"{proc.name} {what}")
        proc.remember()

    def kill(self, proc: Proc) -> float:
        """SIGKILL a worker's whole process group; returns the monotonic time of the kill."""
        proc.remember()
        at = time.monotonic()
        signal_group(proc.pgid, signal.SIGKILL)
        stop_groups([proc.popen], timeout=STOP_TIMEOUT_S)  # reaps it
        self.workers.remove(proc)
        self.stopped.append(proc)
        return at

    def close(self) -> list[int]:
        """Stop everything; returns the pids still alive afterwards (should be none)."""
        procs = [p for p in [self.web, *self.workers] if p is not None]
        for proc in procs:
            proc.remember()
        stop_groups([p.popen for p in procs], timeout=STOP_TIMEOUT_S)
        self.stopped.extend(procs)
        self.workers, self.web = [], None
        left = [pid for proc in self.stopped for pid in proc.leftovers()]
        redis_pid = self.redis.process.pid if self.redis.process else None
        self.redis.close()
        if redis_pid is not None and pid_alive(redis_pid):
            left.append(redis_pid)
        return left


def _healthy(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1.0)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


class McpClient:
    """A minimal MCP client (stdlib only): JSON-RPC POSTs with the 2026-07-28 headers and _meta."""

    def __init__(self, url: str, capabilities: Mapping[str, Any] | None = None) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "127.0.0.1", parts.port, parts.path
        self._ids = 0
        self.capabilities = dict(capabilities or {"extensions": {TASKS_EXTENSION: {}}})

    def request(self, method: str, params: Mapping[str, Any], name: str) -> dict[str, Any]:
        self._ids += 1
        meta = {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL,
            "io.modelcontextprotocol/clientInfo": {"name": "mcpq-bench", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
        }
        message = {"jsonrpc": "2.0", "id": self._ids, "method": method}
        body = json.dumps({**message, "params": {**params, "_meta": meta}})
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL,
            "Mcp-Method": method,
            "Mcp-Name": name,
        }
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            conn.request("POST", self.path, body=body, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        reply = json.loads(raw)
        result = reply.get("result") if isinstance(reply, dict) else None
        if response.status != 200 or not isinstance(result, dict):
            raise RuntimeError(f"{method} failed: HTTP {response.status} {raw[:300]!r}")
        return result

    def create(self, tool_name: str, arguments: Mapping[str, Any]) -> str:
        """``tools/call`` as a task; returns the task id."""
        params = {"name": tool_name, "arguments": dict(arguments)}
        result = self.request("tools/call", params, tool_name)
        if result.get("resultType") != "task":
            raise RuntimeError(f"tools/call did not create a task: {result}")
        return str(result["taskId"])

    def get(self, task_id: str) -> dict[str, Any]:
        return self.request("tasks/get", {"taskId": task_id}, task_id)
