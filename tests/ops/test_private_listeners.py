"""Dashboards and metrics listen privately unless told otherwise, checked where it counts: the
kernel's socket table (``/proc/net/tcp`` and ``/proc/net/tcp6``), for the sockets the process
itself holds.

- ``mcpq flower`` without a login listens on loopback only (Flower's own default is every
  interface, IPv4 and IPv6, while its banner says 127.0.0.1), and its start-up line names the
  real bind;
- on a public address without a login it exits non-zero with one line naming the setting;
- with basic auth it starts there, and answers 401 without credentials, 200 with them;
- a worker's metrics endpoint (``MCPQ_WORKER_METRICS_PORT``) listens on loopback only.
"""

from __future__ import annotations

import base64
import ipaddress
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mcpq.ops.runtime.processes import free_port, listening_addresses, wait_until
from tests.ops.ops_harness import OPS_TOOLS
from tests.support.stacks import LiveStack

pytestmark = [pytest.mark.ops, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parents[2]
#: Flower's login settings are stripped from what the children inherit: each test sets its own.
FLOWER_LOGIN = ("FLOWER_BASIC_AUTH", "FLOWER_AUTH", "FLOWER_UNAUTHENTICATED_API")


def listening(pid: int) -> set[tuple[str, int]]:
    """The (address, port) pairs process ``pid`` listens on, from the kernel's socket table."""
    return listening_addresses([pid]) or set()


def listening_on(pid: int, port: int) -> set[str]:
    """The addresses ``pid`` listens on at ``port``, once it does (waits for it)."""

    def bound() -> set[str]:
        return {address for address, p in listening(pid) if p == port}

    return wait_until(bound, timeout=30, interval=0.1, message=f"pid {pid} listening on {port}")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    running = LiveStack("private", tmp_path_factory.mktemp("private-stack"), tools=OPS_TOOLS)
    try:
        running.start_redis()
    except BaseException:
        running.abort()
        raise
    yield running
    running.close()


def flower_env(stack: LiveStack, **env: str) -> dict[str, str]:
    base = {k: v for k, v in stack.child_env().items() if k not in FLOWER_LOGIN}
    return {**base, **env}


def mcpq_flower(*args: str) -> list[str]:
    return [sys.executable, "-m", "mcpq", "flower", *args]


def test_flower_without_a_login_listens_on_loopback_only(stack: LiveStack) -> None:
    port = free_port()
    child = stack.spawn("flower-private", mcpq_flower("--port", str(port)), flower_env(stack))
    addresses = listening_on(child.popen.pid, port)  # `mcpq flower` execs: the same pid
    assert addresses == {"127.0.0.1"}, addresses
    assert all(ipaddress.ip_address(a).is_loopback for a in addresses)
    # The line it prints names the real bind.
    assert f"mcpq flower: listening on 127.0.0.1:{port} (127.0.0.1); no login" in child.log()
    wait_until(lambda: httpx.get(f"http://127.0.0.1:{port}/healthcheck").status_code == 200)
    stack.stop_child(child)


@pytest.mark.parametrize("how", ["flag", "setting"])
def test_flower_on_a_public_address_without_a_login_exits_with_one_line(
    stack: LiveStack, how: str
) -> None:
    args, env = ["--port", str(free_port())], flower_env(stack)
    if how == "flag":
        args += ["--address", "0.0.0.0"]
    else:
        env["MCPQ_FLOWER_ADDRESS"] = "0.0.0.0"
    done = subprocess.run(
        mcpq_flower(*args), cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, done.stderr
    assert "refusing to run Flower on 0.0.0.0 without a login" in errors[0]
    assert "FLOWER_BASIC_AUTH" in errors[0] and "MCPQ_FLOWER_ADDRESS" in errors[0]


def test_flower_with_basic_auth_opens_up_and_asks_for_it(stack: LiveStack) -> None:
    port = free_port()
    env = flower_env(stack, MCPQ_FLOWER_ADDRESS="0.0.0.0", FLOWER_BASIC_AUTH="ops:pw-7f3a")
    child = stack.spawn("flower-login", mcpq_flower("--port", str(port)), env)
    assert listening_on(child.popen.pid, port) == {"0.0.0.0"}
    log = child.log()
    assert f"listening on 0.0.0.0:{port} (every IPv4 interface); login: basic auth" in log
    assert "pw-7f3a" not in log
    base = f"http://127.0.0.1:{port}"
    good = "Basic " + base64.b64encode(b"ops:pw-7f3a").decode()
    bad = "Basic " + base64.b64encode(b"ops:wrong").decode()
    wait_until(lambda: httpx.get(f"{base}/", headers={"Authorization": good}).status_code == 200)
    # (Flower serves /healthcheck and its Prometheus /metrics without its login: documented.)
    for path in ("/", "/tasks", "/api/workers", "/api/tasks"):
        assert httpx.get(f"{base}{path}").status_code == 401, path
        assert httpx.get(f"{base}{path}", headers={"Authorization": bad}).status_code == 401
    assert httpx.get(f"{base}/api/workers", headers={"Authorization": good}).status_code == 200
    stack.stop_child(child)


def test_worker_metrics_listen_on_loopback_only(stack: LiveStack) -> None:
    port = free_port()
    pool = stack.spawn_pool("private", "private", MCPQ_WORKER_METRICS_PORT=str(port))
    stack.wait_ready(pool)
    assert listening_on(pool.popen.pid, port) == {"127.0.0.1"}
    scraped = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    assert scraped.status_code == 200, scraped.text
    stack.stop_child(pool)
