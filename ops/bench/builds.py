"""Builds of mcpq for the benchmarks that compare two of them (``mcpq.ops.bench.tracing_cost``): a
git ref's tree exported on its own, the variables that make a deployment's processes import it,
and, after the run, which trees they really imported.

- **A build** is the tree of a commit (``git archive <ref> | tar -x``), or the working tree.
  ``mcpq/`` holds symlinks to the top-level ``frontend workers shared ops``: checked to survive.
- **Its deployment** (``mcpq.ops.bench.throughput.mcpq_target`` on a :class:`FolderStack`)
  imports it through ``PYTHONPATH=<tree>``, with ``PYTHONSAFEPATH=1`` and every child run from
  the tree's folder: ``python -m`` would put the working folder first on ``sys.path``, and
  gunicorn does (before it reads mcpq's config module), so from the repository's folder the
  repository's ``mcpq`` would win over the build's (the venv's editable install comes last).
- **Which tree it imported**, seen from the outside: every process of a deployment writes its
  bytecode under a fresh ``PYTHONPYCACHEPREFIX`` of its own (a mirror of each source's path), so
  after the run that folder lists every module any of them imported, lazily ones included. A
  deployment must have imported mcpq from its build and from no other; whether it imported the
  tracing SDK (``opentelemetry.sdk.trace``, the exporter) is read from the same place.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpq.ops.harness.children import REPO, Child
from mcpq.ops.harness.stack import Stack

#: The folders of mcpq's code in a tree (``mcpq/`` and the four its symlinks point to).
CODE_DIRS = ("mcpq", "frontend", "workers", "shared", "ops")
LINKED = ("frontend", "workers", "shared", "ops")
#: What only tracing on imports (the venv's redis-py imports the metrics SDK and the trace API
#: in every process, tracing or not: those say nothing).
TRACER_SDK = ("opentelemetry/sdk/trace/", "opentelemetry/exporter/")


def commit_of(ref: str) -> str:
    """The full commit id ``ref`` names (``ValueError`` if none)."""
    found = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        raise ValueError(f"no commit {ref!r} in {REPO}")
    return found.stdout.strip()


def export(ref: str, dest: Path) -> str:
    """The tree of ``ref`` written into ``dest`` (``git archive``); returns its commit id."""
    commit = commit_of(ref)
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.Popen(["git", "archive", commit], cwd=REPO, stdout=subprocess.PIPE)
    assert archive.stdout is not None
    subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, check=True)
    archive.stdout.close()
    if archive.wait() != 0:
        raise RuntimeError(f"git archive {commit} failed")
    for name in LINKED:
        link = dest / "mcpq" / name
        if not (link.is_symlink() and link.resolve() == (dest / name).resolve()):
            raise RuntimeError(f"{link} is not the symlink to ../{name} it is in the repository")
    return commit


@dataclass
class Build:
    """One deployment's tree of mcpq (``commit``: empty for the working tree) and the folder
    its processes write their bytecode into."""

    tree: Path
    commit: str
    pycache: Path

    @property
    def label(self) -> str:
        return self.commit[:12] if self.commit else "working tree"

    def env(self) -> dict[str, str]:
        """What the deployment's children get (``Stack`` knobs, over its ``PYTHONPATH``)."""
        return {
            "PYTHONPATH": str(self.tree),
            "PYTHONSAFEPATH": "1",
            "PYTHONPYCACHEPREFIX": str(self.pycache),
            "PYTHONDONTWRITEBYTECODE": "",  # empty: unset (the prefix lists the imports)
        }

    def mcpq_file(self) -> str:
        """``mcpq.__file__`` in a child started as the deployment's are (same variables, same
        working folder)."""
        env = {**os.environ, **self.env()}
        env.pop("PYTHONPYCACHEPREFIX")  # the probe's imports are not the deployment's
        done = subprocess.run(
            [sys.executable, "-c", "import mcpq; print(mcpq.__file__)"],
            cwd=self.tree,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    def modules_under(self, tree: Path) -> int:
        """How many of mcpq's modules in ``tree`` the deployment's processes imported."""
        mirror = self.pycache / str(tree.resolve()).lstrip(os.sep)
        return sum(len(list((mirror / d).rglob("*.pyc"))) for d in CODE_DIRS)

    def imported_tracer_sdk(self) -> bool:
        """Whether any of its processes imported the tracing SDK or its exporter."""
        return any(
            part in path.as_posix() for path in self.pycache.rglob("*.pyc") for part in TRACER_SDK
        )

    def check(self, others: list[Path], tracing: bool) -> tuple[dict[str, object], list[str]]:
        """What it imported, and what is wrong with that: mcpq from this build only, and the
        tracing SDK exactly when ``tracing``."""
        own = self.modules_under(self.tree)
        foreign = {str(o): n for o in others if o != self.tree and (n := self.modules_under(o))}
        sdk = self.imported_tracer_sdk()
        problems = []
        if own == 0:
            problems.append(f"imported no module of mcpq from its build {self.tree}")
        if foreign:
            problems.append(f"imported mcpq from other trees (modules): {foreign}")
        if sdk != tracing:
            state = "on" if tracing else "off"
            problems.append(f"tracer SDK imported: {sdk}, with tracing {state}")
        found = {"modules_from_build": own, "modules_from_elsewhere": foreign, "tracer_sdk": sdk}
        return found, problems


#: Runs ``argv[2:]`` from the folder ``argv[1]`` (the same process: ``exec``).
_IN_FOLDER = "import os, sys; os.chdir(sys.argv[1]); os.execv(sys.argv[2], sys.argv[2:])"


class FolderStack(Stack):
    """A `Stack` whose children (web, worker, extras) run from ``folder``, a build's tree."""

    def __init__(self, name: str, workdir: Path, *, folder: Path, **options: Any) -> None:
        super().__init__(name, workdir, **options)
        self.folder = folder

    def _spawn(self, name: str, argv: Sequence[str], env: Mapping[str, str]) -> Child:
        wrapped = [sys.executable, "-c", _IN_FOLDER, str(self.folder), *argv]
        return super()._spawn(name, wrapped, env)
