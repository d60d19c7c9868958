"""Authentication end to end: real gunicorn replicas, a real Celery worker, a private Redis and
a real local OAuth issuer (keys made here, JWKS over HTTP). Two principals cannot touch each
other's tasks; bad tokens get 401 with the challenge; the metadata is served; an API key made
and revoked with ``mcpq keys`` is refused at once on every replica; a replayed pre-task
``requestState`` creates no second task; a principal over its rate gets 429 while another
principal goes on."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from mcpq.ops.harness.mcp_client import McpClient, Reply
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.settings import DEFAULT_TOOLS
from tests.support.issuer import LocalIssuer
from tests.support.stacks import LiveStack

RESOURCE = "https://mcp.example.test/mcp"
METRICS_TOKEN = "auth-metrics-token-2f6b"
METADATA = "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"
APPROVE = {"service": "billing", "version": "1.2.3"}


@pytest.fixture(scope="module")
def issuer() -> Iterator[LocalIssuer]:
    running = LocalIssuer()
    yield running
    running.close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, issuer: LocalIssuer) -> Iterator[Stack]:
    env = {
        "MCPQ_AUTH": "oauth,apikey",
        "MCPQ_RESOURCE_URL": RESOURCE,
        "MCPQ_OAUTH_ISSUER": issuer.url,
        "MCPQ_CREATE_RATE": "2",
        "MCPQ_CREATE_BURST": "5",
        "MCPQ_MAX_OPEN_TASKS": "50",
        "MCPQ_MAX_SYNC_CALLS": "1",
        "MCPQ_INPUT_HOLD_S": "1",
        "MCPQ_POLL_INTERVAL_MS": "200",
        "MCPQ_METRICS_TOKEN": METRICS_TOKEN,
    }
    running = LiveStack("auth", tmp_path_factory.mktemp("auth-stack"), tools=DEFAULT_TOOLS, env=env)
    running.start(webs=2, workers=1)
    yield running
    running.close()


def client(stack: Stack, token: str | None, replica: int = 0) -> McpClient:
    return McpClient(stack.url(replica), token=token)


def keys_cli(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpq", "keys", *args],
        env=stack.child_env(),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        cwd=Path(__file__).parents[2],
    )


def test_the_metadata_document_is_served(stack: Stack, issuer: LocalIssuer) -> None:
    for path in (
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ):
        doc = httpx.get(stack.url(0).removesuffix("/mcp") + path, timeout=10).json()
        assert doc["resource"] == RESOURCE
        assert doc["authorization_servers"] == [issuer.url]


def test_bad_tokens_get_401_with_the_challenge(stack: Stack, issuer: LocalIssuer) -> None:
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    tokens = {
        "none": None,
        "expired": issuer.token("alice", RESOURCE, lifetime_s=-120),
        "wrong audience": issuer.token("alice", "https://elsewhere.test/mcp"),
        "wrong issuer": issuer.token("alice", RESOURCE, issuer="https://evil.test"),
        "bad signature": issuer.token("alice", RESOURCE, key=stranger),
    }
    for case, token in tokens.items():
        with client(stack, token) as c:
            reply = c.request("tools/list")
        assert reply.status == 401, case
        header = reply.headers["www-authenticate"]
        assert header.startswith(f'Bearer resource_metadata="{METADATA}"'), (case, header)
        if token is not None:
            assert 'error="invalid_token"' in header, case


def test_another_principal_cannot_get_answer_or_cancel(stack: Stack, issuer: LocalIssuer) -> None:
    with client(stack, issuer.token("alice", RESOURCE)) as alice:
        task_id = alice.create_task("approve_deployment", APPROVE)["taskId"]
        alice.wait_for_status(task_id, "input_required", timeout=30)
        (key,) = alice.task(task_id)["inputRequests"]
    answer = {key: {"action": "accept", "content": {"approve": True}}}
    with client(stack, issuer.token("bob", RESOURCE), replica=1) as bob:
        unknown = bob.get("no-such-task-id").body["error"]
        assert bob.get(task_id).body["error"] == unknown
        assert bob.update(task_id, answer).body["error"] == unknown
        assert bob.cancel(task_id).body["error"] == unknown
    with client(stack, issuer.token("alice", RESOURCE), replica=1) as alice:
        after = alice.task(task_id)
        assert after["status"] == "input_required"  # nothing bob sent reached it
        assert alice.update(task_id, answer).status == 200
        done = alice.wait_for_status(task_id, "completed", timeout=30)
        assert "Deployed billing 1.2.3" in str(done)


def test_a_rejected_answer_leaves_the_task_waiting(stack: Stack, issuer: LocalIssuer) -> None:
    with client(stack, issuer.token("carol", RESOURCE)) as carol:
        task_id = carol.create_task("approve_deployment", APPROVE)["taskId"]
        carol.wait_for_status(task_id, "input_required", timeout=30)
        (key,) = carol.task(task_id)["inputRequests"]
        refused = carol.update(task_id, {key: {"action": "accept", "content": {"approve": "no"}}})
        assert (refused.status, refused.error["code"]) == (400, -32602)
        assert carol.task(task_id)["status"] == "input_required"
        carol.cancel(task_id)


def test_an_api_key_works_on_every_replica_until_revoked(stack: Stack) -> None:
    made = keys_cli(stack, "create", "ci-bot")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    key_id = token.split("_")[1]
    assert token not in keys_cli(stack, "list").stdout  # list never shows a secret
    clients = [client(stack, token, replica) for replica in (0, 1)]
    try:
        assert all(c.request("tools/list").status == 200 for c in clients)
        revoked = keys_cli(stack, "revoke", key_id)
        assert revoked.returncode == 0, revoked.stderr
        # At once, on both replicas: nothing caches a key.
        assert [c.request("tools/list").status for c in clients] == [401, 401]
    finally:
        for c in clients:
            c.close()


def test_a_replayed_pre_task_state_creates_no_second_task(
    stack: Stack, issuer: LocalIssuer
) -> None:
    with client(stack, issuer.token("dave", RESOURCE)) as dave:
        first = dave.call_tool("test_tool_with_task", {}).result
        assert first["resultType"] == "input_required"
        (key,) = first["inputRequests"]
        params = {
            "name": "test_tool_with_task",
            "arguments": {},
            "inputResponses": {key: {"action": "accept", "content": {"name": "Dave"}}},
            "requestState": first["requestState"],
        }
        created = dave.request("tools/call", params).result
        assert created["resultType"] == "task"
        replay = dave.request("tools/call", params)
        assert (replay.status, replay.error["code"]) == (400, -32602)
        assert "already used" in replay.error["message"]
        # and the state cannot be used by anyone else either
        with client(stack, issuer.token("eve", RESOURCE)) as eve:
            stolen = eve.request("tools/call", params)
            assert (stolen.status, stolen.error["code"]) == (400, -32602)


def test_a_flooding_principal_gets_429_and_another_is_unaffected(
    stack: Stack, issuer: LocalIssuer
) -> None:
    with client(stack, issuer.token("flood", RESOURCE)) as flood:
        replies = [flood.call_tool("greet", {"name": "x"}) for _ in range(12)]
        limited = [r for r in replies if r.status == 429]
        assert limited, [r.status for r in replies]
        first = limited[0]
        assert int(first.headers["retry-after"]) >= 1
        assert first.error["code"] == -32029
        assert first.error["data"]["limit"] == "rate"
        assert first.error["data"]["retryAfterMs"] > 0
    with client(stack, issuer.token("calm", RESOURCE), replica=1) as calm:
        assert calm.call_tool("greet", {"name": "calm"}).status == 200
    scrape = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    metrics_url = stack.url(0).removesuffix("/mcp") + "/metrics"
    metrics = httpx.get(metrics_url, headers=scrape, timeout=10).text
    assert 'mcpq_limit_rejections_total{limit="rate"}' in metrics


def _refused_by(reply: Reply, limit: str) -> Reply | None:
    error = reply.body.get("error") or {}
    return (
        reply if reply.status == 429 and (error.get("data") or {}).get("limit") == limit else None
    )


def test_concurrent_synchronous_calls_are_bounded_per_principal(
    stack: Stack, issuer: LocalIssuer
) -> None:
    token = issuer.token("sync-user", RESOURCE)
    with ThreadPoolExecutor(1) as pool, client(stack, token) as first:
        # A synchronous call (no tasks opt-in) that runs for a while holds the one slot.
        running = pool.submit(first.call_tool, "slow_compute", {"seconds": 3}, tasks=False)
        with client(stack, token, replica=1) as second:
            refused = wait_until(
                lambda: _refused_by(second.call_tool("greet", {"name": "x"}), "sync"),
                timeout=10,
                interval=0.1,
                message="the second sync call to be refused",
            )
        assert refused.error["data"]["limit"] == "sync"
        assert refused.error["data"]["setting"] == "MCPQ_MAX_SYNC_CALLS"
        assert "retry-after" in refused.headers
        assert running.result(timeout=30).status == 200
    with client(stack, token) as again:  # the slot is free once the call ended
        assert again.call_tool("greet", {"name": "y"}).status == 200
