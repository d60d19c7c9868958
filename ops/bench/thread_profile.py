"""Where a worker process's CPU goes, thread by thread: a ``cProfile`` profiler in every thread,
timed by that thread's own CPU clock, switched on from outside the worker's code.

Python's ``cProfile`` sees only the thread that enabled it, and mcpq's runs are on pool threads
(an io worker) or in prefork children (a cpu worker). Here every thread of the process gets a
profiler of its own from its start, timed by ``time.thread_time`` (the thread's CPU: user and
system, never the time it waits), kept in a list of the process: the main thread's from
``sitecustomize`` on, every ``threading.Thread``'s from its bootstrap (``threading.setprofile``),
and a forked child's (a prefork pool process) anew in the child (``os.register_at_fork``).
The benchmark then signals the processes (every process of the worker's tree):

- :data:`RESET` (``SIGRTMIN+3``): every profiler of the process is cleared, and the process
  writes ``reset-<pid>`` in the profile directory (the window starts once every process has);
- :data:`DUMP` (``SIGRTMIN+4``): the stats of every profiler of the process so far, merged, are
  written to ``profile-<pid>.pstats`` there (``pstats``' format).

Only calls that returned within the window are counted: the outer loops of long-lived threads
(a pool thread's ``_serve``, the consumer's event loop) never return, so their own time is not
in the profile, their callees' is (:func:`top`'s caller compares the profile's total with the
process tree's CPU over the window). No ``yappi``: it is not one of the project's dependencies.

**Enabling it changes nothing in ``workers``.** :func:`hook_env` gives a child the environment
that turns it on: ``MCPQ_BENCH_PROFILE_DIR``, and first on ``PYTHONPATH`` a directory of the
benchmark's holding a ``sitecustomize.py`` that loads this file by path (importing nothing of
mcpq's) and calls :func:`install`, which profiles only a process that runs mcpq's worker
(``python -m mcpq.workers.main``, what ``mcpq worker`` execs): the ``mcpq worker`` command
before its exec, and anything else started with that environment, is left alone.

**Its overhead is large**: two calls of the CPU clock (a system call each) per Python call and
return, so a worker spends several times its usual CPU while profiled, and call-heavy code is
charged more than the rest. Read the profile for where the time goes, in proportion, never for
the CPU per task (the benchmark measures that without the profiler and prints both).
"""

from __future__ import annotations

import cProfile
import os
import pstats
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

ENV = "MCPQ_BENCH_PROFILE_DIR"
RESET = signal.SIGRTMIN + 3
DUMP = signal.SIGRTMIN + 4
#: The ``-m`` module of the processes profiled.
WORKER_MODULE = "mcpq.workers.main"

#: This process's profilers (a thread's name, its profiler), the dead threads' too.
_profiles: list[tuple[str, cProfile.Profile]] = []


def _profile_this_thread(*_: object) -> None:
    """A thread's profile function until its first event: replaced by its own profiler."""
    profiler = cProfile.Profile(time.thread_time)
    _profiles.append((threading.current_thread().name, profiler))
    profiler.enable()


#: A forked child's copies of its parent's profilers, kept: one freed while enabled would
#: switch profiling off in the thread that frees it (``_lsprof``'s dealloc).
_inherited: list[list[tuple[str, cProfile.Profile]]] = []


def _after_fork_in_child() -> None:
    """A forked child's thread runs on with a copy of its parent's profiler: profile it anew,
    with a profiler of its own, the parent's set aside."""
    global _profiles
    _inherited.append(_profiles)
    _profiles = []
    _profile_this_thread()


class _Held:
    """Stats in the shape ``pstats.Stats`` loads (an object with ``create_stats``)."""

    def __init__(self, stats: dict[Any, Any]) -> None:
        self.stats = stats

    def create_stats(self) -> None:
        """Already made."""


def _mark(name: str) -> Path:
    return Path(os.environ[ENV]) / f"{name}-{os.getpid()}"


def _on_reset(signum: int, frame: Any) -> None:
    _mark("reset").touch()
    # The main thread's profiler (the first) last: it would count the others' clears.
    for _name, profiler in reversed(_profiles):
        profiler.clear()


def _on_dump(signum: int, frame: Any) -> None:
    merged = pstats.Stats()
    for _name, profiler in list(_profiles):
        profiler.snapshot_stats()  # its stats so far, without disabling it (create_stats would)
        if profiler.stats:
            merged.add(cast(Any, _Held(dict(profiler.stats))))
    path = _mark("profile").with_suffix(".pstats")
    partial = path.with_suffix(".partial")
    merged.dump_stats(str(partial))
    os.replace(partial, path)


def install() -> None:
    """Profile this process's threads, if it runs mcpq's worker and ``MCPQ_BENCH_PROFILE_DIR``
    is set (``sitecustomize``, at the interpreter's start: the main thread only)."""
    argv = getattr(sys, "orig_argv", [])
    if not os.environ.get(ENV) or WORKER_MODULE not in argv:
        return
    signal.signal(RESET, _on_reset)
    signal.signal(DUMP, _on_dump)
    os.register_at_fork(after_in_child=_after_fork_in_child)
    threading.setprofile(_profile_this_thread)
    sys.setprofile(_profile_this_thread)


# -- the benchmark's side -----------------------------------------------------------------------
_SITECUSTOMIZE = """\
import importlib.util as _util
import sys as _sys

_spec = _util.spec_from_file_location("_mcpq_thread_profile", {path!r})
_hook = _util.module_from_spec(_spec)
_sys.modules[_spec.name] = _hook
_spec.loader.exec_module(_hook)
_hook.install()
"""


def hook_env(directory: Path, pythonpath: str) -> dict[str, str]:
    """The environment that turns the profiler on in a worker: ``directory`` gets the
    ``sitecustomize.py`` (first on ``PYTHONPATH``, before the child's own ``pythonpath``) and
    the files the profiled processes write."""
    directory.mkdir(parents=True, exist_ok=True)
    hook = directory / "hook"
    hook.mkdir(exist_ok=True)
    text = _SITECUSTOMIZE.format(path=str(Path(__file__).resolve()))
    (hook / "sitecustomize.py").write_text(text, encoding="utf-8")
    return {ENV: str(directory), "PYTHONPATH": os.pathsep.join([str(hook), pythonpath])}


def _signal_and_wait(pids: list[int], sig: int, files: list[Path], timeout: float) -> list[Path]:
    for stale in files:
        stale.unlink(missing_ok=True)
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all(f.exists() for f in files):
        time.sleep(0.02)
    return [f for f in files if f.exists()]


def reset(pids: list[int], directory: Path, timeout: float = 10.0) -> int:
    """Clear the profilers of processes ``pids``; how many confirmed (the window starts)."""
    files = [directory / f"reset-{pid}" for pid in pids]
    return len(_signal_and_wait(pids, RESET, files, timeout))


def dump(pids: list[int], directory: Path, timeout: float = 20.0) -> list[Path]:
    """Each process's profile so far, written by itself; the files that came."""
    files = [directory / f"profile-{pid}.pstats" for pid in pids]
    return _signal_and_wait(pids, DUMP, files, timeout)


def merge(paths: list[Path]) -> pstats.Stats:
    """Every process's profile as one."""
    merged = pstats.Stats()
    for path in paths:
        merged.add(str(path))
    return merged


@dataclass(frozen=True)
class Entry:
    """One function of a profile: its calls, own and cumulative CPU (seconds)."""

    function: str
    calls: int
    own_s: float
    cumulative_s: float


def total_s(stats: pstats.Stats) -> float:
    """CPU seconds the profile accounts for (every function's own time)."""
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]  # (pstats' own, not in stubs)
    return float(sum(row[2] for row in raw.values()))


def top(stats: pstats.Stats, count: int, by: str = "own") -> list[Entry]:
    """The ``count`` functions with the most own (``by="own"``) or cumulative CPU."""
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    column = 2 if by == "own" else 3
    ranked = sorted(raw.items(), key=lambda item: -item[1][column])[:count]
    return [Entry(label(key), int(row[1]), row[2], row[3]) for key, row in ranked]


def label(key: tuple[str, int, str]) -> str:
    """``file:line(function)``, the file short: from the package for an installed one, from the
    repository for mcpq's; a built-in as ``pstats`` shows it."""
    filename, line, name = key
    if filename == "~":
        return name
    filename = re.sub(r".*/lib/python3\.\d+/(site-packages/)?", "", filename)
    filename = filename.removeprefix(str(Path(__file__).resolve().parents[2]) + os.sep)
    return f"{filename}:{line}({name})"
