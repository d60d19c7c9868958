"""The soak's readers beside its clients: the push listeners (``subscriptions/listen``
streams that must see every watched task's end) and the final reads of every acknowledged task
after the drain."""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from typing import Any

import httpx

from mcpq.ops.bench.soak_clients import LEGACY, MODERN, legacy_result, observe
from mcpq.ops.bench.soak_ledger import Job, Ledger
from mcpq.ops.bench.soak_wire import Legacy, Modern, Replicas, Transient
from mcpq.shared.store import TERMINAL


class Listener(threading.Thread):
    """Watches tasks on ``subscriptions/listen``, a few per stream, reopening a stream that
    breaks (a replica killed, Redis restarting) for the tasks whose end it has not shown yet."""

    BATCH = 4

    def __init__(
        self,
        index: int,
        replicas: Replicas,
        ledger: Ledger,
        watch: deque[Job],
        done: threading.Event,
        deadline: list[float],
    ) -> None:
        super().__init__(name=f"soak-listener-{index}", daemon=True)
        self.ledger, self.watch, self.done, self.deadline = ledger, watch, done, deadline
        self.modern = Modern(replicas, ledger, f"mcpq-soak-listener-{index}")
        self._rids = itertools.count(1000 * index + 1)

    def run(self) -> None:
        try:
            while True:
                batch: list[Job] = []
                while self.watch and len(batch) < self.BATCH:
                    batch.append(self.watch.popleft())
                if batch:
                    self.follow({job.task_id: job for job in batch})
                elif self.done.is_set():
                    return
                else:
                    time.sleep(0.1)
        finally:
            self.modern.close()

    def follow(self, left: dict[str, Job]) -> None:
        """Until every task of ``left`` has shown its end on a stream (or the drain's deadline):
        what each stream showed goes into the tasks' push logs."""
        while left and time.monotonic() < self.deadline[0]:
            self.ledger.count("listen streams")
            url = self.modern.replicas.pick()
            self._log(left, f"open on {url}")
            try:
                with self.modern.listen(url, sorted(left), next(self._rids)) as messages:
                    for message in messages:
                        if message is not None:
                            self._message(message, left)
                        if not left:
                            return
                        if time.monotonic() > self.deadline[0]:
                            self._log(left, "deadline passed")
                            return
                self._log(left, "stream ended")
            except (Transient, httpx.TransportError) as exc:
                self._log(left, f"broken: {exc!r}"[:200])
                time.sleep(0.2)
            self.ledger.count("listen streams broken")

    @staticmethod
    def _log(jobs: dict[str, Job], what: str) -> None:
        stamp = f"{time.time():.3f}"
        for job in jobs.values():
            job.push_log.append(f"{stamp} {what}")

    def _message(self, message: dict[str, Any], left: dict[str, Job]) -> None:
        params = message.get("params", {})
        if message.get("method") == "notifications/subscriptions/acknowledged":
            named = set(params.get("notifications", {}).get("taskIds", []))
            for task_id in [t for t in left if t not in named]:
                job = left.pop(task_id)
                self.ledger.violation("push", f"listen did not acknowledge {job.tag}")
        elif message.get("method") == "notifications/tasks":
            watched = left.get(str(params.get("taskId")))
            if watched is not None:
                status = str(params.get("status"))
                watched.push_log.append(f"{time.time():.3f} {status}")
                self.ledger.seen(watched, status, pushed=True)
                if status in TERMINAL:
                    del left[watched.task_id]


class FinalReads:
    """After the drain: every acknowledged task read until it has ended (bounded)."""

    def __init__(self, replicas: Replicas, ledger: Ledger) -> None:
        self.ledger = ledger
        self.modern = Modern(replicas, ledger, "mcpq-soak-final")
        self.legacy = Legacy(replicas, ledger, "mcpq-soak-final")

    def close(self) -> None:
        self.modern.close()
        self.legacy.close()

    def until_ended(self, jobs: list[Job], deadline: float) -> None:
        if any(job.era == LEGACY for job in jobs) and not self.legacy.open():
            self.ledger.violation("unavailable", "the final reads got no 2025-11-25 session")
        while time.monotonic() < deadline:
            open_jobs = [j for j in jobs if j.final not in TERMINAL]
            if not open_jobs:
                break
            for job in open_jobs:
                self.read(job)
            time.sleep(0.3)
        for job in jobs:
            if job.era == LEGACY and job.final == "completed" and job.result is None:
                legacy_result(self.legacy, job)

    def read(self, job: Job) -> None:
        if job.era == MODERN:
            reply = self.modern.send("tasks/get (final)", "tasks/get", {"taskId": job.task_id})
            if reply is not None:
                observe(self.ledger, job, reply.result)
            return
        # By its taskId any session of the task's principal (here: anonymous) reads it.
        got = self.legacy.post("tasks/get (final)", "tasks/get", {"taskId": job.task_id})
        if got is not None and isinstance(got[1].get("result"), dict):
            observe(self.ledger, job, got[1]["result"])
