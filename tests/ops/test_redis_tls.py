"""Redis over TLS: certificates are verified by default, by every client of mcpq.

The Redis here listens with TLS on a certificate signed by a private CA (``tests.support.tls``),
as a provider with its own CA serves it. Without ``MCPQ_REDIS_TLS_CA`` every client refuses the
connection (the store, Celery's broker); with it the whole deployment works over TLS: the web
tier, a worker running a task end to end, the sweeper, Flower and ``mcpq status``. Turning the
checks off (``MCPQ_REDIS_TLS_VERIFY=false``, or ``ssl_cert_reqs=none`` in the URL, the way
Heroku's add-on is used) still works, and each server process says so once at startup.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from celery import Celery
from flower.utils.broker import Broker

from mcpq.ops.runtime.processes import free_port
from mcpq.ops.runtime.redis_binary import IN_MEMORY_ARGS, RedisBinaryError, RedisProcess
from mcpq.shared.celery_config import celery_config
from mcpq.shared.errors import StoreUnavailable
from mcpq.shared.settings import Settings
from mcpq.shared.store import open_store
from tests.ops.ops_harness import OPS_TOOLS, OpsClient
from tests.support.stacks import FAST_KNOBS, LiveStack
from tests.support.tls import Pki, make_pki, redis_servers_on_path, tls_args, tls_redis

pytestmark = [pytest.mark.ops, pytest.mark.timeout(120)]

WARNING = "Redis TLS certificate checks are OFF"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_port(pki: Pki) -> Iterator[int]:
    with tls_redis(pki) as (_server, port):
        yield port


def _settings(url: str, **env: str) -> Settings:
    return Settings.from_env({"REDIS_URL": url, **env})


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _assert_certificate_refused(exc: BaseException) -> None:
    text = " | ".join(f"{type(e).__name__}: {e}" for e in _causes(exc))
    assert "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text, text


# -- the store's clients (redis-py) ---------------------------------------------------------------
def test_store_refuses_a_certificate_it_cannot_verify(pki: Pki, tls_port: int) -> None:
    url = f"rediss://127.0.0.1:{tls_port}/0"
    for env in ({}, {"MCPQ_REDIS_TLS_CA": str(pki.other_ca)}):
        store = open_store(_settings(url, MCPQ_REDIS_TIMEOUT_S="1", **env))
        with pytest.raises(StoreUnavailable) as refused:
            store.stats([])
        _assert_certificate_refused(refused.value)


def test_store_works_with_the_ca_that_signed_the_certificate(pki: Pki, tls_port: int) -> None:
    for host in ("127.0.0.1", "localhost"):
        url = f"rediss://{host}:{tls_port}/0"
        store = open_store(_settings(url, MCPQ_REDIS_TLS_CA=str(pki.ca)))
        assert store.stats([]).unfinished == 0


def test_the_host_name_is_checked(tmp_path: Path) -> None:
    """A certificate from the trusted CA, but for another host, is refused."""
    pki = make_pki(tmp_path, names=("redis.example",))
    with tls_redis(pki) as (_server, port):
        store = open_store(_settings(f"rediss://127.0.0.1:{port}/0", MCPQ_REDIS_TLS_CA=str(pki.ca)))
        with pytest.raises(StoreUnavailable) as refused:
            store.stats([])
    text = " | ".join(str(e) for e in _causes(refused.value))
    assert "match" in text or "mismatch" in text, text


# -- Celery's broker (kombu): workers, the web tier's producer, Flower, `mcpq status` ---------
def _broker_connects(settings: Settings) -> None:
    app = Celery("tls-probe")
    app.conf.update(celery_config(settings))
    with app.connection_for_write() as connection:
        connection.ensure_connection(max_retries=0, timeout=5)
        connection.default_channel.client.ping()


def test_broker_refuses_a_certificate_it_cannot_verify(tls_port: int) -> None:
    """kombu, told nothing, would not verify a rediss:// URL at all."""
    settings = _settings(f"rediss://127.0.0.1:{tls_port}/0")
    assert celery_config(settings)["broker_use_ssl"]["ssl_cert_reqs"] == ssl.CERT_REQUIRED
    with pytest.raises(Exception) as refused:  # kombu wraps the SSL error its own ways
        _broker_connects(settings)
    _assert_certificate_refused(refused.value)


def test_broker_works_with_the_ca(pki: Pki, tls_port: int) -> None:
    _broker_connects(_settings(f"rediss://127.0.0.1:{tls_port}/0", MCPQ_REDIS_TLS_CA=str(pki.ca)))


def test_flower_broker_view_verifies_too(pki: Pki, tls_port: int) -> None:
    """Flower reads queue depths with a Redis client of its own, built from broker_use_ssl."""

    def queues(settings: Settings) -> list[dict[str, object]]:
        conf = celery_config(settings)
        broker = Broker(
            conf["broker_url"],
            broker_use_ssl=conf["broker_use_ssl"],
            broker_options=conf["broker_transport_options"],
        )
        listed: list[dict[str, object]] = asyncio.run(broker.queues(["mcpq"]))
        return listed

    url = f"rediss://127.0.0.1:{tls_port}/0"
    with pytest.raises(Exception) as refused:  # redis-py's, through Flower
        queues(_settings(url))
    _assert_certificate_refused(refused.value)
    assert queues(_settings(url, MCPQ_REDIS_TLS_CA=str(pki.ca))) == [
        {"name": "mcpq", "messages": 0}
    ]


# -- a whole deployment over TLS ----------------------------------------------------------------
class TlsStack(LiveStack):
    """A stack whose Redis also listens with TLS, and whose processes get only the TLS URL."""

    url_query = ""
    tls_port = 0
    pki: Pki

    def start_redis(self, executable: str | None = None) -> RedisProcess:
        self.pki = make_pki(self.workdir / "pki")
        problems = []
        for candidate in [executable] if executable else redis_servers_on_path():
            self.tls_port = free_port()
            self.redis_args = (*IN_MEMORY_ARGS, *tls_args(self.pki, self.tls_port))
            try:
                return super().start_redis(candidate)
            except RedisBinaryError as exc:
                problems.append(f"{candidate}: {exc}")
        pytest.skip(f"no redis-server with TLS: {problems}")

    @property
    def redis_url(self) -> str:
        return f"rediss://127.0.0.1:{self.tls_port}/0{self.url_query}"

    @property
    def plain_url(self) -> str:
        assert self.redis_server is not None
        return self.redis_server.url


@contextlib.contextmanager
def tls_stack(
    workdir: Path, url_query: str = "", *, trust_ca: bool, flower: bool = False, **env: str
) -> Iterator[TlsStack]:
    """redis (TLS) + ``mcpq worker`` + ``mcpq web`` (+ Flower); ``trust_ca``: the processes get
    ``MCPQ_REDIS_TLS_CA`` naming the CA that signed Redis's certificate."""
    # A TLS handshake on a loaded machine can outlast the 2 s default store timeout: these tests
    # check what is verified, not how fast.
    knobs = {**FAST_KNOBS, "MCPQ_REDIS_TIMEOUT_S": "10", **env}
    stack = TlsStack("tls", workdir, tools=OPS_TOOLS, env=knobs)
    stack.url_query = url_query
    try:
        stack.start_redis()
        if trust_ca:
            stack.knobs["MCPQ_REDIS_TLS_CA"] = str(stack.pki.ca)
        if flower:
            stack.start_flower()
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


def test_whole_deployment_over_verified_tls(tmp_path: Path) -> None:
    with tls_stack(tmp_path, trust_ca=True, flower=True) as stack:
        run_one_task(stack)  # web (store + producer), worker (broker + store), end to end
        ready = httpx.get(f"{stack.web_urls[0]}/readyz", timeout=5).json()
        assert ready["ready"] is True and ready["workers"] >= 1, ready  # heartbeat over TLS
        # Flower reached the worker through the broker (a Celery inspect, over TLS).
        workers = httpx.get(f"{stack.flower_url}/api/workers?refresh=1", timeout=20)
        assert workers.status_code == 200, workers.text
        assert any(node.startswith("tls@") for node in workers.json()), workers.text
        status = subprocess.run(
            [sys.executable, "-m", "mcpq", "status"],
            env=stack.child_env(),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert status.returncode == 0, status.stderr
        assert "workers answering a Celery ping: 1" in status.stdout, status.stdout
        for child in [*stack.webs, *stack.workers, *stack.extras]:
            assert WARNING not in child.log(), child.name


def test_without_the_ca_web_and_worker_refuse_the_connection(tmp_path: Path) -> None:
    stack = TlsStack("tls-noca", tmp_path, tools=OPS_TOOLS)
    try:
        stack.start_redis()
        pool = stack.spawn_pool("mcpq", "tls-noca")
        pool.wait_for_log("certificate verify failed", timeout=30)
        web = stack.start_web()
        ready = httpx.get(f"{web}/readyz", timeout=10)
        assert ready.status_code == 503 and ready.json()["redis"] is False, ready.text
        with OpsClient(stack.url()) as client:
            reply = client.call_tool("slow_compute", {"seconds": 0.1}, tasks=True)
        assert reply.status == 503, reply
        assert reply.body["error"]["message"] == "task store unavailable", reply
    finally:
        stack.close()


@pytest.mark.parametrize(
    ("url_query", "env", "named"),
    [
        ("", {"MCPQ_REDIS_TLS_VERIFY": "false"}, "MCPQ_REDIS_TLS_VERIFY=false"),
        ("?ssl_cert_reqs=none", {}, "ssl_cert_reqs=none in REDIS_URL"),
    ],
    ids=["setting", "url"],
)
def test_opting_out_of_verification_works_and_warns_once_per_process(
    tmp_path: Path, url_query: str, env: dict[str, str], named: str
) -> None:
    """Heroku's add-on: a certificate nobody can verify, and an explicit opt-out."""
    with tls_stack(tmp_path, url_query, trust_ca=False, **env) as stack:
        run_one_task(stack)
        web, worker = stack.webs[0], stack.workers[0]
        for child in (web, worker):
            lines = [line for line in child.log().splitlines() if WARNING in line]
            assert len(lines) == 1, (child.name, lines)
            assert named in lines[0]


def test_a_contradiction_stops_the_server_with_one_line(pki: Pki, tls_port: int) -> None:
    env = {
        "REDIS_URL": f"rediss://127.0.0.1:{tls_port}/0",
        "MCPQ_REDIS_TLS_CA": str(pki.ca.with_name("missing.pem")),
        "MCPQ_TOOLS": "mcpq.demo",
    }
    done = subprocess.run(
        [sys.executable, "-m", "mcpq", "worker"],
        env={**_child_base_env(), **env},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode != 0
    assert "MCPQ_REDIS_TLS_CA" in done.stderr and "Traceback" not in done.stderr, done.stderr


def _child_base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("MCPQ_") and k != "REDIS_URL"}
