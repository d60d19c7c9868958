"""Supervise foreground children for `mcpq dev`: relay their output, notice deaths, stop them all.

Each child leads its own process group (see `ops.processes`), so stopping a child reaches
everything it forked: gunicorn's workers, Celery's prefork pool. Output is relayed line by line
with a `name | ` prefix by one daemon thread per child; a lock keeps lines from interleaving.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, TextIO

from ops.processes import spawn_in_new_group, stop_groups


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

    def __init__(self, out: TextIO | None = None) -> None:
        self._out = out if out is not None else sys.stdout
        self._lock = threading.Lock()
        self.children: list[Child] = []

    def say(self, name: str, text: str) -> None:
        """Write one prefixed line (the launcher speaks as `mcpq`)."""
        with self._lock:
            self._out.write(f"{name} | {text.rstrip()}\n")
            self._out.flush()

    def spawn(self, name: str, argv: Sequence[str], env: Mapping[str, str]) -> Child:
        """Start `argv` in a new process group with stdout+stderr relayed under `name`."""
        process = spawn_in_new_group(argv, env=env, stdout=subprocess.PIPE)
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
        with stream:
            for raw in iter(stream.readline, b""):
                self.say(name, raw.decode("utf-8", errors="replace"))
