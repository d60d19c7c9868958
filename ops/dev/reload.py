"""`mcpq dev --reload`: which changes restart the web and the workers, and how they are noticed.

What is watched is what ``uvicorn --reload`` and ``fastmcp dev`` watch, so a FastMCP or uvicorn
user finds what they expect: the Python files (``*.py``) of the folder `mcpq dev` runs in, the
project folder, and of every folder below it, except those no one edits by hand (``.venv``,
``venv``, ``site-packages``, ``__pycache__``, ``.git`` …). A tool module named by ``MCPQ_TOOLS``
lives there in the usual layout (the folder is importable, ``mcpq.ops.dev.launcher``), and so do
the helpers it imports, which watching the tool modules' own files alone would miss.

Changes are noticed by ``watchfiles`` (inotify, FSEvents …) in a thread of its own, grouped (an
editor's save is several events; a ``git checkout`` many), and handed to the launcher's loop
(:meth:`SourceWatch.changed`), which restarts the web and the workers once per group.
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path

from watchfiles import PythonFilter, watch

#: A group of changes ends after this long without another (an editor's save is several).
_STEP_MS = 50
#: … or, during a stream of changes, after this long at most.
_DEBOUNCE_MS = 400


class ProjectFilter(PythonFilter):
    """Python files, not in a folder of tools or of installed packages."""

    ignore_dirs = (*PythonFilter.ignore_dirs, "venv", "site-packages")


class SourceWatch:
    """Watches ``root`` for changed Python files (see the module's docs)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._changes: queue.SimpleQueue[set[Path]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="source-watch", daemon=True)

    def start(self) -> SourceWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)

    def changed(self) -> set[Path]:
        """The files changed since the last call (empty: none); never waits."""
        found: set[Path] = set()
        while True:
            try:
                found |= self._changes.get_nowait()
            except queue.Empty:
                return found

    def _run(self) -> None:
        for changes in watch(
            self.root,
            watch_filter=ProjectFilter(),
            step=_STEP_MS,
            debounce=_DEBOUNCE_MS,
            stop_event=self._stop,
            rust_timeout=500,  # how often the thread looks at its stop event
            raise_interrupt=False,
        ):
            self._changes.put({Path(path) for _, path in changes})


def describe(paths: set[Path], root: Path) -> str:
    """``mytools.py``, ``tools/a.py and 2 other files``: what changed, in a few words."""
    names = sorted(_shown(path, root) for path in paths)
    if len(names) == 1:
        return names[0]
    others = len(names) - 1
    return f"{names[0]} and {others} other file{'s' * (others != 1)}"


def _shown(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
