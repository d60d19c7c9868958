"""Helpers of the ops layer: mcpq operated like a Heroku app.

The session stack (``ops_stack``, an ``ops.harness.stack.Stack``) is a private redis-server, one web
process (``mcpq web``), two worker pools run the way the ``Procfile`` runs them
(``mcpq worker --queues mcpq`` and ``mcpq worker --queues bulk``, one Celery node each, see
:data:`MCPQ_NODE` and :data:`BULK_NODE`) and Flower, serving the built-in tools plus
``tests.ops.tools_pools`` (``bulk_job`` on the ``bulk`` queue, :data:`OPS_TOOLS`).

Every ``taskId`` any ops test is handed is recorded in :data:`ISSUED` (the log test greps every
log line for them). :class:`Flower` reads Flower's HTTP API.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import httpx

from mcpq.ops.harness.mcp_client import McpClient, Reply
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.logs import task_hash
from mcpq.shared.settings import DEFAULT_TOOLS
from mcpq.shared.store import task_ref

OPS_TOOLS = f"{DEFAULT_TOOLS},tests.ops.tools_pools"
MCPQ_NODE = "pool-mcpq"
BULK_NODE = "pool-bulk"

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


def worker_lines(stack: Stack) -> list[dict[str, Any]]:
    """Every JSON line of every worker log of the stack."""
    lines = []
    for name, text in stack.all_logs().items():
        if name.startswith("worker-"):
            lines += [json.loads(ln) for ln in text.splitlines() if ln.startswith("{")]
    return lines


def run_ended(stack: Stack, task_id: str, transition: str) -> dict[str, Any] | None:
    """The worker's ``run ended`` line of this task with this transition, if logged yet."""
    wanted = task_hash(task_ref(task_id))
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


__all__ = [
    "BULK_NODE",
    "ISSUED",
    "MCPQ_NODE",
    "OPS_TOOLS",
    "Flower",
    "OpsClient",
    "run_ended",
    "wait_flower_sees",
    "worker_lines",
]
