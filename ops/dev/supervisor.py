"""Supervise foreground children for `mcpq dev`: relay their output, notice deaths, stop them all.

Each child leads its own process group (see `ops.runtime.processes`), so stopping a child reaches
everything it forked: gunicorn's workers, Celery's prefork pool; and it dies with the launcher
(its ``death_signal``), even a SIGKILLed one. Output is relayed line by line with a `name | `
prefix by one daemon thread per child; a lock keeps lines from interleaving.

Quiet (a ``log_dir``): each child's output goes to ``<log_dir>/<name>.log``, and reaches the
terminal only once the launcher calls :meth:`Supervisor.go_live` (after start-up, when the
children log at WARNING and above): the start-up banners stay in the files, and a child that dies
has its last lines shown (:meth:`Supervisor.tail`).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TextIO

from mcpq.ops.runtime.processes import spawn_in_new_group, stop_groups


@dataclass
class Child:
    """A supervised process and the thread relaying its output."""

    name: str
    process: subprocess.Popen[bytes]
    relay: threading.Thread | None = field(default=None, repr=False)

    @property
    def exit_code(self) -> int | None:
        """None while the child runs; its return code (negative: killed by a signal) after."""
        return self.process.poll()


class Supervisor:
    """Starts children in their own process groups and prefixes their output on `out`."""

    def __init__(self, out: TextIO | None = None, log_dir: Path | None = None) -> None:
        self._out = out if out is not None else sys.stdout
        self._lock = threading.Lock()
        self.children: list[Child] = []
        self.log_dir = log_dir
        self._live = threading.Event()
        if log_dir is None:
            self._live.set()

    def log_into(self, log_dir: Path) -> None:
        """Quiet mode from now on: children spawned after this log to ``log_dir``, and reach
        the terminal only after :meth:`go_live`."""
        self.log_dir = log_dir
        self._live.clear()

    def go_live(self) -> None:
        """From now on children's lines reach the terminal too (quiet mode: after start-up)."""
        self._live.set()

    def go_quiet(self) -> None:
        """Quiet mode, stopping: the children's goodbyes go to their log files only."""
        if self.log_dir is not None:
            self._live.clear()

    def log_path(self, name: str) -> Path | None:
        return None if self.log_dir is None else self.log_dir / f"{name}.log"

    def tail(self, name: str, lines: int = 15) -> list[str]:
        """The last ``lines`` lines child ``name`` wrote to its log file (quiet mode)."""
        path = self.log_path(name)
        if path is None:
            return []
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        return text.splitlines()[-lines:]

    def say(self, name: str, text: str) -> None:
        """Write one prefixed line (the launcher speaks as `mcpq`)."""
        with self._lock:
            self._out.write(f"{name} | {text.rstrip()}\n")
            self._out.flush()

    def spawn(
        self,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        death_signal: signal.Signals = signal.SIGTERM,
    ) -> Child:
        """Start `argv` in a new process group with stdout+stderr relayed under `name`; the
        kernel sends it ``death_signal`` if the launcher dies (``ops.runtime.parent_death``)."""
        process = spawn_in_new_group(
            argv, env=env, stdout=subprocess.PIPE, death_signal=death_signal
        )
        return self.adopt(name, process)

    def adopt(self, name: str, process: subprocess.Popen[bytes]) -> Child:
        """Supervise a process started elsewhere in its own group (e.g. `RedisProcess`)."""
        child = Child(name, process)
        if process.stdout is not None:
            child.relay = threading.Thread(
                target=self._relay, args=(name, process.stdout), name=f"relay-{name}", daemon=True
            )
            child.relay.start()
        self.children.append(child)
        return child

    def first_exited(self) -> Child | None:
        """A child that has exited, if any (the launcher treats any exit as fatal)."""
        return next((child for child in self.children if child.exit_code is not None), None)

    def stop(
        self,
        children: Sequence[Child],
        timeout: float = 10.0,
        hurry: Callable[[], bool] = lambda: False,
    ) -> None:
        """SIGTERM the children's groups together, SIGKILL what is left after `timeout` s."""
        stop_groups([child.process for child in children], timeout=timeout, hurry=hurry)
        for child in children:
            if child.relay is not None:
                # The pipe closes when the last process of the group exits; this flushes the tail.
                child.relay.join(timeout=2.0)

    def _relay(self, name: str, stream: IO[bytes]) -> None:
        path = self.log_path(name)
        log = None if path is None else open(path, "ab")  # noqa: SIM115  # closed below
        try:
            with stream:
                for raw in iter(stream.readline, b""):
                    if log is not None:
                        log.write(raw)
                        log.flush()  # a child that dies has its last lines on disk
                    if self._live.is_set():
                        self.say(name, raw.decode("utf-8", errors="replace"))
        finally:
            if log is not None:
                log.close()
