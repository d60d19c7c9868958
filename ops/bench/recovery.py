"""Recovery benchmark: how fast does a task resume after the worker running it is SIGKILLed?

``python -m ops.bench.recovery --runs 5`` (from the repository root) starts a private stack: a
redis-server on a free loopback port, one web process and two Celery prefork workers, each in its
own process group. Each run creates a task of ``bench_effect`` (below: a memoized ``ctx.step``
appends a line to a file, then the tool sleeps), waits until the step is stored, SIGKILLs the
whole process group of the worker that received the task (Celery main process and pool children),
and measures the time until the other, already running worker claims the task (the task hash's
``runs`` counter going to 2). Then it waits for ``completed`` and starts a replacement worker for
the next run.

It prints the knobs, each kill → resumed-start time, their median, and two counts that must be
zero: tasks lost (not completed) and double effects (extra lines written by the step). Exit
status: 0 when nothing was lost or done twice and the median is within the target (15 s).

This module is also the benchmark's tool module (``MCPQ_TOOLS=...,ops.bench.recovery``): at
import it only registers ``bench_effect``.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import redis

from ops.processes import (
    descendant_pids,
    free_port,
    read_proc_stat,
    signal_group,
    spawn_in_new_group,
    stop_groups,
    wait_until,
)
from ops.redis_binary import IN_MEMORY_ARGS, RedisProcess
from shared.keys import Keys, task_ref
from shared.settings import DEFAULT_TOOLS
from shared.tools import ToolContext, tool

PROTOCOL = "2026-07-28"
TOOL = "bench_effect"
TOOLS = f"{DEFAULT_TOOLS},ops.bench.recovery"
TARGET_MEDIAN_S = 15.0
REPO = Path(__file__).resolve().parents[2]
_START_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 10.0


@tool(
    name=TOOL,
    task="optional",
    description="Benchmark: a memoized step appends a line to `path`, then the tool sleeps.",
)
def bench_effect(ctx: ToolContext, path: str, seconds: float = 2.0) -> str:
    def effect() -> int:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("effect\n")
        return 1

    ctx.step("effect", effect)
    ctx.report("stepped")
    ctx.sleep(seconds)
    return f"done after {seconds:g}s"


# -- the stack -------------------------------------------------------------------------------------
@dataclass
class Proc:
    """One child process group with its log file."""

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
        left = []
        for pid in self.pids:
            stat = read_proc_stat(pid)
            if stat is not None and stat.state != "Z" and stat.pgid == self.pgid:
                left.append(pid)
        return sorted(left)


class BenchStack:
    """redis-server + one web process + Celery workers, owned (and stopped) by this object."""

    def __init__(self, workdir: Path, knobs: dict[str, str]) -> None:
        self.workdir = workdir
        self.knobs = knobs
        self.secret = secrets.token_urlsafe(24)
        self.redis: RedisProcess | None = None
        self.web: Proc | None = None
        self.web_port = 0
        self.workers: list[Proc] = []
        self.stopped: list[Proc] = []
        self._count = 0

    def env(self) -> dict[str, str]:
        assert self.redis is not None
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCPQ_")}
        for name in ("REDIS_URL", "PORT", "WEB_CONCURRENCY"):
            env.pop(name, None)
        pythonpath = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
        env.update(
            REDIS_URL=self.redis.url,
            MCPQ_SECRET=self.secret,
            MCPQ_TOOLS=TOOLS,
            PYTHONPATH=os.pathsep.join(pythonpath),
            PYTHONUNBUFFERED="1",
            WEB_CONCURRENCY="1",
            **self.knobs,
        )
        return env

    def _spawn(self, name: str, argv: list[str]) -> Proc:
        log_path = self.workdir / f"{name}.log"
        with open(log_path, "wb") as log:
            popen = spawn_in_new_group(argv, env=self.env(), cwd=str(REPO), stdout=log)
        proc = Proc(name, popen, log_path)
        proc.remember()
        return proc

    def start(self, workers: int) -> None:
        data_dir = self.workdir / "redis"
        data_dir.mkdir(exist_ok=True)
        self.redis = RedisProcess(
            extra_args=IN_MEMORY_ARGS, data_dir=data_dir, output=subprocess.DEVNULL
        )
        self.redis.start()
        self.start_web()
        for _ in range(workers):
            self.start_worker()

    def start_web(self) -> None:
        self.web_port = free_port()
        argv = [sys.executable, "-m", "ops.cli", "web", "--port", str(self.web_port)]
        self.web = self._spawn("web", [*argv, "--host", "127.0.0.1"])
        web = self.web

        def healthy() -> bool:
            if web.popen.poll() is not None:
                raise RuntimeError(f"web exited:\n{web.tail()}")
            conn = http.client.HTTPConnection("127.0.0.1", self.web_port, timeout=1.0)
            try:
                conn.request("GET", "/healthz")
                return conn.getresponse().status == 200
            except (OSError, http.client.HTTPException):
                return False
            finally:
                conn.close()

        wait_until(healthy, timeout=_START_TIMEOUT_S, interval=0.1, message="web /healthz")
        web.remember()

    def start_worker(self) -> Proc:
        self._count += 1
        node = f"bench{self._count}-{secrets.token_hex(3)}"
        argv = [
            sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker",
            "--pool", "prefork", "-c", "2", "-Q", "mcpq", "-E", "--loglevel", "INFO",
            "-n", f"{node}@%h", "--without-mingle", "--without-gossip",
        ]  # fmt: skip
        proc = self._spawn(f"worker{self._count}", argv)
        self.workers.append(proc)

        def ready() -> bool:
            if proc.popen.poll() is not None:
                raise RuntimeError(f"{proc.name} exited:\n{proc.tail()}")
            return " ready." in proc.log()

        wait_until(ready, timeout=_START_TIMEOUT_S, interval=0.05, message=f"{proc.name} ready")
        proc.remember()
        return proc

    def kill(self, proc: Proc) -> float:
        """SIGKILL the worker's whole process group; returns the monotonic time of the kill."""
        proc.remember()
        at = time.monotonic()
        signal_group(proc.pgid, signal.SIGKILL)
        stop_groups([proc.popen], timeout=_STOP_TIMEOUT_S)  # reaps it
        self.workers.remove(proc)
        self.stopped.append(proc)
        return at

    def close(self) -> list[int]:
        """Stop everything; returns the pids still alive afterwards (should be none)."""
        procs = [p for p in [self.web, *self.workers] if p is not None]
        for proc in procs:
            proc.remember()
        stop_groups([p.popen for p in procs], timeout=_STOP_TIMEOUT_S)
        self.stopped.extend(procs)
        self.workers, self.web = [], None
        left = [pid for proc in self.stopped for pid in proc.leftovers()]
        if self.redis is not None:
            pid = self.redis.process.pid if self.redis.process else None
            self.redis.close()
            if pid is not None and (stat := read_proc_stat(pid)) and stat.state != "Z":
                left.append(pid)
        return left


# -- a minimal MCP client (stdlib only) -----------------------------------------------------------
class Client:
    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "127.0.0.1", parts.port, parts.path
        self._ids = 0

    def request(self, method: str, params: dict[str, Any], name: str) -> dict[str, Any]:
        self._ids += 1
        caps: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
        params = {
            **params,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": PROTOCOL,
                "io.modelcontextprotocol/clientInfo": {"name": "mcpq-bench", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": caps,
            },
        }
        body = json.dumps({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params})
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
            reply = json.loads(conn.getresponse().read())
        finally:
            conn.close()
        if "result" not in reply:
            raise RuntimeError(f"{method} failed: {reply}")
        result: dict[str, Any] = reply["result"]
        return result

    def create(self, tool_name: str, arguments: dict[str, Any]) -> str:
        result = self.request("tools/call", {"name": tool_name, "arguments": arguments}, tool_name)
        if result.get("resultType") != "task":
            raise RuntimeError(f"expected a task: {result}")
        return str(result["taskId"])

    def get(self, task_id: str) -> dict[str, Any]:
        return self.request("tasks/get", {"taskId": task_id}, task_id)


# -- the benchmark -------------------------------------------------------------------------------
@dataclass
class RunResult:
    resumed_s: float | None
    completed: bool
    effects: int


def _one_run(
    stack: BenchStack, client: Client, store: redis.Redis, index: int, seconds: float
) -> RunResult:
    keys = Keys()
    effect_file = stack.workdir / f"effect-{index}.txt"
    task_id = client.create(TOOL, {"path": str(effect_file), "seconds": seconds})
    ref = task_ref(task_id)
    wait_until(
        lambda: store.hexists(keys.steps(ref), "effect"), timeout=30, message="the step stored"
    )
    needle = f"Task {TOOL}[{ref}] received"
    (victim,) = wait_until(
        lambda: [w for w in stack.workers if needle in w.log()],
        timeout=10,
        message="the worker running the task",
    )
    killed_at = stack.kill(victim)

    def claimed_again() -> float | None:
        runs = store.hget(keys.task(ref), "runs")
        return time.monotonic() if runs is not None and int(str(runs)) >= 2 else None

    resumed_s: float | None
    try:
        resumed_s = wait_until(claimed_again, timeout=120, interval=0.01) - killed_at
    except TimeoutError:
        resumed_s = None
    completed = False
    with contextlib.suppress(TimeoutError):
        completed = bool(
            wait_until(
                lambda: client.get(task_id)["status"] == "completed", timeout=60, interval=0.1
            )
        )
    effects = len(effect_file.read_text(encoding="utf-8").splitlines())
    stack.start_worker()  # two workers again for the next run
    return RunResult(resumed_s, completed, effects)


def run(runs: int, knobs: dict[str, str], seconds: float, workdir: Path) -> int:
    print("knobs: " + ", ".join(f"{k}={v}" for k, v in sorted(knobs.items())))
    print(f"stack: 1 web, 2 prefork workers (concurrency 2); tool {TOOL} sleeps {seconds:g}s")
    stack = BenchStack(workdir, knobs)
    results: list[RunResult] = []
    left: list[int] = []
    try:
        stack.start(workers=2)
        assert stack.redis is not None
        client = Client(f"http://127.0.0.1:{stack.web_port}/mcp")
        store = redis.Redis.from_url(stack.redis.url, decode_responses=True, socket_timeout=5)
        try:
            for index in range(1, runs + 1):
                result = _one_run(stack, client, store, index, seconds)
                results.append(result)
                shown = "never" if result.resumed_s is None else f"{result.resumed_s:.2f}s"
                print(
                    f"run {index}: kill -> resumed start {shown}; completed={result.completed}; "
                    f"effects={result.effects}",
                    flush=True,
                )
        finally:
            store.close()
    finally:
        left = stack.close()
    times = [r.resumed_s for r in results if r.resumed_s is not None]
    lost = sum(1 for r in results if not r.completed)
    doubles = sum(max(r.effects - 1, 0) for r in results)
    median = statistics.median(times) if times else float("inf")
    print(f"median kill -> resumed start: {median:.2f}s over {len(times)}/{runs} runs")
    print(f"lost: {lost}; double effects: {doubles}; processes left: {len(left)}")
    ok = not lost and not doubles and not left and len(times) == runs
    ok = ok and median <= TARGET_MEDIAN_S
    print(
        f"target: median within {TARGET_MEDIAN_S:g}s, nothing lost or done twice: "
        + ("met" if ok else "MISSED")
    )
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.bench.recovery", description=__doc__)
    parser.add_argument("--runs", type=int, default=5, help="kills to measure (at least 5)")
    parser.add_argument("--lease-s", default="5", help="MCPQ_LEASE_S (default 5)")
    parser.add_argument("--sweep-interval-s", default="1", help="MCPQ_SWEEP_INTERVAL_S (default 1)")
    parser.add_argument("--tool-seconds", type=float, default=2.0, help="how long the tool sleeps")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = parser.parse_args(argv)
    if args.runs < 5:
        parser.error("--runs must be at least 5")
    knobs = {"MCPQ_LEASE_S": args.lease_s, "MCPQ_SWEEP_INTERVAL_S": args.sweep_interval_s}
    workdir = Path(tempfile.mkdtemp(prefix="mcpq-bench-recovery-"))
    try:
        return run(args.runs, knobs, args.tool_seconds, workdir)
    finally:
        if args.keep:
            print(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
