"""``LeaseKeeper.soon``: a run whose task changed is renewed at once, alone, out of turn, so a
cancel reaches a run on the run loop that awaits something other than its context (an HTTP
call) without waiting for the next round; the rounds keep their pace."""

from __future__ import annotations

import threading
import time

from mcpq.shared.store import Renewal, Reply, TaskStatus
from mcpq.workers.heartbeat import KeptRun, LeaseKeeper, Watchdog


class CancellingStore:
    """Renews every run; a run whose ref is in ``cancelled`` is told its task ended."""

    def __init__(self) -> None:
        self.cancelled: set[str] = set()
        self.calls: list[tuple[float, list[str]]] = []

    def renew_many(
        self, runs: list[tuple[str, int]], lease_ms: int, min_peers: int = 0
    ) -> list[Renewal]:
        self.calls.append((time.monotonic(), [ref for ref, _ in runs]))
        return [
            Renewal(Reply.TERMINAL if ref in self.cancelled else Reply.OK, TaskStatus.WORKING)
            for ref, _ in runs
        ]


def kept(ref: str, cancelled: threading.Event) -> KeptRun:
    def on_cancel(reply: Reply) -> None:
        cancelled.set()

    return KeptRun(ref, 1, on_cancel, lambda: None, Watchdog(lambda: 0.0, 0, lambda: None))


def test_a_run_renewed_soon_hears_of_its_cancel_before_the_next_round() -> None:
    store = CancellingStore()
    keeper = LeaseKeeper(store, lease_s=30.0, grace_s=5.0)  # type: ignore[arg-type]
    heard, other = threading.Event(), threading.Event()
    with keeper.keep(kept("a", heard)) as run, keeper.keep(kept("b", other)):
        deadline = time.monotonic() + 5
        while not store.calls and time.monotonic() < deadline:
            time.sleep(0.01)  # the first round (all runs), then the next one 0.5 s on
        first_round = store.calls[-1][0]
        store.cancelled.add("a")
        asked = time.monotonic()
        keeper.soon(run)
        assert heard.wait(2)
        took = time.monotonic() - asked
        at, refs = next((at, refs) for at, refs in store.calls if at >= asked)
        assert refs == ["a"]  # alone, out of turn
        assert at - first_round < 0.5 and took < 0.4, (at - first_round, took)
        assert not other.is_set()
        time.sleep(0.7)  # the rounds go on, every run in each
        assert any(sorted(refs) == ["a", "b"] for at, refs in store.calls if at > asked)


def test_soon_for_a_run_no_longer_kept_renews_nothing() -> None:
    store = CancellingStore()
    keeper = LeaseKeeper(store, lease_s=30.0, grace_s=5.0)  # type: ignore[arg-type]
    gone = kept("gone", threading.Event())
    with keeper.keep(kept("b", threading.Event())):
        time.sleep(0.1)
        keeper.soon(gone)
        time.sleep(0.2)
    assert all("gone" not in refs for _, refs in store.calls), store.calls
