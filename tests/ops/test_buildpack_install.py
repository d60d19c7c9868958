"""The buildpack's install: ``requirements.txt`` alone (hashed, exact) runs every Procfile process.

Heroku's and Dokku's Python buildpack installs ``requirements.txt`` into a fresh environment and
nothing else; mcpq itself is not installed, and the Procfile runs ``python -m ops.cli.main`` from
the app directory. This builds that environment the buildpack's way (``pip install -r``, which the
hashes put in hash-checking mode) and checks that every Procfile command starts far enough to
parse its command line and import what its process serves.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ops, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
# What each process type imports before it serves (its command's own --help imports only
# ops.cli.main).
SERVES = {
    "web": "mcpq.frontend.app",
    "worker": "mcpq.workers.entry",
    "worker_bulk": "mcpq.workers.entry",
    "flower": "flower.command",
}


@pytest.fixture(scope="module")
def buildpack_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("buildpack") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "-r", str(REPO / "requirements.txt")],
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return python


def procfile() -> dict[str, list[str]]:
    text = (REPO / "Procfile").read_text()
    return {m[1]: shlex.split(m[2]) for m in re.finditer(r"^([\w-]+):\s*(.+)$", text, re.M)}


def test_mcpq_itself_is_not_installed(buildpack_python: Path) -> None:
    # mcpq is not installed: the processes run from the app directory.
    done = subprocess.run(
        [str(buildpack_python), "-m", "pip", "show", "mcpq"], capture_output=True, timeout=60
    )
    assert done.returncode != 0


@pytest.mark.parametrize("kind", sorted(SERVES))
def test_every_procfile_process_starts_from_the_lock_alone(
    buildpack_python: Path, kind: str
) -> None:
    command = procfile()[kind]
    assert command[:3] == ["python", "-m", "mcpq"], command
    bin_dir = str(buildpack_python.parent)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(buildpack_python.parents[2])}
    helped = subprocess.run(
        [str(buildpack_python), *command[1:], "--help"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert helped.returncode == 0 and "usage:" in helped.stdout, helped.stderr[-2000:]
    imported = subprocess.run(
        [str(buildpack_python), "-c", f"import {SERVES[kind]}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert imported.returncode == 0, imported.stderr[-2000:]
