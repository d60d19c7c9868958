"""Environments built the way mcpq is installed: from the hashed lock, into fresh virtualenvs.

- :func:`lock_venv`: a new virtualenv with ``requirements.txt`` installed the buildpack's way
  (``pip install -r``; the hashes put pip in hash-checking mode). Nothing else is fetched; pip's
  cache makes a second build quick.
- :func:`build_wheel`: mcpq's wheel, built the way the docs say (``pip wheel --no-deps
  --no-build-isolation``, the interpreter's own setuptools, no index) from a copy of this
  checkout: the files as they are here, without the checkout's ignored folders (``build/``,
  ``*.egg-info``, caches), whose leftovers would end up in a wheel built in place, and without
  two builds racing in one folder.
- :func:`app_env`: the environment a process of such a virtualenv runs with: its ``bin`` first
  on ``PATH``, nothing of the test run's own (``PYTHONPATH``, ``MCPQ_*``, ``REDIS_URL``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements.txt"

#: Ignored anywhere in the checkout (``.gitignore``), and at its top only.
_IGNORED = {".venv", ".git", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
_IGNORED_AT_TOP = {"build", "dist", ".cache", "tmp"}


def lock_venv(venv: Path, timeout: float = 540) -> Path:
    """A fresh virtualenv at ``venv`` holding the lock's packages; returns its ``python``."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "-r", str(LOCK)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return python


def checkout_copy(target: Path) -> Path:
    """This checkout's files at ``target`` (symlinks kept as links: ``mcpq/ops`` -> ``../ops``)."""

    def ignored(folder: str, names: list[str]) -> set[str]:
        top = Path(folder) == REPO
        return {
            name
            for name in names
            if name in _IGNORED
            or (top and name in _IGNORED_AT_TOP)
            or name.endswith((".egg-info", ".pyc"))
        }

    shutil.copytree(REPO, target, symlinks=True, ignore=ignored)
    return target


@dataclass(frozen=True)
class Built:
    wheel: Path
    #: What the build printed (pip's verbose output: setuptools' own lines and warnings).
    output: str


def build_wheel(python: Path | str, work: Path) -> Built:
    """Build mcpq's wheel with ``python`` (its pip and setuptools) from a copy of the checkout
    under ``work``; the wheel lands in ``work / "dist"``."""
    source = checkout_copy(work / "src")
    dist = work / "dist"
    # PYTHONDONTWRITEBYTECODE would have setuptools warn that it compiles nothing.
    unwanted = {"PYTHONPATH", "PYTHONDONTWRITEBYTECODE"}
    env = {k: v for k, v in os.environ.items() if k not in unwanted}
    argv = [
        str(python), "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
        "-v", "-w", str(dist), str(source),
    ]  # fmt: skip
    done = subprocess.run(
        argv,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    (wheel,) = dist.glob("mcpq_server-*.whl")
    return Built(wheel, output)


def pip_install(python: Path, *args: str, timeout: float = 300) -> None:
    """``pip install --no-deps --no-index ARGS`` into ``python``'s virtualenv: the lock is there
    already, and nothing is looked up."""
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


def app_env(python: Path, home: Path, **extra: str) -> dict[str, str]:
    """The environment of a process of ``python``'s virtualenv: its ``bin`` first on ``PATH``,
    ``home`` as ``HOME``, ``XDG_RUNTIME_DIR`` and ``TMPDIR`` (made here), plus ``extra``."""
    for sub in ("run", "tmp"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": f"{python.parent}:/usr/bin:/bin",
        "HOME": str(home),
        "XDG_RUNTIME_DIR": str(home / "run"),
        "TMPDIR": str(home / "tmp"),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
    }
    env.update(extra)
    return env
