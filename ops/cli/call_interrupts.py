"""Ctrl-C while ``mcpq call`` follows a task: SIGINT counted by a handler, read by the loop.

Left to Python's defaults, a Ctrl-C is lost in two ways. The process may start with SIGINT
ignored or blocked: both survive ``exec``, so a launcher that ignores SIGINT while it waits for
its child, or a test run that a shell without job control started in the background, hands
``mcpq call`` a terminal whose Ctrl-C does nothing (Python installs its ``KeyboardInterrupt``
handler only over the default action, and never unblocks a signal). And the default handler
raises ``KeyboardInterrupt`` in whatever frame the main thread is running when it checks for
signals, so a press is heard only if it lands in the right ``try``: a second Ctrl-C that lands
while the first one's cancel is being sent escapes the loop without detaching, and one that
lands while rich's live display stops leaves the cursor hidden.

:class:`CtrlC` therefore takes SIGINT itself, unblocked, for as long as the task is followed. Its
handler only counts (a count cannot land in the wrong frame); the loop reads the count between
steps and waits on the event loop's calls in short slices so that it reads it promptly. Only a
prompt, which nothing but an exception can interrupt, asks for ``KeyboardInterrupt`` too
(:meth:`CtrlC.raising`). On leaving, the previous handler and signal mask come back.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from types import FrameType, TracebackType
from typing import TypeVar

T = TypeVar("T")

#: How often a wait looks at the count: the longest a press goes unnoticed.
TICK_S = 0.1


class CtrlC:
    """SIGINT, taken for a ``with`` block: each press counted in :attr:`presses`.

    An ignored SIGINT is left ignored when stdin is not a terminal: that is how POSIX starts a
    background job of a shell without job control (SIGINT ignored, stdin ``/dev/null``), and the
    terminal's Ctrl-C belongs to the foreground job. With a terminal on stdin, the one Ctrl-C
    can come from is ours, so an ignored or blocked SIGINT is a launcher's leftover and is
    taken back."""

    def __init__(self) -> None:
        #: Ctrl-C presses so far (two that arrive together count once: the kernel merges
        #: a signal that is already pending).
        self.presses = 0
        self._raising = False
        self._restore: Callable[[], None] | None = None

    def __enter__(self) -> CtrlC:
        previous = signal.getsignal(signal.SIGINT)
        if previous == signal.SIG_IGN and not os.isatty(0):
            return self
        signal.signal(signal.SIGINT, self._press)
        mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

        def restore() -> None:
            # The mask first: a press from here on waits (if it was blocked) or meets the
            # previous handler, never this one after the loop has stopped reading the count.
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)

        self._restore = restore
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._restore is not None:
            self._restore()
            self._restore = None

    def _press(self, signum: int, frame: FrameType | None) -> None:
        self.presses += 1
        if self._raising:
            raise KeyboardInterrupt

    @contextmanager
    def raising(self) -> Iterator[None]:
        """Within: a press also raises ``KeyboardInterrupt`` (a prompt waiting for a line)."""
        self._raising = True
        try:
            yield
        finally:
            self._raising = False

    def wait(self, future: Future[T]) -> T | None:
        """The call's result (or its exception, raised), or ``None`` if Ctrl-C is pressed
        first: the call is then cancelled and its result no longer wanted."""
        presses = self.presses
        while self.presses == presses:
            try:
                return future.result(timeout=TICK_S)
            except TimeoutError:
                continue
        future.cancel()
        return None
