"""Announcing a resource's update from the test's own process (neither web replica, nor a
worker) while a real client's scenario waits for it: shared by the client tests."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from mcpq.ops.harness.stack import Stack
from mcpq.shared.store.announce import announce_updated


def marker_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


class Announcer(threading.Thread):
    """Announces that ``uri`` changed, through the stack's Redis, every ``every_s`` from the
    moment the scenario's marker file says ``subscribed`` until it says ``until``, ``stop`` is
    set, or ``limit_s`` pass. Repeatedly, since an update reaches only a GET stream open at that
    moment (best effort), and an SDK opens its GET stream on its own schedule. Keeps what each
    announcement returned (how many subscribed sessions were told) and any error (a thread's
    exception would otherwise be lost to the assertion message)."""

    def __init__(
        self,
        stack: Stack,
        uri: str,
        marker: Path,
        *,
        until: str,
        limit_s: float = 40.0,
        every_s: float = 0.3,
    ) -> None:
        super().__init__(name="announcer", daemon=True)
        self.store = stack.store()  # made here: the lazily built store is not built twice
        self.uri, self.marker, self.until = uri, marker, until
        self.limit_s, self.every_s = limit_s, every_s
        self.stop = threading.Event()
        self.told: list[int] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        deadline = time.monotonic() + self.limit_s
        try:
            while "subscribed" not in marker_lines(self.marker):
                if self.stop.wait(0.05) or time.monotonic() > deadline:
                    return
            while self.until not in marker_lines(self.marker):
                self.told.append(announce_updated(self.uri, self.store))
                if self.stop.wait(self.every_s) or time.monotonic() > deadline:
                    return
        except Exception as exc:  # shown by the test, not lost in this thread
            self.error = exc

    def __str__(self) -> str:
        return f"announcements told {self.told}, error {self.error!r}"
