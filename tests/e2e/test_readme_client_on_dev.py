"""The README's Python client example, exactly as written, against `mcpq dev`, exactly as the
README starts it: ``mcpq dev`` on its default port 8000, the example's own URL
``http://127.0.0.1:8000/mcp``.

Port 8000 of this machine may be taken (another server, a test running beside this one), so both
run inside a network namespace of their own (``unshare --net``: only a loopback, which is brought
up), where 8000 is free. Without the rights for that (not root), the example runs against
`mcpq dev` on a free port instead, with only the port in its URL changed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_python_tasks_client import readme_example
from tests.integration.test_dev_launcher import launcher_env
from tests.support.procs import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
README_URL = "http://127.0.0.1:8000/mcp"

# Run where the network is: start `mcpq dev`, wait until it says it is ready, run the example,
# stop `mcpq dev` with Ctrl-C; print what happened as one JSON line.
DRIVER = r"""
import json, os, signal, subprocess, sys, time
port, code, ip = sys.argv[1], sys.argv[2], sys.argv[3]
if ip:  # a new network namespace: its loopback starts down
    subprocess.run([ip, "link", "set", "lo", "up"], check=True)
dev = subprocess.Popen([sys.executable, "-m", "mcpq", "dev", "--port", port],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
seen, ready = [], False
deadline = time.monotonic() + 150
for line in dev.stdout:
    seen.append(line.rstrip())
    if line.rstrip().endswith("; Ctrl-C stops"):
        ready = True
        break
    if time.monotonic() > deadline:
        break
example = None
if ready:
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=90)
    example = {"code": ran.returncode, "stdout": ran.stdout, "stderr": ran.stderr[-3000:]}
dev.send_signal(signal.SIGINT)
rest, _ = dev.communicate(timeout=60)
print(json.dumps({"ready": ready, "dev": seen + rest.splitlines(), "dev_code": dev.returncode,
                  "example": example}))
"""


def own_network_available() -> bool:
    if os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("ip")):
        return False
    probe = subprocess.run(["unshare", "--net", "true"], capture_output=True, check=False)
    return probe.returncode == 0


def test_the_readme_client_example_runs_as_written_against_mcpq_dev(tmp_path: Path) -> None:
    code = readme_example()
    assert README_URL in code
    env = launcher_env(tmp_path)  # with a runtime folder of its own (state file, logs)
    unshare, ip = shutil.which("unshare"), shutil.which("ip")  # before PATH is narrowed
    if own_network_available() and unshare and ip:
        port, argv = "8000", [unshare, "--net", "--kill-child", "--"]
    else:  # no namespace: the example's URL gets the free port `mcpq dev` runs on
        port, argv, ip = str(free_port()), [], ""
        code = code.replace(README_URL, f"http://127.0.0.1:{port}/mcp")
    done = subprocess.run(
        [*argv, sys.executable, "-c", DRIVER, port, code, ip],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=220,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    dev_output = "\n".join(report["dev"])
    assert report["ready"], dev_output
    assert f"mcpq | MCP endpoint: http://127.0.0.1:{port}/mcp" in report["dev"], dev_output
    example = report["example"]
    assert example["code"] == 0, example["stderr"]
    lines = example["stdout"].splitlines()
    assert "Approve deploying api 1 to production?" in lines, lines  # the form, via on_input
    assert "input_required None" in lines, lines  # on_status saw the task wait for it
    assert lines[-1] == "Deployed api 1.", lines  # and the result printed
    assert report["dev_code"] == 0, dev_output
