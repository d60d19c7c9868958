"""Running a benchmark (``python -m mcpq.ops.bench.<name> ... --json``) from its smoke test."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from mcpq.ops.harness.stack import REPO


def run_bench(name: str, *argv: str, timeout: float) -> dict[str, Any]:
    """``mcpq.ops.bench.<name>`` run to its end with ``--json``: the JSON object it printed last.
    Fails the test, with the end of its output, if it exits non-zero."""
    done = subprocess.run(
        [sys.executable, "-m", f"mcpq.ops.bench.{name}", *argv, "--json"],
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:] + done.stdout[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result
