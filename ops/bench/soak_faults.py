"""The soak's deployment and its faults.

`Deployment` is the issue's: Redis with AOF, two web replicas, two io workers on the default
queue and one cpu (prefork) worker on the bulk soak queue, all children of one
`mcpq.ops.harness.stack.Stack`. `Faults` injects one fault every few seconds, each kind in turn
from a shuffled deck (so a short run still sees every kind): SIGKILL of a worker's whole process
group (a replacement started, as a platform restarts a dyno), SIGSTOP of a worker's group for a few
seconds then SIGCONT, SIGKILL of a web replica (restarted; it leaves the replicas once dead and
its successor joins once it answers), and a graceful Redis restart (``stop_redis``: SIGTERM,
which Redis handles as ``SHUTDOWN``, the AOF fsynced; then the same server on the same port and
directory) or, with Redis through Sentinel, a failover (`ops.harness.redis_sentinel`). Every pid
a SIGKILL or SIGSTOP reached is recorded with the time (`Signalled`): the step check allows a
second call of a step only when its first caller was killed after it.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mcpq.ops.bench.bench_tools import SOAK_BULK_QUEUE
from mcpq.ops.harness.children import Child
from mcpq.ops.harness.redis_sentinel import SentinelGroup
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import all_proc_stats, signal_group

WORKER_KILL, WORKER_STOP, WEB_KILL, REDIS_RESTART, FAILOVER = (
    "worker SIGKILL",
    "worker SIGSTOP",
    "web SIGKILL",
    "Redis restart",
    "Sentinel failover",
)
KINDS = (WORKER_KILL, WORKER_STOP, WEB_KILL, REDIS_RESTART)
#: With ``--sentinel``: the Redis fault is a failover.
SENTINEL_KINDS = (WORKER_KILL, WORKER_STOP, WEB_KILL, FAILOVER)
#: ``--only``'s names of the kinds.
BY_NAME = {
    "worker-kill": WORKER_KILL,
    "worker-stop": WORKER_STOP,
    "web-kill": WEB_KILL,
    "redis-restart": REDIS_RESTART,
    "failover": FAILOVER,
}
#: After a fault has been repaired, requests still count as "during a fault" for this long.
AFTERMATH_S = 5.0
IO_CONCURRENCY = 8
CPU_CONCURRENCY = 2


@dataclass
class Signalled:
    """A process a fault signalled: SIGKILL or SIGSTOP, at (wall clock)."""

    pid: int
    how: str
    at: float
    target: str


@dataclass
class Fault:
    kind: str
    target: str
    started: float
    recovered: float | None = None
    pids: list[int] = field(default_factory=list)

    def window(self) -> tuple[float, float]:
        """From the fault until ``AFTERMATH_S`` after its repair (wall clock)."""
        end = self.recovered if self.recovered is not None else time.time()
        return self.started, end + AFTERMATH_S


class Deployment:
    """The stack's workers by pool kind, so that a killed one is replaced by its like."""

    def __init__(
        self,
        stack: Stack,
        replicas_add: Callable[[str], None],
        sentinel: SentinelGroup | None = None,
    ) -> None:
        self.stack = stack
        self.replicas_add = replicas_add
        #: Redis through Sentinel (the stack then starts no redis-server of its own).
        self.sentinel = sentinel
        self.pools: dict[int, str] = {}
        self._nodes = 0

    def start(self, webs: int = 2, io_workers: int = 2, cpu_workers: int = 1) -> None:
        """Redis, the workers (started together, as the Procfile's ``mcpq worker`` commands),
        the web replicas; returns once every one is ready."""
        if self.sentinel is None:
            self.stack.start_redis()
        workers = [self.spawn_worker("io") for _ in range(io_workers)]
        workers += [self.spawn_worker("cpu") for _ in range(cpu_workers)]
        for _ in range(webs):
            self.start_web()
        for child in workers:
            self.stack.wait_ready(child)

    def start_web(self) -> str:
        url = f"{self.stack.start_web()}/mcp"
        self.replicas_add(url)
        return url

    def spawn_worker(self, pool: str) -> Child:
        """``mcpq worker`` of pool kind ``pool`` (io: the default queue; cpu: the soak's bulk
        queue), started; `mcpq.ops.harness.stack.Stack.wait_ready` waits for it."""
        self._nodes += 1
        queues, concurrency = (
            ("mcpq", IO_CONCURRENCY)
            if pool == "io"
            else (
                SOAK_BULK_QUEUE,
                CPU_CONCURRENCY,
            )
        )
        node = f"soak-{pool}{self._nodes}"
        child = self.stack.spawn_pool(queues, node, concurrency=concurrency, pool=pool)
        self.pools[child.pgid] = pool
        return child

    def start_worker(self, pool: str) -> Child:
        return self.stack.wait_ready(self.spawn_worker(pool))


def group_pids(child: Child) -> list[int]:
    """Every live process of the child's group now (a prefork worker's pool children too)."""
    return sorted(s.pid for s in all_proc_stats() if s.pgid == child.pgid and s.state != "Z")


class Faults(threading.Thread):
    """One fault every ``every`` seconds (uniform), until ``stop``; a fault under way is
    always repaired before the thread ends."""

    def __init__(
        self,
        deployment: Deployment,
        replicas_remove: Callable[[str], None],
        stop: threading.Event,
        *,
        every: tuple[float, float] = (4.0, 8.0),
        stopped_s: tuple[float, float] = (3.0, 6.0),
        seed: int = 0,
        only: tuple[str, ...] = (),
    ) -> None:
        super().__init__(name="soak-faults", daemon=True)
        #: The kinds to inject (``--only``); empty: every kind.
        self.only = only
        self.deployment, self.stack = deployment, deployment.stack
        self.replicas_remove = replicas_remove
        self.stop, self.every, self.stopped_s = stop, every, stopped_s
        self.rng = random.Random(seed)
        self.faults: list[Fault] = []
        self.signalled: list[Signalled] = []
        self.errors: list[str] = []
        self._deck: list[str] = []

    def run(self) -> None:
        """The next fault ``every`` seconds after the previous one began (a long one, a worker
        stopped for seconds, does not push the others back)."""
        due = time.monotonic() + self.rng.uniform(*self.every)
        while not self.stop.wait(max(0.0, due - time.monotonic())):
            due += self.rng.uniform(*self.every)
            kind = self._draw()
            try:
                self.inject(kind)
            except Exception as exc:  # reported; the soak goes on
                self.errors.append(f"{kind}: {exc!r}")

    @property
    def kinds(self) -> tuple[str, ...]:
        kinds = KINDS if self.deployment.sentinel is None else SENTINEL_KINDS
        return tuple(k for k in kinds if k in self.only) if self.only else kinds

    def _draw(self) -> str:
        if not self._deck:
            self._deck = list(self.kinds)
            self.rng.shuffle(self._deck)
        return self._deck.pop()

    def inject(self, kind: str) -> None:
        {
            WORKER_KILL: self.kill_worker,
            WORKER_STOP: self.stop_worker,
            WEB_KILL: self.kill_web,
            REDIS_RESTART: self.restart_redis,
            FAILOVER: self.fail_over,
        }[kind]()

    def _fault(self, kind: str, target: str, pids: list[int] = []) -> Fault:  # noqa: B006
        fault = Fault(kind, target, time.time(), pids=list(pids))
        self.faults.append(fault)
        return fault

    def kill_worker(self) -> None:
        victim = self.rng.choice(self.stack.workers)
        pool = self.deployment.pools[victim.pgid]
        pids = group_pids(victim)
        fault = self._fault(WORKER_KILL, f"{victim.name} ({pool})", pids)
        self.stack.kill_group(victim, signal.SIGKILL)
        at = time.time()
        self.signalled += [Signalled(pid, "SIGKILL", at, victim.name) for pid in pids]
        self.stack.reap(victim)
        self.deployment.start_worker(pool)
        fault.recovered = time.time()

    def stop_worker(self) -> None:
        victim = self.rng.choice(self.stack.workers)
        pids = group_pids(victim)
        pool = self.deployment.pools[victim.pgid]
        fault = self._fault(WORKER_STOP, f"{victim.name} ({pool})", pids)
        signal_group(victim.pgid, signal.SIGSTOP)
        at = time.time()
        self.signalled += [Signalled(pid, "SIGSTOP", at, victim.name) for pid in pids]
        try:
            time.sleep(self.rng.uniform(*self.stopped_s))
        finally:
            signal_group(victim.pgid, signal.SIGCONT)
        fault.recovered = time.time()

    def kill_web(self) -> None:
        index = self.rng.randrange(len(self.stack.webs))
        victim, url = self.stack.webs[index], f"{self.stack.web_urls[index]}/mcp"
        fault = self._fault(WEB_KILL, victim.name, group_pids(victim))
        self.stack.kill_child(victim)
        self.replicas_remove(url)
        self.deployment.start_web()
        fault.recovered = time.time()

    def restart_redis(self) -> None:
        server = self.stack.redis_server
        fault = self._fault(REDIS_RESTART, "redis", [server.pid] if server else [])
        self.stack.stop_redis()
        self.stack.start_redis_again()
        fault.recovered = time.time()

    def fail_over(self) -> None:
        sentinel = self.deployment.sentinel
        assert sentinel is not None, "a failover needs --sentinel"
        fault = self._fault(FAILOVER, f"primary on port {sentinel.primary_port()}", sentinel.pids)
        sentinel.failover()
        fault.recovered = time.time()

    def in_fault(self, at: float) -> bool:
        return any(start <= at <= end for start, end in (f.window() for f in self.faults))
