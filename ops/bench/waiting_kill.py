"""The ``--kill`` phase of ``mcpq.ops.bench.waiting_runs``: the worker holding every waiting
run is SIGKILLed, another starts, and every task is followed to its end (claimed again by the new
worker, answered if it asks, none lost); and the reads of the worker and the store both phases
use (its threads, the tasks' fields, the runs that hold a lease), and the settings printed with
the result."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import redis

from mcpq.ops.bench.load import Load
from mcpq.ops.bench.memory import process_tree, pss_mib
from mcpq.ops.bench.rawhttp import RawClient
from mcpq.ops.harness.children import Child
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.settings import Settings
from mcpq.shared.store import Keys, task_ref

#: Clients creating (and answering) tasks, each on a keep-alive connection of its own.
CLIENTS = 16
ENDED = frozenset({"completed", "failed", "cancelled"})
_ACCEPT = {"action": "accept", "content": {"ok": True}}


@dataclass
class Handover:
    """``--kill``: the worker's process group SIGKILLed once all ran, and what became of them."""

    #: Processes of the worker's group killed (the Celery main process, any children).
    killed_processes: int
    #: Tasks still open at the kill (the cancelled ones had ended, and any whose wait was over).
    open_at_kill: int
    ended_before_kill: int
    #: Seconds from the kill: the new worker beating, its first claim of a task of the dead one,
    #: every open task claimed again (``None``: not all within the time allowed), all ended.
    worker_up_s: float
    first_claim_s: float | None
    handed_over_s: float | None
    handed_over: int
    ended_s: float | None
    #: Runs of the answer kind answered (tasks/update) after the handover.
    answered: int
    completed: int
    cancelled: int
    failed: int
    #: Tasks that never ended (not completed, cancelled or failed) in the time allowed.
    lost: int
    #: Tasks by their count of runs (``"1"``, ``"2"``...): a run twice is one replayed after the
    #: kill; three is one run again after that.
    runs: dict[str, int]
    #: The new worker's PSS and threads once every open task was claimed again, and the runs
    #: it held then (fewer than ``handed_over`` when some had ended already).
    worker_pss_mib: float
    worker_threads: int
    held_after: int

    @property
    def ran_twice(self) -> int:
        return self.runs.get("2", 0)

    @property
    def ran_more(self) -> int:
        return sum(n for count, n in self.runs.items() if int(count) > 2)

    def render(self) -> str:
        def s(value: float | None) -> str:
            return "     none" if value is None else f"{value:9.2f}"

        return "\n".join(
            [
                "  SIGKILL of the worker's process group, a new worker started at once",
                f"    processes killed          {self.killed_processes:9d}",
                f"    open at the kill          {self.open_at_kill:9d}"
                f" (ended before it: {self.ended_before_kill})",
                f"    new worker beating after  {self.worker_up_s:9.2f} s",
                f"    first claimed again after {s(self.first_claim_s)} s",
                f"    all handed over after     {s(self.handed_over_s)} s"
                f" ({self.handed_over} of {self.open_at_kill})",
                f"    new worker PSS then       {self.worker_pss_mib:9.1f} MiB"
                f" ({self.worker_threads} threads, {self.held_after} runs held)",
                f"    answered after handover   {self.answered:9d}",
                f"    all ended after           {s(self.ended_s)} s",
                f"    completed                 {self.completed:9d}",
                f"    cancelled (before kill)   {self.cancelled:9d}",
                f"    failed                    {self.failed:9d}",
                f"    lost (never ended)        {self.lost:9d}",
                f"    ran twice                 {self.ran_twice:9d}"
                f" (more than twice: {self.ran_more}; once: {self.runs.get('1', 0)})",
            ]
        )


def start_worker(stack: Stack, node: str, pool: Mapping[str, str]) -> Child:
    """``mcpq worker`` (io pool); returns once it beats in Redis."""
    worker = stack.spawn_pool("mcpq", node, concurrency=None, **pool)
    wait_until(
        lambda: any(n.startswith(f"{node}@") for n in stack.stats().workers),
        timeout=60,
        interval=0.1,
        message=f"worker {node}",
    )
    return worker


def thread_count(pids: list[int]) -> int:
    """The threads of processes ``pids``, together."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{pid}/status").read_text()
            total += int(status.split("Threads:")[1].split()[0])
    return total


def task_fields(admin: redis.Redis, ids: Sequence[str], *names: str) -> list[list[str | None]]:
    """Fields ``names`` of each task's hash (one pipeline)."""
    keys = Keys()
    pipe = admin.pipeline(transaction=False)
    for task_id in ids:
        pipe.hmget(keys.task(task_ref(task_id)), list(names))
    return list(pipe.execute())


def running(admin: redis.Redis, ids: Sequence[str]) -> int:
    """How many of the tasks ``ids`` a run holds (a lease set by its claim)."""
    return sum(1 for (lease,) in task_fields(admin, ids, "lease") if lease and int(lease) > 0)


def hand_over(
    stack: Stack,
    worker: Child,
    pool: Mapping[str, str],
    admin: redis.Redis,
    load: Load,
    ids: list[str],
    answer_ids: list[str],
    seconds: float,
) -> Handover:
    """SIGKILL ``worker``'s group, start another worker, and follow every task to its end."""
    before = dict(zip(ids, task_fields(admin, ids, "status", "gen"), strict=True))
    open_ids = [i for i, (status, _) in before.items() if status not in ENDED]
    gen_at_kill = {i: int(before[i][1] or 0) for i in open_ids}
    killed = len(process_tree(worker.popen.pid))
    killed_at = stack.kill_child(worker)
    worker = start_worker(stack, "waiting-2", pool)
    worker_up_s = time.monotonic() - killed_at
    # The sweeper sends 100 runs per sweep (every MCPQ_SWEEP_INTERVAL_S) once their leases
    # lapsed: time enough for that, and some.
    deadline = time.monotonic() + 60 + len(open_ids) / 20
    first_s = handed_s = None
    claimed = 0
    while time.monotonic() < deadline:
        gens = task_fields(admin, open_ids, "gen")
        again = zip(open_ids, gens, strict=True)
        claimed = sum(1 for i, (gen,) in again if int(gen or 0) > gen_at_kill[i])
        if claimed and first_s is None:
            first_s = time.monotonic() - killed_at
        if claimed == len(open_ids):
            handed_s = time.monotonic() - killed_at
            break
        time.sleep(0.25)
    tree = process_tree(worker.popen.pid)
    pss, threads, held = pss_mib(tree), thread_count(tree), running(admin, open_ids)
    still_open = set(open_ids)
    answered = asyncio.run(_answer_all(load, [i for i in answer_ids if i in still_open]))
    ended_s = None
    deadline = time.monotonic() + seconds + 60 + len(open_ids) / 20
    while time.monotonic() < deadline:
        if all(status in ENDED for (status,) in task_fields(admin, ids, "status")):
            ended_s = time.monotonic() - killed_at
            break
        time.sleep(0.5)
    final = task_fields(admin, ids, "status", "runs")
    statuses = Counter(status for status, _ in final)
    runs = Counter(str(int(n or 0)) for _, n in final)
    return Handover(
        killed_processes=killed,
        open_at_kill=len(open_ids),
        ended_before_kill=sum(
            1 for status, _ in before.values() if status in ENDED and status != "cancelled"
        ),
        worker_up_s=worker_up_s,
        first_claim_s=first_s,
        handed_over_s=handed_s,
        handed_over=claimed,
        ended_s=ended_s,
        answered=answered,
        completed=statuses["completed"],
        cancelled=statuses["cancelled"],
        failed=statuses["failed"],
        lost=sum(n for status, n in statuses.items() if status not in ENDED),
        runs=dict(sorted(runs.items(), key=lambda item: int(item[0]))),
        worker_pss_mib=pss,
        worker_threads=threads,
        held_after=held,
    )


async def _answer_all(load: Load, ids: list[str]) -> int:
    """Answer each task's outstanding questions (``tasks/get``, then ``tasks/update``), as a
    client would; a task not yet asking is tried again in a later pass. How many were answered."""
    todo, answered = list(ids), 0
    deadline = time.monotonic() + 60 + len(ids) / 20

    async def client(http: RawClient, retry: list[str]) -> None:
        nonlocal answered
        while todo:
            task_id = todo.pop()
            task = await load.call(http, "tasks/get", {"taskId": task_id}, task_id)
            asked = (task or {}).get("inputRequests") or {}
            if (task or {}).get("status") != "input_required" or not asked:
                retry.append(task_id)
                continue
            responses = {key: _ACCEPT for key in asked}
            params = {"taskId": task_id, "inputResponses": responses}
            if await load.call(http, "tasks/update", params, task_id) is not None:
                answered += 1

    while todo and time.monotonic() < deadline:
        retry: list[str] = []
        async with contextlib.AsyncExitStack() as up:
            https = [await up.enter_async_context(RawClient(load.url)) for _ in range(CLIENTS)]
            await asyncio.gather(*(client(http, retry) for http in https))
        if retry:
            todo.extend(retry)
            await asyncio.sleep(0.5)
    return answered


# -- the settings ------------------------------------------------------------------------------
#: The settings printed with the result (the stack's, else mcpq's defaults).
SHOWN = (
    "MCPQ_ASYNC_RUNS",
    "MCPQ_LEASE_S",
    "MCPQ_SWEEP_INTERVAL_S",
    "MCPQ_INPUT_HOLD_S",
    "MCPQ_MAX_RUNS",
    "MCPQ_CANCEL_GRACE_S",
    "MCPQ_LOOP_STALL_S",
)


def shown_settings(knobs: Mapping[str, str], pool: Mapping[str, str]) -> dict[str, str]:
    defaults = {
        str(f.metadata["env"]): str(f.default)
        for f in dataclasses.fields(Settings)
        if "env" in f.metadata
    }
    shown = {**knobs, **pool}
    names = [*SHOWN, *(k for k in shown if k not in SHOWN and k.startswith("MCPQ_"))]
    if "MCPQ_IO_CONCURRENCY" in pool:
        names.insert(0, "MCPQ_IO_CONCURRENCY")
    return {name: shown.get(name, defaults.get(name, "")) for name in dict.fromkeys(names)}


def renewal_period(stack: Stack) -> float:
    """The lease keeper's renewal period (``LeaseKeeper``): min(max(lease / 3, 0.05), 0.5)."""
    lease_s = float(stack.knobs.get("MCPQ_LEASE_S", Settings.lease_s))
    return min(max(lease_s / 3, 0.05), 0.5)
