"""Throughput and latency of one deployment, measured with our own load generator:
``python -m ops.bench.throughput``.

Starts a private stack as the Procfile runs it (``ops.stack.Stack``: redis-server on a free
loopback port, ``mcpq web`` with its default workers, ``mcpq worker`` with its default io pool)
and drives a no-op tool (``slow_compute seconds=0``) over ``POST /mcp`` with asyncio HTTP
clients (keep-alive connections, one per simulated client), spread over ``--procs`` processes
so that the generator is not what limits the rates. Measures, in one run:

- **created/s**, 20 clients creating tasks back to back for ``--seconds``;
- **drained/s**: those tasks completed per second, from the first create to the last completion;
- **completed/s**, 20 clients each creating a task and polling it (every 10 ms) to completion,
  again and again;
- **end to end**, 1 client: ``tools/call`` sent → ``completed`` seen, polling every 2 ms
  (p50/p99 of ``--tasks`` tasks);
- **tasks/get** p50/p99, 20 clients polling existing tasks;
- **PSS** (not RSS: forked children share pages) of every web and worker process after the run;
- **Redis commands per task** (counted with ``MONITOR``: every command, those inside scripts
  included, and those clients sent) for ``--tasks`` tasks created, run and polled to the end,
  one at a time.

``--peer`` measures fastmcp-tasks 4.1.4 in the same run (FastMCP on Docket/Redis, the best
operational peer; installed into a cached venv, ``.cache/peer-venv``): the same no-op tool, its
server (with its embedded worker, concurrency 10) plus one dedicated worker, on a private Redis,
driven by the same load generator (it speaks the same 2026-07-28 tasks wire); then prints
mcpq/peer ratios.

Prints a table; ``--json`` prints one JSON object. A smoke test runs it tiny in CI (correctness
only: every phase completes, nothing fails).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import redis

from ops.children import REPO, Child
from ops.processes import free_port, wait_until
from ops.stack import Stack
from shared.logs import task_hash
from shared.protocol import PROTOCOL_VERSION, TASKS_EXTENSION
from shared.settings import DEFAULT_TOOLS
from shared.store import Keys, task_ref

TOOL, ARGS = "slow_compute", {"seconds": 0}


@dataclass
class Result:
    clients: int
    created_per_s: float
    drained_per_s: float
    completed_per_s: float
    e2e_p50_ms: float
    e2e_p99_ms: float
    get_p50_ms: float
    get_p99_ms: float
    pss_mib: float
    redis_commands_per_task: float
    client_commands_per_task: float
    failures: int

    def render(self, title: str = "mcpq") -> str:
        return "\n".join(
            [
                f"{title}, no-op tool, {self.clients} clients unless noted",
                f"  created/s                 {self.created_per_s:9.1f}",
                f"  drained/s (that backlog)  {self.drained_per_s:9.1f}",
                f"  completed/s (create+poll) {self.completed_per_s:9.1f}",
                f"  end to end, 1 client      p50 {self.e2e_p50_ms:6.2f} ms   "
                f"p99 {self.e2e_p99_ms:6.2f} ms",
                f"  tasks/get                 p50 {self.get_p50_ms:6.2f} ms   "
                f"p99 {self.get_p99_ms:6.2f} ms",
                f"  PSS of web + worker       {self.pss_mib:9.1f} MiB",
                f"  Redis commands per task   {self.redis_commands_per_task:9.1f}",
                f"  of them sent by clients   {self.client_commands_per_task:9.1f}",
                f"  failed requests           {self.failures:9d}",
            ]
        )


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


class Load:
    """The load generator's MCP calls (2026-07-28 wire, the Tasks extension declared)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.failures = 0
        self._ids = 0

    def _post(
        self, method: str, params: dict[str, Any], name: str
    ) -> tuple[dict[str, Any], dict[str, str]]:
        self._ids += 1
        meta = {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
        }
        body = {"jsonrpc": "2.0", "id": self._ids, "method": method}
        body["params"] = {**params, "_meta": meta}
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL_VERSION,
            "Mcp-Method": method,
            "Mcp-Name": name,
        }
        return body, headers

    async def call(
        self, http: httpx.AsyncClient, method: str, params: dict[str, Any], name: str
    ) -> dict[str, Any] | None:
        body, headers = self._post(method, params, name)
        try:
            reply = await http.post(self.url, json=body, headers=headers)
            result: dict[str, Any] | None = (
                reply.json().get("result") if reply.status_code == 200 else None
            )
        except (httpx.HTTPError, ValueError):
            result = None
        if result is None:
            self.failures += 1
        return result

    async def create(self, http: httpx.AsyncClient) -> str | None:
        result = await self.call(http, "tools/call", {"name": TOOL, "arguments": ARGS}, TOOL)
        return None if result is None else str(result["taskId"])

    async def status(self, http: httpx.AsyncClient, task_id: str) -> str | None:
        result = await self.call(http, "tasks/get", {"taskId": task_id}, task_id)
        return None if result is None else str(result["status"])

    async def until_done(self, http: httpx.AsyncClient, task_id: str, every_s: float) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if await self.status(http, task_id) in {"completed", "failed", "cancelled"}:
                return
            await asyncio.sleep(every_s)
        self.failures += 1


async def _clients(
    url: str, kind: str, clients: int, stop_at: float, targets: list[str]
) -> dict[str, Any]:
    """``clients`` concurrent clients of one load-generator process doing ``kind`` until
    ``stop_at`` (wall clock): ``create`` back to back, ``cycle`` (create, then poll every
    10 ms to the end) or ``get`` (poll ``targets``)."""
    load = Load(url)
    created: list[str] = []
    gets: list[float] = []
    done = 0
    limits = httpx.Limits(max_connections=clients + 5, max_keepalive_connections=clients + 5)
    async with httpx.AsyncClient(timeout=30, limits=limits) as http:

        async def one(i: int) -> None:
            nonlocal done
            while time.time() < stop_at:
                if kind == "create":
                    if (task_id := await load.create(http)) is not None:
                        created.append(task_id)
                elif kind == "cycle":
                    if (task_id := await load.create(http)) is not None:
                        await load.until_done(http, task_id, 0.01)
                        done += 1
                else:
                    sent = time.perf_counter()
                    await load.status(http, targets[i % len(targets)])
                    gets.append((time.perf_counter() - sent) * 1000)

        await asyncio.gather(*(one(i) for i in range(clients)))
    return {"created": created, "done": done, "gets": gets, "failures": load.failures}


def _generator_process(
    url: str, kind: str, clients: int, stop_at: float, targets: list[str]
) -> dict[str, Any]:
    return asyncio.run(_clients(url, kind, clients, stop_at, targets))


def _spread(
    pool: ProcessPoolExecutor,
    procs: int,
    url: str,
    kind: str,
    clients: int,
    seconds: float,
    targets: list[str] = [],  # noqa: B006 (never mutated)
) -> dict[str, Any]:
    """``clients`` spread over the generator's processes (one Python process alone, sharing the
    machine with the servers, would be what limits the rates)."""
    shares = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    stop_at = time.time() + seconds + 1.0  # every process starts before the clock runs
    futures = [pool.submit(_generator_process, url, kind, n, stop_at, targets) for n in shares if n]
    parts = [f.result() for f in futures]
    return {
        "created": [t for p in parts for t in p["created"]],
        "done": sum(p["done"] for p in parts),
        "gets": [ms for p in parts for ms in p["gets"]],
        "failures": sum(p["failures"] for p in parts),
    }


def _phases(load: Load, clients: int, seconds: float, tasks: int, procs: int) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(procs, mp_context=context) as pool:
        # Warm-up: the generator processes start, the server's connections and caches fill.
        _spread(pool, procs, load.url, "create", procs, 0.0)
        started = time.time()
        created = _spread(pool, procs, load.url, "create", clients, seconds)
        ids = created["created"]
        created_per_s = len(ids) / (time.time() - started)
        drained_per_s = asyncio.run(_drain(load, ids[-clients:], len(ids), started))
        started = time.time()
        cycled = _spread(pool, procs, load.url, "cycle", clients, seconds)
        completed_per_s = cycled["done"] / (time.time() - started)
        e2e = asyncio.run(_end_to_end(load, tasks))
        polled = _spread(
            pool, procs, load.url, "get", clients, seconds, ids[: clients * 4] or ["none"]
        )
    load.failures += created["failures"] + cycled["failures"] + polled["failures"]
    return {
        "created_per_s": created_per_s,
        "drained_per_s": drained_per_s,
        "completed_per_s": completed_per_s,
        "e2e": e2e,
        "gets": polled["gets"],
    }


async def _drain(load: Load, last: list[str], total: int, started: float) -> float:
    """Tasks completed per second, from the first create to the last completion."""
    async with httpx.AsyncClient(timeout=30) as http:
        for task_id in last:  # the last ones end last (first in, first out)
            await load.until_done(http, task_id, 0.01)
    return total / (time.time() - started)


async def _end_to_end(load: Load, tasks: int) -> list[float]:
    """One client: ``tools/call`` sent → ``completed`` seen, polling every 2 ms."""
    e2e: list[float] = []
    async with httpx.AsyncClient(timeout=30) as http:
        await load.create(http)
        for _ in range(tasks):
            sent = time.perf_counter()
            one = await load.create(http)
            if one is not None:
                await load.until_done(http, one, 0.002)
                e2e.append((time.perf_counter() - sent) * 1000)
    return e2e


async def _per_task_costs(load: Load, tasks: int, admin: redis.Redis) -> tuple[float, float]:
    """Redis commands per task (create, run, one ``tasks/get``), counted with ``MONITOR``:
    every command, those run inside scripts included; and those clients sent themselves."""
    counts = {"all": 0, "clients": 0}
    stop = threading.Event()
    ready = threading.Event()

    def monitor() -> None:
        with admin.monitor() as listening:  # type: ignore[no-untyped-call]
            ready.set()
            for command in listening.listen():
                if stop.is_set():
                    return
                counts["all"] += 1
                if command.get("client_type") != "lua":
                    counts["clients"] += 1

    async with httpx.AsyncClient(timeout=30) as http:
        await load.create(http)
        await asyncio.sleep(0.5)
        watcher = threading.Thread(target=monitor, daemon=True)
        watcher.start()
        ready.wait(5)
        await asyncio.sleep(0.2)
        counts.update(all=0, clients=0)
        for _ in range(tasks):
            task_id = await load.create(http)
            if task_id is not None:
                # A no-op run ends well within this: then one tasks/get reads it completed
                # (polled again only if it has not, which costs what it costs).
                await asyncio.sleep(0.3)
                await load.until_done(http, task_id, 0.05)
        await asyncio.sleep(0.2)
        seen = dict(counts)
        stop.set()
        admin.ping()  # one more line, so the monitor sees `stop`
    # NOTE: background work (worker heartbeats, the sweeper, lease renewals) is counted too;
    # runs end within milliseconds here, so renewals barely appear.
    return seen["all"] / tasks, seen["clients"] / tasks


def pss_mib(pids: list[int]) -> float:
    total_kib = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as rollup:
                for line in rollup:
                    if line.startswith("Pss:"):
                        total_kib += int(line.split()[1])
        except OSError:
            continue
    return total_kib / 1024


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                children = (task / "children").read_text().split()
                todo.extend(int(child) for child in children)
        except OSError:
            continue
    return found


def run(clients: int, seconds: float, tasks: int, procs: int, workdir: Path) -> Result:
    """mcpq as the Procfile runs it: ``mcpq web`` (2 gunicorn workers) + ``mcpq worker``."""
    stack = Stack("throughput", workdir, tools=DEFAULT_TOOLS)
    stack.knobs.update(MCPQ_LOG_LEVEL="WARNING", WEB_CONCURRENCY="2")
    try:
        stack.start_redis()
        stack.start_web()
        worker = stack.spawn_pool("mcpq", "throughput", concurrency=None)
        wait_until(lambda: stack.stats().workers, timeout=60, interval=0.2, message="a worker")
        return _measure(stack, stack.url(), [*stack.webs, worker], clients, seconds, tasks, procs)
    finally:
        stack.close()


def _measure(
    stack: Stack,
    url: str,
    servers: list[Child],
    clients: int,
    seconds: float,
    tasks: int,
    procs: int,
) -> Result:
    """Every phase against the server at ``url``; PSS of the ``servers`` process trees."""
    admin = redis.Redis.from_url(stack.redis_url, decode_responses=True)
    load = Load(url)
    measured = _phases(load, clients, seconds, tasks, procs)
    commands, sent = asyncio.run(_per_task_costs(load, tasks, admin))
    pss = pss_mib([p for child in servers for p in process_tree(child.popen.pid)])
    e2e, gets = measured["e2e"] or [0.0], measured["gets"] or [0.0]
    return Result(
        clients,
        measured["created_per_s"],
        measured["drained_per_s"],
        measured["completed_per_s"],
        statistics.median(e2e),
        percentile(e2e, 0.99),
        statistics.median(gets),
        percentile(gets, 0.99),
        pss,
        commands,
        sent,
        load.failures,
    )


# -- the peer: fastmcp-tasks (FastMCP on Docket/Redis), the best operational peer ------------------
PEER_VERSION = "4.1.4"
PEER_VENV = REPO / ".cache" / "peer-venv"
#: The same no-op tool on the peer, served the way its README deploys it: the server (whose
#: tasks extension runs an embedded worker of concurrency 10) plus one dedicated worker.
#: Written into the run's folder: it imports fastmcp, which mcpq does not depend on.
PEER_SERVER = """\
import asyncio
import os

from fastmcp import FastMCP
from fastmcp_tasks import TasksExtension

mcp = FastMCP("peer")
mcp.add_extension(TasksExtension(url=os.environ["FASTMCP_DOCKET_URL"]))


@mcp.tool(task=True)
async def slow_compute(seconds: float, label: str = "result") -> str:
    await asyncio.sleep(seconds)
    return f"{label}: computed in {seconds:g}s"


if __name__ == "__main__":
    mcp.run(transport="http", host="127.0.0.1", port=int(os.environ["PORT"]), show_banner=False)
"""


def peer_python() -> Path:
    """The Python of a cached venv with fastmcp-tasks installed (made on first use)."""
    python = PEER_VENV / "bin" / "python"
    probe = "import importlib.metadata as m; print(m.version('fastmcp-tasks'))"
    if python.exists():
        found = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
        if found.stdout.strip() == PEER_VERSION:
            return python
    print(f"installing fastmcp-tasks {PEER_VERSION} into {PEER_VENV}", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"fastmcp-tasks=={PEER_VERSION}"], check=True
    )
    return python


def run_peer(clients: int, seconds: float, tasks: int, procs: int, workdir: Path) -> Result:
    python = peer_python()
    stack = Stack("peer", workdir, tools=DEFAULT_TOOLS)
    try:
        stack.start_redis()
        server_py = workdir / "peer_server.py"
        server_py.write_text(PEER_SERVER)
        port = free_port()
        env = stack.child_env(FASTMCP_DOCKET_URL=stack.redis_url, PORT=str(port))
        server = stack.spawn("peer-server", [str(python), str(server_py)], env)
        worker_argv = [str(python), "-m", "fastmcp_tasks.worker_cli", "worker", str(server_py)]
        worker = stack.spawn("peer-worker", worker_argv, env)
        url = f"http://127.0.0.1:{port}/mcp"
        wait_until(lambda: _listening(port), timeout=60, interval=0.2, message="the peer")
        return _measure(stack, url, [server, worker], clients, seconds, tasks, procs)
    finally:
        stack.close()


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
        return True
    return False


@dataclass
class Waiting:
    runs: int
    running_after_s: float
    short_tool_s: float
    cancel_max_s: float
    worker_pss_mib: float
    redis_clients: int

    def render(self) -> str:
        return "\n".join(
            [
                f"{self.runs} waiting runs (ctx.sleep) on one io worker process",
                f"  all running after         {self.running_after_s:9.2f} s",
                f"  a 0.3 s tool alongside    {self.short_tool_s:9.2f} s",
                f"  cancel -> run ended, max  {self.cancel_max_s:9.2f} s (of 20)",
                f"  worker PSS                {self.worker_pss_mib:9.1f} MiB",
                f"  Redis clients             {self.redis_clients:9d}",
            ]
        )


def waiting(runs: int, workdir: Path) -> Waiting:
    """``runs`` tools waiting at once in one io worker process (threads), a short tool beside
    them, and cancels of some of them."""
    stack = Stack("waiting", workdir, tools=DEFAULT_TOOLS)
    try:
        stack.start_redis()
        stack.start_web()
        worker = stack.spawn_pool("mcpq", "waiting", concurrency=runs + 100)
        wait_until(lambda: stack.stats().workers, timeout=60, interval=0.2, message="a worker")
        admin = redis.Redis.from_url(stack.redis_url, decode_responses=True)
        load = Load(stack.url())
        leases = Keys().leases  # the stack runs with the default key prefix
        ids, started_s, short_s = asyncio.run(_wait_many(load, runs, admin, leases))
        cancels = asyncio.run(_cancel_some(load, ids[:20], worker))
        pss = pss_mib(process_tree(worker.popen.pid))
        clients = int(admin.info("clients")["connected_clients"])
    finally:
        stack.close()
    return Waiting(runs, started_s, short_s, max(cancels), pss, clients)


async def _wait_many(
    load: Load, runs: int, admin: redis.Redis, leases: str
) -> tuple[list[str], float, float]:
    limits = httpx.Limits(max_connections=50)
    async with httpx.AsyncClient(timeout=30, limits=limits) as http:
        gate = asyncio.Semaphore(50)

        async def one() -> str | None:
            async with gate:
                params = {"name": TOOL, "arguments": {"seconds": 120}}
                result = await load.call(http, "tools/call", params, TOOL)
                return None if result is None else str(result["taskId"])

        started = time.monotonic()
        ids = [i for i in await asyncio.gather(*(one() for _ in range(runs))) if i]
        while int(admin.zcard(leases)) < runs and time.monotonic() - started < 120:
            await asyncio.sleep(0.1)
        running_after = time.monotonic() - started
        sent = time.monotonic()
        params = {"name": TOOL, "arguments": {"seconds": 0.3}}
        short = await load.call(http, "tools/call", params, TOOL)
        if short is not None:
            await load.until_done(http, str(short["taskId"]), 0.01)
        return ids, running_after, time.monotonic() - sent


async def _cancel_some(load: Load, ids: list[str], worker: Any) -> list[float]:
    """Cancel each; how long until the worker logged the end of its run."""
    took = []
    async with httpx.AsyncClient(timeout=30) as http:
        for task_id in ids:
            needle = f'"task":"{task_hash(task_ref(task_id))}"'
            sent = time.monotonic()
            await load.call(http, "tasks/cancel", {"taskId": task_id}, task_id)
            while time.monotonic() - sent < 10:
                if any(
                    needle in line and '"cancelled"' in line for line in worker.log().splitlines()
                ):
                    break
                await asyncio.sleep(0.01)
            took.append(time.monotonic() - sent)
    return took


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.bench.throughput", description=__doc__)
    parser.add_argument("--clients", type=int, default=20, help="concurrent clients (20)")
    parser.add_argument("--seconds", type=float, default=5.0, help="per phase (5)")
    parser.add_argument("--tasks", type=int, default=200, help="for latency and costs (200)")
    parser.add_argument("--procs", type=int, default=2, help="load-generator processes (2)")
    parser.add_argument(
        "--waiting", type=int, default=1000, help="waiting runs on one worker (1000; 0: skip)"
    )
    parser.add_argument(
        "--peer",
        action="store_true",
        help=f"also measure fastmcp-tasks {PEER_VERSION} (installed into {PEER_VENV} on first use)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="mcpq-bench-throughput-"))
    try:
        result = run(args.clients, args.seconds, args.tasks, args.procs, workdir)
        peer = (
            run_peer(args.clients, args.seconds, args.tasks, args.procs, workdir / "peer")
            if args.peer
            else None
        )
        waited = waiting(args.waiting, workdir / "waiting") if args.waiting else None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        print(
            json.dumps(
                {
                    **asdict(result),
                    "peer": asdict(peer) if peer else None,
                    "ratios": ratios(result, peer) if peer else None,
                    "waiting": asdict(waited) if waited else None,
                }
            )
        )
    else:
        print(result.render())
        if peer is not None:
            print(peer.render(f"fastmcp-tasks {PEER_VERSION}"))
            print("mcpq / peer, same run (rates: higher is better; the rest: lower is better)")
            for name, ratio in ratios(result, peer).items():
                print(f"  {name:<26}{ratio:9.2f}x")
        if waited is not None:
            print(waited.render())
    failures = result.failures + (peer.failures if peer else 0)
    return 0 if failures == 0 else 1


RATIOS = (
    "created_per_s",
    "drained_per_s",
    "completed_per_s",
    "e2e_p50_ms",
    "e2e_p99_ms",
    "get_p50_ms",
    "get_p99_ms",
    "pss_mib",
    "redis_commands_per_task",
)


def ratios(mine: Result, peer: Result) -> dict[str, float]:
    ours, theirs = asdict(mine), asdict(peer)
    return {key: round(ours[key] / theirs[key], 3) for key in RATIOS if theirs[key]}


if __name__ == "__main__":
    sys.exit(main())
