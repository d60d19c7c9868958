"""Helpers of the ops layer: mcpq operated like a Heroku app.

The session stack (``ops_stack``) is a private redis-server, one web process (``mcpq web``), two
worker pools run the way the ``Procfile`` runs them (``mcpq worker --queues mcpq`` and
``mcpq worker --queues bulk``, one Celery node each) and Flower, serving the built-in tools plus
``tests.ops.tools_pools`` (``bulk_job`` on the ``bulk`` queue). Tests that need to break things
(stop Redis, run honcho) build their own stack from :class:`OpsStack`.

Every ``taskId`` any ops test is handed is recorded in :data:`ISSUED` (the log test greps every
log line for them). Every process is stopped by its process group and checked gone.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from ops.processes import free_port, stop_groups, wait_until
from shared.logs import task_hash
from shared.settings import DEFAULT_TOOLS
from tests.e2e.harness import REPO, Child, McpClient, Reply, Stack, StackError, ref_of

OPS_TOOLS = f"{DEFAULT_TOOLS},tests.ops.tools_pools"
MCPQ_NODE = "pool-mcpq"
BULK_NODE = "pool-bulk"
_START_TIMEOUT_S = 45.0
_STOP_TIMEOUT_S = 10.0

ISSUED: set[str] = set()
"""Every taskId handed to an ops-layer client in this session."""


class OpsClient(McpClient):
    """An :class:`McpClient` that remembers every taskId it is handed (see :data:`ISSUED`) and
    counts its requests by (method, HTTP status), as the web tier's metrics label them."""

    def __init__(self, url: str, **kwargs: Any) -> None:
        super().__init__(url, **kwargs)
        self.sent: Counter[tuple[str, str]] = Counter()

    def request(self, method: str, *args: Any, **kwargs: Any) -> Reply:
        reply = super().request(method, *args, **kwargs)
        self.sent[(method, str(reply.status))] += 1
        result = reply.body.get("result")
        if isinstance(result, dict) and isinstance(result.get("taskId"), str):
            ISSUED.add(result["taskId"])
        return reply


def multiproc_dir(pid: int) -> str | None:
    """``PROMETHEUS_MULTIPROC_DIR`` of a running process (``mcpq web|worker`` make one)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for entry in raw.split(b"\0"):
        name, _, value = entry.partition(b"=")
        if name == b"PROMETHEUS_MULTIPROC_DIR":
            return value.decode()
    return None


class Flower:
    """Flower's HTTP API (needs ``FLOWER_UNAUTHENTICATED_API=true`` when auth is off)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.http = httpx.Client(base_url=base, timeout=5.0)

    def close(self) -> None:
        self.http.close()

    def tasks(self, **params: str) -> dict[str, dict[str, Any]]:
        response = self.http.get("/api/tasks", params=params)
        response.raise_for_status()
        listed: dict[str, dict[str, Any]] = response.json()
        return listed

    def task(self, celery_id: str) -> dict[str, Any] | None:
        response = self.http.get(f"/api/task/info/{celery_id}")
        if response.status_code == 404:
            return None
        response.raise_for_status()
        info: dict[str, Any] = response.json()
        return info

    def wait_state(
        self, celery_id: str, *states: str, timeout: float = 15.0, seen: list[str] | None = None
    ) -> dict[str, Any]:
        """Poll the task until its state is one of ``states``; ``seen`` collects the states."""
        trail = [] if seen is None else seen

        def reached() -> dict[str, Any] | None:
            info = self.task(celery_id)
            state = None if info is None else info.get("state")
            if state is not None and (not trail or trail[-1] != state):
                trail.append(state)
            return info if state in states else None

        try:
            return wait_until(reached, timeout=timeout, interval=0.05, message=f"{states}")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; Flower states seen: {trail}") from None


class OpsStack(Stack):
    """A :class:`Stack` that also runs ``mcpq worker`` pools, Flower and other extra children."""

    def __init__(self, name: str, workdir: Path, **kwargs: Any) -> None:
        kwargs.setdefault("tools", OPS_TOOLS)
        super().__init__(name, workdir, **kwargs)
        self.extras: list[Child] = []
        self.flower_url = ""
        self._metric_dirs: set[str] = set()

    def spawn(self, name: str, argv: list[str], env: Mapping[str, str]) -> Child:
        """Start an extra child (own process group, log file in the stack's directory)."""
        index = len(self.extras)
        child = Child(f"{self.name}/{name}", argv, env, self.workdir / f"{name}-{index}.log")
        self.extras.append(child)
        return child

    def spawn_pool(self, queues: str, node: str, *, concurrency: int = 2, **env: str) -> Child:
        """``mcpq worker --queues Q`` (the Procfile's worker command) as node ``node@%h``;
        returns without waiting (see :meth:`wait_ready`)."""
        argv = [
            sys.executable, "-m", "ops.cli", "worker",
            "--queues", queues, "--concurrency", str(concurrency), "--hostname", f"{node}@%h",
        ]  # fmt: skip
        return self.spawn(f"worker-{node}", argv, self.child_env(**env))

    @staticmethod
    def wait_ready(child: Child) -> Child:
        child.wait_for_log(" ready.", timeout=_START_TIMEOUT_S)
        child.remember_descendants()
        return child

    def start_flower(self) -> str:
        """Flower on a free loopback port, API open (auth is off); returns its base URL."""
        for attempt in range(3):
            port = free_port()
            argv = [
                sys.executable, "-m", "celery", "-A", "workers.celery_app", "flower",
                f"--port={port}", "--address=127.0.0.1",
            ]  # fmt: skip
            env = self.child_env(FLOWER_UNAUTHENTICATED_API="true")
            child = self.spawn(f"flower{attempt}", argv, env)
            base = f"http://127.0.0.1:{port}"
            try:
                wait_until(
                    lambda c=child, b=base: _flower_up(c, b),  # type: ignore[misc]
                    timeout=_START_TIMEOUT_S,
                    interval=0.1,
                    message=f"{base}/healthcheck",
                )
            except StackError:  # lost the port race: try another port
                self.stop_extra(child)
                continue
            self.flower_url = base
            return base
        raise StackError("Flower did not start")

    def stop_extra(self, child: Child) -> None:
        """Stop one extra child's process group now (it is still checked at close)."""
        self.remember_metric_dirs()
        child.remember_descendants()
        stop_groups([child.popen], timeout=_STOP_TIMEOUT_S)
        self.extras.remove(child)
        self.stopped.append(child)

    def remember_metric_dirs(self) -> None:
        for child in self.webs + self.workers + self.extras:
            found = multiproc_dir(child.popen.pid)
            if found:
                self._metric_dirs.add(found)

    def close(self, *, check: bool = True) -> None:
        self.remember_metric_dirs()
        for child in self.extras:
            child.remember_descendants()
        stop_groups([c.popen for c in self.extras], timeout=_STOP_TIMEOUT_S)
        self.stopped.extend(self.extras)
        self.extras = []
        try:
            super().close(check=check)
        finally:
            tmp = os.path.realpath(tempfile.gettempdir())
            for path in self._metric_dirs:  # made by `mcpq web|worker`, never removed by them
                real = os.path.realpath(path)
                if real.startswith(tmp + os.sep) and os.path.basename(real).startswith("mcpq-"):
                    shutil.rmtree(real, ignore_errors=True)

    def tails(self, lines: int = 40) -> str:
        parts = [super().tails(lines)]
        for child in self.extras:
            parts.append(f"----- {child.name} ({child.log_path}) -----\n{child.tail(lines)}")
        return "\n".join(parts)

    def all_logs(self) -> dict[str, str]:
        """Every log file of the stack (web, workers, Flower, redis), by file name."""
        return {
            path.name: path.read_text(encoding="utf-8", errors="replace")
            for path in sorted(self.workdir.glob("*.log"))
        }


def wait_flower_sees(client: McpClient, flower: Flower) -> None:
    """Flower only shows what happens after it subscribed to task events: run synchronous
    ``greet`` calls until one shows up in Flower."""

    def seen() -> bool:
        assert client.call_tool("greet", {"name": "flower"}, tasks=False).status == 200
        try:
            return any(t["name"] == "greet" for t in flower.tasks().values())
        except httpx.HTTPError:
            return False

    wait_until(seen, timeout=30, interval=0.5, message="Flower receiving task events")


def worker_lines(stack: OpsStack) -> list[dict[str, Any]]:
    """Every JSON line of every worker log of the stack."""
    lines = []
    for name, text in stack.all_logs().items():
        if name.startswith("worker-"):
            lines += [json.loads(ln) for ln in text.splitlines() if ln.startswith("{")]
    return lines


def run_ended(stack: OpsStack, task_id: str, transition: str) -> dict[str, Any] | None:
    """The worker's ``run ended`` line of this task with this transition, if logged yet."""
    wanted = task_hash(ref_of(task_id))
    return next(
        (
            ln
            for ln in worker_lines(stack)
            if ln.get("msg") == "run ended"
            and ln.get("task") == wanted
            and ln.get("transition") == transition
        ),
        None,
    )


def _flower_up(child: Child, base: str) -> bool:
    if not child.alive:
        raise StackError(f"{child.name} exited ({child.popen.returncode}):\n{child.tail()}")
    try:
        return httpx.get(f"{base}/healthcheck", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


__all__ = [
    "BULK_NODE",
    "ISSUED",
    "MCPQ_NODE",
    "OPS_TOOLS",
    "REPO",
    "Flower",
    "OpsClient",
    "OpsStack",
    "multiproc_dir",
    "run_ended",
    "wait_flower_sees",
    "worker_lines",
]
