"""Throughput of a worker pool with one worker process, then two: ``python -m ops.bench.pools``.

Starts a private redis-server (never the shared one), ``mcpq web`` and
``mcpq worker --queues bulk --concurrency 1`` nodes on loopback, exactly as the Procfile's
``worker_bulk`` formation runs them. It creates ``--tasks`` tasks of ``bench_sleep`` (declared
below on the ``bulk`` queue; it sleeps ``--seconds``) through ``POST /mcp`` and measures tasks
completed per second, from the first create to the last completion (read from the deployment's
task counters in Redis), first with one worker process, then with a second one added. Prints both
rates and their ratio; with ``--json``, one JSON object instead.

This module is also the tool module of the benchmark (``MCPQ_TOOLS=ops.bench.pools``): like any
tool module it is imported by the web tier and the workers, so it imports only ``shared``, the
standard library and ``ops``' process helpers at module level.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

import redis

from ops.processes import free_port, spawn_in_new_group, stop_groups, wait_until
from ops.redis_binary import IN_MEMORY_ARGS, RedisProcess
from shared.keys import Keys
from shared.tools import ToolContext, tool

BULK_QUEUE = "bulk"
TOOL = "bench_sleep"
TOOLS_MODULE = "ops.bench.pools"
PROTOCOL = "2026-07-28"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0
_STRIPPED = {"REDIS_URL", "PORT", "WEB_CONCURRENCY", "PROMETHEUS_MULTIPROC_DIR"}


@tool(
    task="optional", queue=BULK_QUEUE, description="Benchmark: sleeps `seconds` on the bulk pool."
)
def bench_sleep(ctx: ToolContext, seconds: float = 0.2) -> str:
    ctx.sleep(seconds)
    return "slept"


@dataclass(frozen=True)
class Result:
    tasks: int
    seconds: float
    one_worker_tasks_per_s: float
    two_workers_tasks_per_s: float

    @property
    def ratio(self) -> float:
        return self.two_workers_tasks_per_s / self.one_worker_tasks_per_s

    def render(self) -> str:
        ideal = 1 / self.seconds
        return "\n".join(
            [
                f"bulk pool: {self.tasks} tasks of {TOOL}({self.seconds:g} s), "
                f"concurrency 1 per worker process (ideal {ideal:.2f} tasks/s per process)",
                f"  1 worker process:   {self.one_worker_tasks_per_s:7.2f} tasks/s",
                f"  2 worker processes: {self.two_workers_tasks_per_s:7.2f} tasks/s",
                f"  ratio:              {self.ratio:7.2f}x",
            ]
        )

    def as_json(self) -> str:
        return json.dumps({**asdict(self), "ratio": round(self.ratio, 3)})


class McpCaller:
    """Creates tasks with plain ``http.client`` (the 2026-07-28 headers and ``_meta``)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._ids = 0

    def create_task(self, tool_name: str, arguments: Mapping[str, Any]) -> None:
        self._ids += 1
        meta = {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL,
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
        }
        params = {"name": tool_name, "arguments": dict(arguments), "_meta": meta}
        body = json.dumps(
            {"jsonrpc": "2.0", "id": self._ids, "method": "tools/call", "params": params}
        )
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL,
            "Mcp-Method": "tools/call",
            "Mcp-Name": tool_name,
        }
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("POST", "/mcp", body=body, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        reply = json.loads(raw)
        result = reply.get("result") if isinstance(reply, dict) else None
        if (
            response.status != 200
            or not isinstance(result, dict)
            or result.get("resultType") != "task"
        ):
            raise RuntimeError(
                f"tools/call did not create a task: HTTP {response.status} {raw[:300]!r}"
            )


class Bench:
    """The processes of one benchmark run, all in a private directory, all stopped at the end."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.redis = RedisProcess(extra_args=IN_MEMORY_ARGS, data_dir=workdir)
        self.children: list[subprocess.Popen[bytes]] = []
        self._logs: list[IO[bytes]] = []
        self.secret = secrets.token_urlsafe(32)
        self.web_port = 0

    def env(self, name: str) -> dict[str, str]:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith("MCPQ_") and k not in _STRIPPED
        }
        metrics_dir = self.workdir / f"metrics-{name}"
        metrics_dir.mkdir()
        pythonpath = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
        env.update(
            REDIS_URL=self.redis.url,
            MCPQ_SECRET=self.secret,
            MCPQ_TOOLS=TOOLS_MODULE,
            MCPQ_LOG_LEVEL="WARNING",
            WEB_CONCURRENCY="1",
            PROMETHEUS_MULTIPROC_DIR=str(metrics_dir),
            PYTHONPATH=os.pathsep.join(pythonpath),
            PYTHONUNBUFFERED="1",
        )
        return env

    def spawn(self, name: str, argv: Sequence[str]) -> subprocess.Popen[bytes]:
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 (closed by close())
        self._logs.append(log)
        process = spawn_in_new_group(argv, env=self.env(name), cwd=str(REPO), stdout=log)
        self.children.append(process)
        return process

    def start_web(self) -> McpCaller:
        self.web_port = free_port()
        argv = [
            sys.executable,
            "-m",
            "ops.cli",
            "web",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.web_port),
        ]
        process = self.spawn("web", argv)
        wait_until(
            lambda: _answers(process, self.web_port),
            timeout=START_TIMEOUT_S,
            interval=0.1,
            message="mcpq web answering /healthz",
        )
        return McpCaller(self.web_port)

    def start_worker(self, node: str) -> None:
        """``mcpq worker --queues bulk --concurrency 1``; returns once it beats in Redis."""
        argv = [
            sys.executable, "-m", "ops.cli", "worker", "--queues", BULK_QUEUE,
            "--concurrency", "1", "--hostname", f"{node}@%h",
        ]  # fmt: skip
        process = self.spawn(node, argv)
        client = self.redis_client()
        try:

            def beating() -> bool:
                if process.poll() is not None:
                    raise RuntimeError(f"worker {node} exited with {process.returncode}")
                members = client.zrange(Keys().workers, 0, -1)
                return any(str(m).startswith(f"{node}@") for m in members)

            wait_until(beating, timeout=START_TIMEOUT_S, interval=0.05, message=f"{node} ready")
        finally:
            client.close()

    def redis_client(self) -> redis.Redis:
        return redis.Redis.from_url(self.redis.url, decode_responses=True, socket_timeout=5)

    def completed(self) -> int:
        client = self.redis_client()
        try:
            raw = client.hget(Keys().stats, f"completed:{TOOL}")
        finally:
            client.close()
        return int(raw or 0)

    def close(self) -> None:
        stop_groups(self.children, timeout=10.0)
        for log in self._logs:
            log.close()
        self.redis.close()


def _answers(process: subprocess.Popen[bytes], port: int) -> bool:
    if process.poll() is not None:
        raise RuntimeError(f"mcpq web exited with {process.returncode}")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            pass
    except OSError:
        return False
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2.0)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def throughput(bench: Bench, caller: McpCaller, tasks: int, seconds: float) -> float:
    """Tasks completed per second: N creates, then wait for N more completions."""
    before = bench.completed()
    started = time.monotonic()
    for _ in range(tasks):
        caller.create_task(TOOL, {"seconds": seconds})
    wait_until(
        lambda: bench.completed() >= before + tasks,
        timeout=tasks * seconds * 3 + 60,
        interval=0.01,
        message=f"{tasks} completions",
    )
    return tasks / (time.monotonic() - started)


def run(tasks: int, seconds: float, workdir: Path) -> Result:
    bench = Bench(workdir)
    try:
        bench.redis.start()
        caller = bench.start_web()
        bench.start_worker("bench-1")
        throughput(bench, caller, 2, seconds)  # warm-up: connections, imports
        one = throughput(bench, caller, tasks, seconds)
        bench.start_worker("bench-2")
        throughput(bench, caller, 4, seconds)
        two = throughput(bench, caller, tasks, seconds)
    finally:
        bench.close()
    return Result(tasks, seconds, round(one, 3), round(two, 3))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ops.bench.pools",
        description="Bulk-pool throughput with one worker process vs two (concurrency 1 each).",
    )
    parser.add_argument("--tasks", type=int, default=40, help="tasks per measurement (default 40)")
    parser.add_argument(
        "--seconds", type=float, default=0.2, help="each task's sleep (default 0.2)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--keep", action="store_true", help="keep the logs directory")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.tasks < 1 or args.seconds <= 0:
        build_parser().error("--tasks must be >= 1 and --seconds > 0")
    workdir = Path(tempfile.mkdtemp(prefix="mcpq-bench-pools-"))
    try:
        result = run(args.tasks, args.seconds, workdir)
    except BaseException:
        print(f"benchmark failed; logs in {workdir}", file=sys.stderr)
        raise
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    print(result.as_json() if args.json else result.render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
