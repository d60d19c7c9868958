"""Supervise foreground children for `mcpq dev`: relay their output, notice deaths, stop them all.

Each child leads its own process group (see `ops.runtime.processes`), so stopping a child reaches
everything it forked: gunicorn's workers, Celery's prefork pool; and it dies with the launcher
(its ``death_signal``), even a SIGKILLed one. Output is relayed line by line with a `name | `
prefix by one daemon thread per child; a lock keeps lines from interleaving.

Quiet (a ``log_dir``): each child's output goes to ``<log_dir>/<name>.log``, and reaches the
terminal only once the launcher calls :meth:`Supervisor.go_live` (after start-up, when the
children log at WARNING and above): the start-up banners stay in the files, and a child that dies
has its last lines shown (:meth:`Supervisor.tail`). A gate (:meth:`Supervisor.hold_back_while`)
keeps the children's lines off the terminal (never out of their files) while it says so: the
launcher's Redis watch during an outage.

``mcpq dev --reload`` replaces children while the others run (:meth:`Supervisor.replace`).
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

from mcpq.ops.runtime.processes import (
    await_groups,
    signal_group,
    spawn_in_new_group,
    stop_groups,
)


@dataclass
class Child:
    """A supervised process and the thread relaying its output."""

    name: str
    process: subprocess.Popen[bytes]
    relay: threading.Thread | None = field(default=None, repr=False)
    #: Its lines go to its log file only from now on (it is being replaced: its goodbyes).
    quiet: bool = False

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
        self._gate: Callable[[], bool] | None = None

    def log_into(self, log_dir: Path) -> None:
        """Quiet mode from now on: children spawned after this log to ``log_dir``, and reach
        the terminal only after :meth:`go_live`."""
        self.log_dir = log_dir
        self._live.clear()

    def go_live(self) -> None:
        """From now on children's lines reach the terminal too (quiet mode: after start-up)."""
        self._live.set()

    def hold_back_while(self, gate: Callable[[], bool]) -> None:
        """From now on a child's line reaches the terminal only when ``gate()`` is False at the
        moment it is written; its log file gets it either way."""
        self._gate = gate

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
                target=self._relay, args=(child, process.stdout), name=f"relay-{name}", daemon=True
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

    def replace(
        self,
        groups: Sequence[tuple[Sequence[Child], Callable[[], object]]],
        timeout: float = 10.0,
        hurry: Callable[[], bool] = lambda: False,
    ) -> None:
        """Stop the children of every ``(children, then)`` group at once (SIGTERM; SIGKILL after
        ``timeout``), and as soon as a group's children are gone call its ``then`` (which spawns
        their successors): a web that stops in a moment is replaced while workers still finish
        their runs. Stopped children are no longer supervised (their exit is no death), and
        their goodbyes go to their log files only."""
        for group, _ in groups:
            for child in group:
                self.children.remove(child)
                child.quiet = True
                signal_group(child.process.pid, signal.SIGTERM)
        for group, spawn in groups:
            await_groups([child.process for child in group], timeout=timeout, hurry=hurry)
            for child in group:
                if child.relay is not None:
                    child.relay.join(timeout=2.0)
            spawn()

    def _relay(self, child: Child, stream: IO[bytes]) -> None:
        name = child.name
        path = self.log_path(name)
        log = None if path is None else open(path, "ab")  # noqa: SIM115  # closed below
        try:
            with stream:
                for raw in iter(stream.readline, b""):
                    if log is not None:
                        log.write(raw)
                        log.flush()  # a child that dies has its last lines on disk
                    if self._shows(child):
                        self.say(name, raw.decode("utf-8", errors="replace"))
        finally:
            if log is not None:
                log.close()

    def _shows(self, child: Child) -> bool:
        """Whether a line the child writes now reaches the terminal (its file gets it anyway)."""
        if child.quiet or not self._live.is_set():
            return False
        return self._gate is None or not self._gate()
