"""The task store on a Redis Cluster (``MCPQ_REDIS_CLUSTER``, ``MCPQ_STORE_SHARDS``): three
primaries with a replica each, a plain redis-server as Celery's broker, a real web process and
a real worker. A few hundred tasks (plain, with input, cancelled, synchronous calls) spread over
the primaries; then a primary is killed mid-run, its replica takes over, and every task still
ends. The numbers are printed (``-s`` shows them).

Redis replicates asynchronously, and these tasks run without ``MCPQ_REDIS_MIN_REPLICAS``: what
the killed primary acknowledged and had not yet sent its replica is gone (docs/deploy.md, "What
a failover can lose"). The test makes that certain: the replica stops taking the primary's
writes a moment before the kill. The driver acts as a client would on what it finds: a task
that reads as unknown is created again, an answer asked for again is answered again, a
synchronous call answered that the store lost its task is made again, and a cancel that never
happened lets its run go on to its end. Each loss is counted, and each loss of a write the
client saw acknowledged must be of one acknowledged in that last moment."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from mcpq.ops.harness.mcp_client import McpClient, Reply, text_of
from mcpq.ops.runtime.redis_binary import RedisProcess
from mcpq.shared.errors import StoreUnavailable, TaskLost
from mcpq.shared.settings import DEFAULT_TOOLS
from mcpq.shared.store.keyspace import Keys, slot
from tests.support.redis_cluster import LocalCluster, cluster_binaries
from tests.support.stacks import FAST_KNOBS, LiveStack

pytestmark = pytest.mark.skipif(cluster_binaries() is None, reason="needs Redis 7 and redis-cli")

SHARDS = 6
KEYS = Keys(shards=SHARDS)
KNOBS = {
    **FAST_KNOBS,
    "MCPQ_REDIS_CLUSTER": "true",
    "MCPQ_STORE_SHARDS": str(SHARDS),
    "MCPQ_UNCLAIMED_AFTER_S": "2",
    # A run whose claim met the failover ended without running; its task is sent again once
    # this passes (production: 300 s).
    "MCPQ_REQUEUE_UNSTARTED_S": "3",
}
KINDS = ("plain", "input", "cancel", "sync")
RETRY_FOR_S = 60.0
CANCELLED_TOOL_S = 15  # how long a cancelled job's tool would run: a lost cancel's run ends
#: How long before the kill the killed primary's replica stops taking its writes.
LAG_S = 0.8
#: A write acknowledged this long before the kill, or after it (a reply in flight), may be lost
#: with the primary (LAG_S, and a margin for a busy machine).
LOSS_WINDOW_S = (LAG_S + 0.4, 0.5)
#: How long a task whose cancel was lost may take to end: its tool runs on (and a lost run is
#: sent again after MCPQ_REQUEUE_UNSTARTED_S).
RUN_OUT_S = CANCELLED_TOOL_S + 30


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    made = LocalCluster(tmp_path / "cluster").start()
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def stack(tmp_path: Path, cluster: LocalCluster) -> Iterator[LiveStack]:
    broker = RedisProcess().start()
    made = LiveStack(
        "cluster", tmp_path / "stack", tools=DEFAULT_TOOLS, env=KNOBS, store_url=cluster.url
    )
    made.broker_url = broker.url  # a plain redis-server: Celery's broker cannot be the cluster
    try:
        made.start(webs=1, workers=1, pool="io")
        yield made
    finally:
        made.close()
        broker.close()


class CreateLost(Exception):
    def __init__(self, task_id: str) -> None:
        super().__init__(task_id)
        self.task_id = task_id


def _unavailable(reply: Reply) -> bool:
    """The store was away: answered 503, or (a stream that had begun) its last message says so."""
    if reply.status == 503:
        return True
    error = reply.body.get("error")
    return isinstance(error, dict) and error.get("message") == StoreUnavailable().message


class CallLost(Exception):
    """A synchronous call whose task the store lost while it ran (``shared.errors.TaskLost``)."""


class Driver:
    """Runs jobs against the web tier, retrying what a failover answers with 503 (or, on a
    stream that had begun, ends with the same error)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.retries: Counter[str] = Counter()
        self._local = threading.local()
        self._clients: list[McpClient] = []
        #: Per cancel job (by number): its task and when its cancel was acknowledged.
        self.cancels: dict[int, tuple[str, float]] = {}
        #: Answers given again because the task asked again (a lost answer).
        self.answered_again = 0
        #: When each task's create was acknowledged; those of tasks found unknown afterwards.
        self.created: dict[str, float] = {}
        self.lost_creates: dict[str, float] = {}
        #: Synchronous calls answered "lost" (their hidden task went with the primary), made again.
        self.lost_calls = 0
        #: Per task: the status its job saw last, and when.
        self.seen_last: dict[str, tuple[str, float]] = {}

    def client(self) -> McpClient:
        if not hasattr(self._local, "client"):
            self._local.client = McpClient(self.url, timeout_s=30)
            self._clients.append(self._local.client)
        return self._local.client  # type: ignore[no-any-return]

    def close(self) -> None:
        for client in self._clients:
            client.close()

    def call(self, what: str, send: Callable[[McpClient], Reply]) -> Reply:
        deadline = time.monotonic() + RETRY_FOR_S
        while True:
            try:
                reply = send(self.client())
            except Exception:  # a connection cut by the web process's own retries
                reply = None
            if reply is not None and not _unavailable(reply):
                return reply
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: still unavailable after {RETRY_FOR_S:g}s")
            self.retries[what] += 1
            time.sleep(0.2)

    def wait(self, task_id: str, *statuses: str, timeout: float = 90) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            task = self.read(task_id)
            if task is None:
                raise CreateLost(task_id)
            if task["status"] in statuses:
                return task
            assert time.monotonic() < deadline, f"task stuck in {task['status']}"
            time.sleep(0.1)

    def read(self, task_id: str) -> dict[str, Any] | None:
        """The task as ``tasks/get`` shows it; ``None`` if it is not found."""
        reply = self.call("get", lambda c: c.get(task_id))
        if "error" in reply.body and "not found" in reply.error["message"]:
            return None
        return reply.result

    def create(self, tool: str, arguments: dict[str, Any]) -> str:
        reply = self.call("create", lambda c: c.call_tool(tool, arguments, tasks=True))
        task_id = str(reply.result["taskId"])
        self.created[task_id] = time.monotonic()
        return task_id

    def job(self, kind: str, i: int) -> str:
        """One job to its end; returns how it ended. A task whose create was lost with the
        primary (it reads as unknown) is created again, as its client would."""
        for _ in range(3):
            try:
                task_id, status, ended = self._job(kind, i)
            except CreateLost as lost:
                self.lost_creates[lost.task_id] = self.created[lost.task_id]
                continue
            except CallLost:
                self.lost_calls += 1
                continue
            if task_id is not None:
                self.seen_last[task_id] = (status, time.monotonic())
            return ended
        raise AssertionError(f"job {i}: created three times, lost three times")

    def confirm(self, task_id: str, key: str) -> None:
        answer = {key: {"action": "accept", "content": {"confirm": True}}}
        self.call("update", lambda c: c.update(task_id, answer))

    def carry_on(self, task_ids: list[str]) -> dict[str, tuple[str, str, float]]:
        """The tasks that read now in another state than their job saw last (the status seen,
        the status now or ``unknown``, when it was seen), each carried on to its end as its
        client would: answered again if it asks again, else waited for."""
        reverted = {}
        for task_id in task_ids:
            seen, seen_at = self.seen_last[task_id]
            task = self.read(task_id)
            now = "unknown" if task is None else str(task["status"])
            if now == seen:
                continue
            reverted[task_id] = (seen, now, seen_at)
            if now != "unknown":
                waiting = (*TERMINAL, "input_required")
                self.see_through(task_id, self.wait(task_id, *waiting, timeout=RUN_OUT_S))
        return reverted

    def _job(self, kind: str, i: int) -> tuple[str | None, str, str]:
        """The job's task (``None`` for a synchronous call), the status it saw last, and how it
        ended as :func:`expected` spells it."""
        if kind == "plain":
            task_id = self.create("slow_compute", {"seconds": 0.2, "label": f"p{i}"})
            done = self.wait(task_id, *TERMINAL)
            return task_id, done["status"], ended_as(done)
        if kind == "input":
            task_id = self.create("confirm_delete", {"filename": f"f{i}.txt"})
            done = self.see_through(task_id, self.wait(task_id, "input_required"))
            return task_id, done["status"], ended_as(done)
        if kind == "cancel":
            task_id = self.create("slow_compute", {"seconds": CANCELLED_TOOL_S, "label": f"c{i}"})
            self.call("cancel", lambda c: c.cancel(task_id))
            self.cancels[i] = (task_id, time.monotonic())
            status = str(self.wait(task_id, *TERMINAL)["status"])
            return task_id, status, status
        sync = self.call(
            "sync",
            lambda c: c.call_tool("slow_compute", {"seconds": 0.1, "label": f"s{i}"}, tasks=False),
        )
        if "error" in sync.body and sync.error["message"] == TaskLost().message:
            raise CallLost()
        return None, "", f"sync:{text_of(sync.result)}"

    def see_through(self, task_id: str, task: dict[str, Any]) -> dict[str, Any]:
        """Answer what ``task`` asks until it ends: again if it asks again (an answer lost with
        the primary, or the first still being taken: a key answered twice is ignored)."""
        for _ in range(5):
            if task["status"] != "input_required":
                return task
            (key,) = task["inputRequests"]
            self.confirm(task_id, key)
            task = self.wait(task_id, *TERMINAL, "input_required")
            if task["status"] == "input_required":
                self.answered_again += 1
        raise AssertionError(f"asked five times: {task}")


TERMINAL = ("completed", "failed", "cancelled")


def ended_as(task: dict[str, Any]) -> str:
    return f"{task['status']}:{text_of(task['result']) if 'result' in task else ''}"


def expected(kind: str, i: int) -> str:
    return {
        "plain": f"completed:p{i}: computed in 0.2s",
        "input": f"completed:Deleted f{i}.txt",
        "cancel": "cancelled",
        "sync": f"sync:s{i}: computed in 0.1s",
    }[kind]


def run_jobs(
    driver: Driver, jobs: list[tuple[str, int]], during: Callable[[], None] | None = None
) -> list[str]:
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(driver.job, kind, i) for kind, i in jobs]
        if during is not None:
            during()
        return [future.result() for future in futures]


def task_keys_by_primary(cluster: LocalCluster) -> dict[int, int]:
    """Per primary (by port): how many task hashes (``<tag>:t:<ref>``) it holds."""
    counts = {}
    for node in cluster.primary_nodes():
        with cluster.client(node) as c:
            found = [k for k in c.scan_iter(match="*:t:*", count=1000) if k.count(":t:") == 1]
            counts[node.port] = sum(1 for k in found if ":" not in k.rpartition(":t:")[2])
    return counts


def test_tasks_spread_over_the_primaries_and_survive_a_failover(
    cluster: LocalCluster, stack: LiveStack
) -> None:
    # The shard tags sit evenly over the slots (Redis agrees with our CRC16): two per primary
    primaries = cluster.primary_nodes()
    with cluster.client(primaries[0]) as c:
        for shard in KEYS.all_shards:
            tag = shard.root[1:-1]
            assert int(c.cluster("keyslot", f"{shard.root}:x")) == slot(tag)
    owners = Counter(
        next(p.port for p in primaries if slot(s.root[1:-1]) in cluster.slots_of(p))
        for s in KEYS.all_shards
    )
    assert sorted(owners.values()) == [SHARDS // 3] * 3, owners

    driver = Driver(stack.web_urls[0] + "/mcp")
    try:
        check_spread_and_failover(cluster, stack, driver, primaries)
    finally:
        driver.close()


def check_spread_and_failover(
    cluster: LocalCluster, stack: LiveStack, driver: Driver, primaries: list[RedisProcess]
) -> None:
    # Phase 1: a few hundred jobs of every kind
    # (600 tasks: a primary's share is then within 20 % of a third at 3.5 standard deviations)
    jobs = [(KINDS[i % 4], i) for i in range(600)]
    started = time.monotonic()
    ended = run_jobs(driver, jobs)
    phase1_s = time.monotonic() - started
    assert ended == [expected(kind, i) for kind, i in jobs]
    by_primary = task_keys_by_primary(cluster)
    total = sum(by_primary.values())
    shares = {port: round(n / total, 3) for port, n in by_primary.items()}
    print(
        f"\nphase 1: {len(jobs)} jobs in {phase1_s:.1f}s; task hashes per primary {by_primary} "
        f"(shares {shares}, {total} in all)"
    )
    assert total == len(jobs)  # every task's hash (a sync call's too: it lives its TTL)
    for port, n in by_primary.items():
        assert abs(n / total - 1 / 3) <= 0.2 / 3, f"primary {port}: {n} of {total}"

    # Phase 2: more jobs, and the busiest primary killed while they run. The test's own store
    # client learns the cluster now: one made after the kill would start from the URL's node,
    # which may be the dead one (the web and worker learnt the topology when they started).
    stack.stats()
    victim = max(primaries, key=lambda p: by_primary[p.port])
    killed_at: list[float] = []

    def kill_a_primary() -> None:
        # Its replica stops taking its writes first (stopped, its link cut: what it received
        # before, it still reads when it goes on), so that the writes of the primary's last
        # LAG_S are lost with it, as behind a lagging replica (docs/deploy.md).
        replicas = cluster.replicas_of(victim)
        time.sleep(2.0 - LAG_S)
        try:
            for replica in replicas:
                os.kill(replica.pid, signal.SIGSTOP)
            with cluster.client(victim) as c:
                assert c.client_kill_filter(_type="replica") == len(replicas)
            time.sleep(LAG_S)
            killed_at.append(time.monotonic())
            victim.kill()
        finally:
            for replica in replicas:
                os.kill(replica.pid, signal.SIGCONT)

    more = [(KINDS[i % 4], i) for i in range(600, 840)]
    seen_before = set(driver.seen_last)
    started = time.monotonic()
    ended = run_jobs(driver, more, during=kill_a_primary)
    phase2_s = time.monotonic() - started
    promoted = [p.port for p in cluster.primary_nodes()]
    print(
        f"phase 2: {len(more)} jobs in {phase2_s:.1f}s with primary {victim.port} killed "
        f"{killed_at[0] - started:.1f}s in; primaries now {promoted}; "
        f"requests retried after 503 or a cut connection: {dict(driver.retries)}"
    )
    assert victim.port not in promoted and len(promoted) == 3, "its replica took over"
    # What the killed primary had not yet sent its replica is gone (no MCPQ_REDIS_MIN_REPLICAS
    # here): a task may read as in an earlier state than its client saw, a create as unknown, a
    # cancel as never made. Each such write must have been acknowledged in the moments before
    # the kill; the client carries its tasks on, and every task ends.
    reverted = driver.carry_on([t for t in driver.seen_last if t not in seen_before])
    late = [i for (kind, i), value in zip(more, ended, strict=True) if value != expected(kind, i)]
    lost_cancels = {i: driver.cancels[i][1] for i in late if i in driver.cancels}
    print(
        f"lost with the primary: {len(reverted)} tasks' last writes "
        f"({Counter(f'{seen}->{now}' for seen, now, _ in reverted.values())}), "
        f"{len(driver.lost_creates)} creates, {len(lost_cancels)} cancels, "
        f"{driver.lost_calls} synchronous calls' tasks (called again); "
        f"answers given again: {driver.answered_again}"
    )
    acked = [(f"a task seen {seen} (now {now})", at) for seen, now, at in reverted.values()]
    acked += [("a create", at) for at in driver.lost_creates.values()]
    acked += [(f"job {i}'s cancel", at) for i, at in lost_cancels.items()]
    for what, acked_at in acked:
        assert killed_at[0] - LOSS_WINDOW_S[0] <= acked_at <= killed_at[0] + LOSS_WINDOW_S[1], (
            f"{what}: acknowledged {acked_at - killed_at[0]:+.2f}s from the kill, and lost"
        )
    # A job whose cancel was lost ran its tool to its end; every other ended as it should.
    assert ended == [
        "completed" if i in lost_cancels and value == "completed" else expected(kind, i)
        for (kind, i), value in zip(more, ended, strict=True)
    ]
    assert stack.stats().unfinished == 0 or wait_unfinished(stack, 30)


def wait_unfinished(stack: LiveStack, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while stack.stats().unfinished:
        assert time.monotonic() < deadline, "unfinished tasks left"
        time.sleep(0.5)
    return True
