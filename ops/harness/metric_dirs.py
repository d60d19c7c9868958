"""prometheus-client's multiprocess directories of ``mcpq web|worker`` children: found while
the children run, removed once they are stopped.

``mcpq web`` and ``mcpq worker`` each make a ``mcpq-*`` directory in the temporary directory for
``PROMETHEUS_MULTIPROC_DIR`` (every process of the server writes its samples there) and never
remove it; whoever started them does, after they are stopped.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def multiproc_dir(pid: int) -> str | None:
    """``PROMETHEUS_MULTIPROC_DIR`` of a running process (``mcpq web|worker`` make one)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for entry in raw.split(b"\0"):
        name, _, value = entry.partition(b"=")
        if name == b"PROMETHEUS_MULTIPROC_DIR":
            return value.decode()
    return None


class MetricDirs:
    """The directories of the processes noted so far, to be removed when they are gone."""

    def __init__(self) -> None:
        self._found: set[str] = set()

    def note(self, pid: int) -> None:
        """Note the directory of running process ``pid``, if it has one (read from its
        environment, so only while it runs)."""
        if found := multiproc_dir(pid):
            self._found.add(found)

    def remove(self) -> None:
        """Remove the noted directories that ``mcpq web|worker`` made: ``mcpq-*`` directly in
        the temporary directory, nothing else."""
        tmp = os.path.realpath(tempfile.gettempdir())
        for path in self._found:
            real = os.path.realpath(path)
            if real.startswith(tmp + os.sep) and os.path.basename(real).startswith("mcpq-"):
                shutil.rmtree(real, ignore_errors=True)
