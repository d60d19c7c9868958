"""mcpq across hosts: one Redis host, two web hosts and two worker hosts, each a network
namespace on one bridge, running the real processes (redis-server, ``mcpq web``, ``mcpq
worker``), and faults of whole hosts and of their links.

Every scenario checks the two promises of the task store across machines: **no task is lost**
(each ends ``completed``, seen by a client through a web host) and **no side effect happens
twice** (each task's memoized step appends one line to a file of its own; the filesystem is
shared, so the test reads what every host wrote). Takeover times are printed (run with ``-s``):

1. a worker host loses power (every process in it SIGKILLed): its runs resume on the other
   worker host once their leases expire (lease + a sweep);
2. a worker host is cut off from the network mid-run: the other takes its runs over; when the
   link returns, the cut-off host's late writes are refused by the fence (SUPERSEDED) and its
   runs end there;
3. a web host is cut off: a client that fails over to the other web host sees every task to the
   end, and the cut-off host serves again once its link is back;
4. a client balancing round robin over both web hosts never sees a task go backwards.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpq.ops.harness.mcp_client import McpClient, text_of
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.store import TERMINAL, task_ref
from tests.multihost.formation import LEASE_S, SWEEP_INTERVAL_S, Formation
from tests.multihost.netns import Host, Network

pytestmark = [pytest.mark.multihost, pytest.mark.timeout(120)]

TASKS = 6
# The sweeper's lock outlives a sweep by at most max(2 x interval, 1 s): a dead worker that held
# it delays the survivor's sweep by that much.
SWEEP_LOCK_S = max(2 * SWEEP_INTERVAL_S, 1.0)
TAKEOVER_BOUND_S = LEASE_S + SWEEP_LOCK_S + SWEEP_INTERVAL_S + 2.0  # + 2 s for a loaded machine


@dataclass
class Job:
    """One task of ``mh_effect`` and the files its runs write."""

    task_id: str
    effect: Path
    calls: Path
    seen: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ref(self) -> str:
        return task_ref(self.task_id)


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def hosts_by_name(network: Network) -> dict[str, Host]:
    return {host.name: host for host in network.hosts}


def create_jobs(
    clients: Sequence[McpClient], tmp_path: Path, *, seconds: float, own_work: bool = False
) -> list[Job]:
    """``TASKS`` tasks of ``mh_effect``, created through the web hosts in turn."""
    jobs = []
    for i in range(TASKS):
        effect, calls = tmp_path / f"effect-{i}.txt", tmp_path / f"calls-{i}.txt"
        args = {"path": str(effect), "calls": str(calls), "seconds": seconds, "own_work": own_work}
        created = clients[i % len(clients)].create_task("mh_effect", args)
        jobs.append(Job(created["taskId"], effect, calls))
    return jobs


def poll(client: McpClient, jobs: Iterable[Job]) -> None:
    for job in jobs:
        job.seen.append(client.task(job.task_id))


def wait_stepped(client: McpClient, jobs: Sequence[Job], timeout: float = 20) -> None:
    """Until every task's step ran (its statusMessage says so): each run is mid-tool."""

    def stepped() -> bool:
        poll(client, jobs)
        return all(str(j.seen[-1].get("statusMessage", "")).startswith("stepped on") for j in jobs)

    wait_until(stepped, timeout=timeout, interval=0.1, message="every task past its step")


def wait_completed(client: McpClient, jobs: Sequence[Job], timeout: float = 40) -> float:
    """Until ``tasks/get`` through ``client`` shows every task completed; returns when."""

    def done() -> float | None:
        poll(client, [j for j in jobs if not j.seen or j.seen[-1]["status"] not in TERMINAL])
        ended = [j.seen[-1]["status"] for j in jobs]
        assert all(s in {"working", "completed"} for s in ended), ended
        return time.monotonic() if all(s == "completed" for s in ended) else None

    return wait_until(done, timeout=timeout, interval=0.1, message="every task completed")


def placement(formation: Formation, jobs: Sequence[Job]) -> dict[str, list[Job]]:
    """Worker host name -> the tasks whose (only) message it received."""
    received = formation.received("mh_effect")
    placed: dict[str, list[Job]] = {}
    for job in jobs:
        hosts = received.get(job.ref, [])
        assert len(hosts) == 1, f"task {job.ref[:12]} received by {hosts}"
        placed.setdefault(hosts[0], []).append(job)
    return placed


def victim_and_survivor(
    formation: Formation, jobs: Sequence[Job]
) -> tuple[Host, Host, list[Job], list[Job]]:
    """The worker host running most tasks (the victim), the other one, and their tasks."""
    placed = placement(formation, jobs)
    hosts = hosts_by_name(formation.network)
    victim = max(("worker1", "worker2"), key=lambda name: len(placed.get(name, [])))
    survivor = "worker2" if victim == "worker1" else "worker1"
    return hosts[victim], hosts[survivor], placed.get(victim, []), placed.get(survivor, [])


def assert_exactly_once(jobs: Sequence[Job], first_hosts: dict[str, str]) -> None:
    """Each task's side effect happened once, on the host that first ran it."""
    for job in jobs:
        assert lines(job.effect) == [f"effect {first_hosts[job.ref]}"], (
            f"task {job.ref[:12]}: effect lines {lines(job.effect)}"
        )


def test_a_worker_host_dies(formation: Formation, tmp_path: Path) -> None:
    with McpClient(formation.url(0)) as web1, McpClient(formation.url(1)) as web2:
        jobs = create_jobs([web1, web2], tmp_path, seconds=5)
        wait_stepped(web1, jobs)
        victim, survivor, lost, kept = victim_and_survivor(formation, jobs)
        first = {j.ref: victim.name for j in lost} | {j.ref: survivor.name for j in kept}

        killed_at = formation.kill_host(victim)
        takeovers = [formation.wait_runs(j.ref, 2, timeout=30) - killed_at for j in lost]
        completed_at = wait_completed(web2, jobs)
        print(
            f"\n[multi-host: worker host killed] {len(lost)} of {TASKS} runs on {victim.name}; "
            f"kill -> resumed on {survivor.name}: min {min(takeovers):.2f}s, "
            f"max {max(takeovers):.2f}s (lease {LEASE_S:g}s, sweep every {SWEEP_INTERVAL_S:g}s); "
            f"kill -> all {TASKS} completed: {completed_at - killed_at:.2f}s"
        )
        assert_exactly_once(jobs, first)
        for job in lost:
            assert lines(job.calls) == [f"call {victim.name}", f"call {survivor.name}"]
            assert text_of(job.seen[-1]["result"]) == f"done on {survivor.name}"
            record = formation.task_hash(job.ref)
            # Lost with the host's other runs: no evidence against the tool (judge_loss).
            loss = (record["runs"], record.get("lost", "0"), record.get("shared"))
            assert loss == ("2", "0", "1"), "one shared loss, one recovery"
        for job in kept:
            assert lines(job.calls) == [f"call {survivor.name}"]
            assert formation.task_hash(job.ref)["runs"] == "1"
        assert max(takeovers) < TAKEOVER_BOUND_S, takeovers


# The cut lasts at least CUT_S (longer than the workers' Redis timeouts, so the cut-off worker's
# clients fail and reconnect) and until its runs were taken over. The tool's own work after its
# step (no Redis traffic meanwhile) outlasts that, so the cut-off runs' next write comes once the
# link is back, and is refused.
CUT_S = 6.0
OWN_WORK_S = 12.0
REFUSED = {"superseded", "discarded-superseded"}


def heartbeat(formation: Formation, host: Host) -> float:
    """The last heartbeat (ms) of the worker node on ``host``, as the store has it."""
    beats = formation.stats().workers
    (node,) = [n for n in beats if f"-{host.name}@" in n]
    return beats[node]


# Once the link is back, the cut-off worker's next lease renewal is refused (SUPERSEDED) and it
# interrupts the run; a tool busy in its own code sees that only at its next context call, so a
# long cancel grace lets it get there (and be refused) instead of being abandoned first.
@pytest.mark.parametrize("formation_env", [{"MCPQ_CANCEL_GRACE_S": "30"}])
def test_a_worker_host_cut_off_is_fenced(formation: Formation, tmp_path: Path) -> None:
    network = formation.network
    with McpClient(formation.url(0)) as web1, McpClient(formation.url(1)) as web2:
        jobs = create_jobs([web1, web2], tmp_path, seconds=OWN_WORK_S, own_work=True)
        wait_stepped(web1, jobs)
        victim, survivor, cut_off, kept = victim_and_survivor(formation, jobs)
        first = {j.ref: victim.name for j in cut_off} | {j.ref: survivor.name for j in kept}
        stale = formation.worker_on(victim)

        cut_at = network.cut(victim)
        takeovers = [formation.wait_runs(j.ref, 2, timeout=30) - cut_at for j in cut_off]
        time.sleep(max(0.0, cut_at + CUT_S - time.monotonic()))
        last_beat = heartbeat(formation, victim)
        restored_at = network.restore(victim)
        assert restored_at - cut_at < OWN_WORK_S - 2, (
            "the takeover took so long that the cut-off runs wrote while still cut off"
        )
        back_at = wait_until(
            lambda: heartbeat(formation, victim) > last_beat and time.monotonic(),
            timeout=20,
            interval=0.1,
            message=f"{victim.name} to beat again after the cut",
        )
        completed_at = wait_completed(web2, jobs)
        endings = {
            j.ref: wait_until(
                lambda j=j: stale.run_endings(j.ref),  # type: ignore[misc]
                timeout=20,
                message=f"the cut-off run of {j.ref[:12]} to end on {victim.name}",
            )
            for j in cut_off
        }
        print(
            f"\n[multi-host: worker host cut off] {len(cut_off)} of {TASKS} runs on "
            f"{victim.name}; cut -> taken over by {survivor.name}: min {min(takeovers):.2f}s, "
            f"max {max(takeovers):.2f}s; link back after {restored_at - cut_at:.2f}s, "
            f"{victim.name} beating again {back_at - restored_at:.2f}s later; "
            f"cut -> all completed: {completed_at - cut_at:.2f}s; "
            f"the cut-off runs ended: {sorted({e for ends in endings.values() for e in ends})}"
        )
        assert_exactly_once(jobs, first)
        for job in cut_off:
            # Its late report ("worked on <victim>") was refused by the fence (the run was
            # superseded) and the run stopped there: the task shows only what the run that took
            # it over wrote.
            assert REFUSED & set(endings[job.ref]), endings[job.ref]
            assert set(endings[job.ref]) <= REFUSED | {"busy", "terminal"}, endings[job.ref]
            messages = {str(t.get("statusMessage")) for t in job.seen}
            assert f"worked on {victim.name}" not in messages, messages
            assert text_of(job.seen[-1]["result"]) == f"done on {survivor.name}"
            assert lines(job.calls) == [f"call {victim.name}", f"call {survivor.name}"]
            record = formation.task_hash(job.ref)
            loss = (record["runs"], record.get("lost", "0"), record.get("shared"))
            assert loss == ("2", "0", "1"), "its lease lapsed once, with its host's others"
        for job in kept:
            assert text_of(job.seen[-1]["result"]) == f"done on {survivor.name}"
            assert formation.task_hash(job.ref)["runs"] == "1"
        assert max(takeovers) < TAKEOVER_BOUND_S, takeovers


def test_a_web_host_cut_off(formation: Formation, tmp_path: Path) -> None:
    network = formation.network
    web_a = hosts_by_name(network)["web1"]
    urls = [formation.url(0), formation.url(1)]
    with McpClient(urls[0], timeout_s=2) as via_a, McpClient(urls[1], timeout_s=2) as via_b:
        jobs = create_jobs([via_a, via_b], tmp_path, seconds=3)
        poll(via_a, jobs)
        cut_at = network.cut(web_a)
        # The client polls through web1 and moves to web2 when web1 does not answer.
        with pytest.raises(httpx.TransportError):
            via_a.task(jobs[0].task_id)
        failed_over_at = time.monotonic()
        poll(via_b, jobs)
        completed_at = wait_completed(via_b, jobs)
        restored_at = network.restore(web_a)

        def web_a_serves() -> bool:
            try:
                return all(via_a.task(j.task_id)["status"] == "completed" for j in jobs)
            except (httpx.TransportError, AssertionError):
                return False

        wait_until(web_a_serves, timeout=20, interval=0.1, message="web1 to serve again")
        back_at = time.monotonic()
        print(
            f"\n[multi-host: web host cut off] failed over to web2 "
            f"{failed_over_at - cut_at:.2f}s after the cut (client timeout 2 s); "
            f"all {TASKS} completed through web2 {completed_at - cut_at:.2f}s after the cut; "
            f"web1 served again {back_at - restored_at:.2f}s after its link came back"
        )
        assert_exactly_once(jobs, {j.ref: lines(j.effect)[0].split()[-1] for j in jobs})
        for job in jobs:
            assert text_of(job.seen[-1]["result"]).startswith("done on worker")
            assert len(lines(job.calls)) == 1, "no run was lost or repeated"


STATUS_RANK = {"working": 0, "input_required": 0, "completed": 1, "failed": 1, "cancelled": 1}
COUNT = re.compile(r"^(\d+)/(\d+)$")
MIN_POLLS = 300


def test_round_robin_never_goes_backwards(formation: Formation) -> None:
    urls = [formation.url(0), formation.url(1)]
    with McpClient(urls[0]) as web1, McpClient(urls[1]) as web2:
        clients = [web1, web2]
        # An odd number of tasks: strict round robin over the requests sends each task's
        # polls through both web hosts in turn.
        task_ids = [
            clients[i % 2].create_task("mh_count", {"n": 8, "interval": 0.4})["taskId"]
            for i in range(5)
        ]
        history: dict[str, list[tuple[int, dict[str, Any]]]] = {t: [] for t in task_ids}
        polls = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for task_id in task_ids:
                web = polls % 2
                history[task_id].append((web, clients[web].task(task_id)))
                polls += 1
            ended = all(h[-1][1]["status"] in TERMINAL for h in history.values())
            if ended and polls >= MIN_POLLS:
                break
        print(
            f"\n[multi-host: round robin] {polls} polls over web1 and web2, "
            f"{sum(1 for h in history.values() for w, _ in h if w == 1)} through web2"
        )
        assert polls >= MIN_POLLS
        for task_id, seen in history.items():
            assert {web for web, _ in seen} == {0, 1}
            assert seen[-1][1]["status"] == "completed", seen[-1]
            assert text_of(seen[-1][1]["result"]) == "counted to 8"
            _assert_monotonic(task_id, [task for _, task in seen])


def _assert_monotonic(task_id: str, seen: list[dict[str, Any]]) -> None:
    """Status never returns from terminal, the reported count never decreases, lastUpdatedAt
    never goes back, and a terminal task never changes again."""
    counts = [int(m.group(1)) for t in seen if (m := COUNT.match(str(t.get("statusMessage"))))]
    assert counts == sorted(counts), f"{task_id[:8]}: progress went back: {counts}"
    assert counts[-1] == 8 and counts[0] >= 1
    ranks = [STATUS_RANK[t["status"]] for t in seen]
    assert ranks == sorted(ranks), f"{task_id[:8]}: status went back: {[t['status'] for t in seen]}"
    updated = [t["lastUpdatedAt"] for t in seen]
    assert updated == sorted(updated), f"{task_id[:8]}: lastUpdatedAt went back"
    final = [{k: v for k, v in t.items() if k != "_meta"} for t in seen if t["status"] in TERMINAL]
    assert all(t == final[0] for t in final), f"{task_id[:8]}: a terminal task changed"


def test_the_monotonic_check_fails_on_a_regression() -> None:
    """The round robin test's check is not vacuous: a task seen going back fails it."""

    def seen(status: str, message: str, updated: str) -> dict[str, Any]:
        return {"status": status, "statusMessage": message, "lastUpdatedAt": updated}

    forward = [seen("working", "1/8", "1"), seen("working", "8/8", "2"), seen("completed", "", "3")]
    _assert_monotonic("t", forward)
    for backwards in (
        [forward[0], forward[2], seen("working", "8/8", "3")],  # completed -> working
        [forward[1], seen("working", "7/8", "2"), forward[2]],  # progress 8 -> 7
        [forward[0], seen("working", "8/8", "0"), forward[2]],  # lastUpdatedAt back
        [forward[0], forward[1], forward[2], {**forward[2], "result": {"x": 1}}],  # changed
    ):
        with pytest.raises(AssertionError):
            _assert_monotonic("t", backwards)
