"""`mcpq dev` on a port something else listens on: one line naming the port and `--port`, exit
1, before anything starts (before, it found the other server, printed its endpoint as its own,
and stopped seconds later when its web child could not bind)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_taken_port_is_one_line_and_nothing_starts(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCPQ_")}
        env.pop("REDIS_URL", None)
        env["XDG_RUNTIME_DIR"] = str(tmp_path)
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "mcpq", "dev", "--port", str(port)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    took = time.monotonic() - started
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 1, done
    assert lines == [
        f"mcpq | port {port} is in use (another mcpq dev?): stop it, or pick another port "
        "with --port"
    ], lines
    assert took < 10, f"{took:.1f} s: something was started first"
    assert list(tmp_path.iterdir()) == [], "no state file, no log folder"
