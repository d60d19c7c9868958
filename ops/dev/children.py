"""The app tier `mcpq dev` supervises: the web child and two workers (and Flower), started once,
and the web and workers started again by ``--reload`` (:meth:`AppTier.restart`), Redis and Flower
left running.

Each of web and workers reports metrics from a prometheus-client folder of its own, under the
launcher's temporary folder (a new one for each start: the files a stopped process left behind
would count on in its successor's numbers).
"""

from __future__ import annotations

import signal
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mcpq.ops.dev.options import DevOptions
from mcpq.ops.dev.ready import DevWorker
from mcpq.ops.dev.supervisor import Child, Supervisor
from mcpq.ops.runtime import commands
from mcpq.shared.settings import Settings

STOP_TIMEOUT_S = 10.0


@dataclass
class AppTier:
    """The web and worker children of one launcher, and how to start them."""

    supervisor: Supervisor
    options: DevOptions
    env: Mapping[str, str]
    metrics: Path  #: the launcher's temporary folder for the metrics folders
    web: Child | None = None
    workers: list[DevWorker] = field(default_factory=list)  #: as started (for the ready block)
    worker_children: list[Child] = field(default_factory=list)

    def start(self) -> None:
        """Web, then the workers, then Flower (``--flower``)."""
        self.start_web()
        self.start_workers()
        if self.options.flower:
            self.supervisor.spawn(
                "flower", commands.dev_flower_command(self.options.flower_port), self.env
            )

    def start_web(self) -> None:
        command = commands.dev_web_command(self.options.port)
        self.web = self.supervisor.spawn("web", command, self._metrics_env("web"))

    def start_workers(self) -> None:
        if not self.options.worker:
            return
        settings = Settings.from_env(self.env)
        # Killed outright, the launcher takes its Redis along: a worker whose broker died
        # with it cannot hand its runs back, and its cold shutdown would wait on that broker
        # for good.
        own_redis = any(child.name == "redis" for child in self.supervisor.children)
        death = signal.SIGKILL if own_redis else signal.SIGTERM
        queues = ",".join(settings.worker_queues)
        pool = settings.worker_pool
        self.worker_children = [
            self.supervisor.spawn(
                "worker", commands.dev_worker_command(), self._metrics_env("worker"), death
            ),
            self.supervisor.spawn(
                "bulk", commands.dev_bulk_worker_command(), self._metrics_env("bulk"), death
            ),
        ]
        self.workers = [
            DevWorker("worker", _node_prefix(queues), pool, settings.concurrency(pool), queues),
            DevWorker("bulk", _node_prefix("bulk"), "cpu", 1, "bulk"),
        ]

    def restart(self, hurry: Callable[[], bool], stopping: Callable[[], bool]) -> None:
        """Stop web and workers together and start each anew as soon as it is gone (the web
        first: it stops in a moment, while a worker may still finish a run); nothing is started
        once the launcher itself is ``stopping`` (a Ctrl-C meanwhile)."""
        assert self.web is not None
        groups: list[tuple[list[Child], Callable[[], object]]] = [
            ([self.web], lambda: None if stopping() else self.start_web()),
            (list(self.worker_children), lambda: None if stopping() else self.start_workers()),
        ]
        self.supervisor.replace(groups, timeout=STOP_TIMEOUT_S, hurry=hurry)

    def _metrics_env(self, name: str) -> Mapping[str, str]:
        """A child's environment with a metrics folder of its own (one the developer set is
        kept: then every child shares theirs, as `mcpq web` and `mcpq worker` would)."""
        if self.env.get("PROMETHEUS_MULTIPROC_DIR"):
            return self.env
        folder = tempfile.mkdtemp(prefix=f"{name}-", dir=self.metrics)
        return {**self.env, "PROMETHEUS_MULTIPROC_DIR": folder}


def _node_prefix(queues: str) -> str:
    return commands.default_worker_hostname(queues).removesuffix("%h")
