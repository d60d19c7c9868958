"""Subprocesses for tests: each in its own process group, stopped as a group, output captured.

`start_process_group` runs a command as the leader of a new session so that everything it forks
(gunicorn workers, Celery pool children) can be stopped together with `kill_process_group`.
`OutputLines` reads a child's output in a thread so a test can wait for a line without blocking.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Mapping, Sequence

from mcpq.ops.runtime.processes import (
    descendant_pids,
    free_port,
    pid_alive,
    spawn_in_new_group,
    stop_groups,
    wait_until,
)

__all__ = [
    "OutputLines",
    "descendant_pids",
    "free_port",
    "kill_process_group",
    "pid_alive",
    "start_process_group",
    "wait_until",
]


def start_process_group(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    capture: bool = True,
) -> subprocess.Popen[bytes]:
    """Start `argv` in a new process group; stdout+stderr piped when `capture`, else inherited."""
    return spawn_in_new_group(argv, env=env, cwd=cwd, stdout=subprocess.PIPE if capture else None)


def kill_process_group(process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM the process's group, wait up to `timeout` s, then SIGKILL whatever is left."""
    stop_groups([process], timeout=timeout)


class OutputLines:
    """Collects a child's output lines in a background thread; `wait_for` polls them."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        if process.stdout is None:
            raise ValueError("start the process with capture=True (stdout=PIPE)")
        self._stream = process.stdout
        self._lock = threading.Lock()
        self._lines: list[str] = []
        self._thread = threading.Thread(target=self._read, name="output-lines", daemon=True)
        self._thread.start()

    @property
    def lines(self) -> list[str]:
        with self._lock:
            return list(self._lines)

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def wait_for(self, needle: str, timeout: float = 30.0) -> str:
        """Return the first line containing `needle`; TimeoutError (with the output) if none."""

        def find() -> str | None:
            return next((line for line in self.lines if needle in line), None)

        try:
            return wait_until(find, timeout=timeout, message=repr(needle))
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; output so far:\n{self.text[-6000:]}") from None

    def join(self, timeout: float = 5.0) -> None:
        """Wait for the end of the output (the pipe closes when the whole group has exited)."""
        self._thread.join(timeout)

    def _read(self) -> None:
        with self._stream:
            for raw in iter(self._stream.readline, b""):
                with self._lock:
                    self._lines.append(raw.decode("utf-8", errors="replace"))
