"""Authentication (``MCPQ_AUTH``) at the MCP endpoint: API keys in Redis and OAuth bearer JWTs
checked against a real local issuer's JWKS; owner isolation; scopes; the RFC 9728 metadata."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from mcpq.shared.store.api_keys import ApiKeys
from tests.support.issuer import LocalIssuer
from tests.unit.fakes import Mcp, Reply

RESOURCE = "https://mcp.example.com/mcp"
METADATA = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"


@pytest.fixture(scope="module")
def issuer() -> Iterator[LocalIssuer]:
    running = LocalIssuer()
    yield running
    running.close()


@pytest.fixture
def oauth(make_mcp: Callable[..., Mcp], issuer: LocalIssuer) -> Mcp:
    return make_mcp(auth=("oauth",), resource_url=RESOURCE, oauth_issuer=issuer.url)


def challenge(reply: Reply) -> str:
    return reply.headers.get("www-authenticate", "")


# -- API keys ------------------------------------------------------------------------------------
def test_apikey_mode_refuses_a_request_without_credentials(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp(auth=("apikey",))
    reply = mcp.post("tools/list")
    assert reply.status == 401
    assert challenge(reply) == 'Bearer realm="mcpq"'
    assert reply.body["error"] == "unauthorized"


@pytest.mark.parametrize(
    "token",
    ["mcpq_0123456789abcdef_" + "A" * 43, "not-a-key", "mcpq_short"],
)
def test_apikey_mode_refuses_a_wrong_key(make_mcp: Callable[..., Mcp], token: str) -> None:
    mcp = make_mcp(auth=("apikey",))
    mcp.api_key("real")
    mcp.token = token
    reply = mcp.post("tools/list")
    assert reply.status == 401
    assert 'error="invalid_token"' in challenge(reply)


def test_a_key_with_the_right_id_and_a_wrong_secret_is_refused(
    make_mcp: Callable[..., Mcp],
) -> None:
    mcp = make_mcp(auth=("apikey",))
    key_id = mcp.api_key("real").split("_")[1]
    mcp.token = f"mcpq_{key_id}_" + "B" * 43
    assert mcp.post("tools/list").status == 401


def test_a_key_works_until_it_is_revoked_and_not_one_request_after(
    make_mcp: Callable[..., Mcp],
) -> None:
    mcp = make_mcp(auth=("apikey",))
    keys = ApiKeys(mcp.peek, mcp.keys)
    made, token = keys.create("ci", ("deploy",))
    mcp.token = token
    assert mcp.post("tools/list").status == 200
    assert keys.revoke(made.id)
    assert mcp.post("tools/list").status == 401
    listed = {k.id: k for k in keys.list()}
    assert listed[made.id].revoked_ms is not None
    assert listed[made.id].scopes == ("deploy",)
    # Only a digest is stored: the secret part of the token appears nowhere in Redis.
    secret = token.split("_", 2)[2]
    assert all(secret not in str(v) for v in mcp.peek.hgetall(mcp.keys.api_key(made.id)).values())


def test_two_keys_are_two_principals(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp(auth=("apikey",))
    alice, bob = mcp.api_key("alice"), mcp.api_key("bob")
    mcp.token = alice
    task_id = mcp.new_task()
    mcp.token = bob
    stolen = mcp.get(task_id)
    unknown = mcp.get("no-such-task")
    assert stolen.code() == unknown.code() == (400, -32602)
    assert stolen.error == unknown.error
    assert mcp.post("tasks/cancel", {"taskId": task_id}).error == unknown.error
    mcp.token = alice
    assert mcp.get(task_id).result["status"] == "working"
    record = mcp.record(task_id)
    assert record is not None and record.owner.startswith("key:")


def test_tool_scopes_are_enforced_with_a_403_challenge(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp(auth=("apikey",))
    mcp.token = mcp.api_key("reader")
    refused = mcp.call("deploy", {})
    assert refused.status == 403
    assert refused.error["code"] == -32600
    assert refused.error["data"] == {"requiredScopes": ["deploy"]}
    assert 'error="insufficient_scope"' in challenge(refused)
    assert 'scope="deploy"' in challenge(refused)
    assert mcp.producer.enqueues == []
    mcp.token = mcp.api_key("deployer", "deploy")
    assert mcp.call("deploy", {}).result["status"] == "working"


def test_without_auth_everyone_is_anonymous(mcp: Mcp) -> None:
    task_id = mcp.new_task()
    record = mcp.record(task_id)
    assert record is not None and record.owner == "anonymous"


# -- OAuth ---------------------------------------------------------------------------------------
def test_no_token_gets_401_pointing_at_the_metadata(oauth: Mcp) -> None:
    reply = oauth.post("tools/list")
    assert reply.status == 401
    assert challenge(reply) == f'Bearer resource_metadata="{METADATA}"'


def test_a_valid_token_gets_in(oauth: Mcp, issuer: LocalIssuer) -> None:
    oauth.token = issuer.token("alice", RESOURCE)
    assert oauth.post("tools/list").status == 200
    task_id = oauth.new_task()
    record = oauth.record(task_id)
    assert record is not None and record.owner.startswith("oauth:")
    assert "alice" not in record.owner  # a hash of iss and sub


def _forged(issuer: LocalIssuer) -> dict[str, str]:
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return {
        "expired": issuer.token("alice", RESOURCE, lifetime_s=-120),
        "wrong audience": issuer.token("alice", "https://other.example/mcp"),
        "wrong issuer": issuer.token("alice", RESOURCE, issuer="https://evil.example"),
        "bad signature": issuer.token("alice", RESOURCE, key=stranger),
        "unknown key id": issuer.token("alice", RESOURCE, kid="nope", key=stranger),
        "not yet valid": issuer.token("alice", RESOURCE, nbf=2**31),
        "garbage": "eyJhbGciOiJSUzI1NiJ9.e30.AAAA",
    }


@pytest.mark.parametrize(
    "case",
    [
        "expired",
        "wrong audience",
        "wrong issuer",
        "bad signature",
        "unknown key id",
        "not yet valid",
        "garbage",
    ],
)
def test_a_bad_token_gets_401_invalid_token(oauth: Mcp, issuer: LocalIssuer, case: str) -> None:
    oauth.token = _forged(issuer)[case]
    reply = oauth.post("tools/list")
    assert reply.status == 401, case
    assert challenge(reply).startswith(f'Bearer resource_metadata="{METADATA}", ')
    assert 'error="invalid_token"' in challenge(reply)
    assert reply.body["error"] == "invalid_token"


def test_hs256_signed_with_the_public_key_is_refused(oauth: Mcp, issuer: LocalIssuer) -> None:
    """Algorithm confusion: a token "signed" with HMAC over the public JWK must not pass."""
    import jwt

    public = str(issuer.jwks()["keys"][0])
    token = jwt.encode({"sub": "x", "aud": RESOURCE, "iss": issuer.url, "exp": 2**31}, public)
    oauth.token = token
    assert oauth.post("tools/list").status == 401


def test_two_subjects_are_two_principals(oauth: Mcp, issuer: LocalIssuer) -> None:
    oauth.token = issuer.token("alice", RESOURCE)
    task_id = oauth.new_task()
    oauth.token = issuer.token("bob", RESOURCE)
    assert oauth.get(task_id).error == oauth.get("no-such-task").error


def test_a_rotated_key_is_fetched_when_a_token_names_it(
    make_mcp: Callable[..., Mcp], issuer: LocalIssuer
) -> None:
    mcp = make_mcp(auth=("oauth",), resource_url=RESOURCE, oauth_issuer=issuer.url)
    mcp.token = issuer.token("alice", RESOURCE)
    assert mcp.post("tools/list").status == 200
    before = issuer.fetches
    assert mcp.post("tools/list").status == 200
    assert issuer.fetches == before  # cached
    issuer.rotate("k2", kind="ec")
    try:
        mcp.token = issuer.token("alice", RESOURCE, kid="k2")
        assert mcp.post("tools/list").status == 200
        assert issuer.fetches == before + 1
    finally:
        issuer.retire("k2")


def test_keys_held_keep_working_while_the_issuer_is_down(
    make_mcp: Callable[..., Mcp], issuer: LocalIssuer
) -> None:
    mcp = make_mcp(auth=("oauth",), resource_url=RESOURCE, oauth_issuer=issuer.url, jwks_cache_s=0)
    mcp.token = issuer.token("alice", RESOURCE)
    assert mcp.post("tools/list").status == 200
    issuer.down = True
    try:
        assert mcp.post("tools/list").status == 200
    finally:
        issuer.down = False


def test_an_issuer_that_cannot_be_reached_gives_503_not_401(
    make_mcp: Callable[..., Mcp], issuer: LocalIssuer
) -> None:
    mcp = make_mcp(auth=("oauth",), resource_url=RESOURCE, oauth_issuer=issuer.url)
    mcp.token = issuer.token("alice", RESOURCE)
    issuer.down = True
    try:
        reply = mcp.post("tools/list")
    finally:
        issuer.down = False
    assert reply.status == 503
    assert reply.headers.get("retry-after")


def test_required_scopes_give_403_insufficient_scope(
    make_mcp: Callable[..., Mcp], issuer: LocalIssuer
) -> None:
    mcp = make_mcp(
        auth=("oauth",), resource_url=RESOURCE, oauth_issuer=issuer.url, oauth_scopes=("mcp",)
    )
    mcp.token = issuer.token("alice", RESOURCE, scope="profile")
    reply = mcp.post("tools/list")
    assert reply.status == 403
    assert 'error="insufficient_scope"' in challenge(reply)
    assert 'scope="mcp"' in challenge(reply)
    mcp.token = issuer.token("alice", RESOURCE, scope="profile mcp")
    assert mcp.post("tools/list").status == 200


def test_tool_scope_from_the_token(oauth: Mcp, issuer: LocalIssuer) -> None:
    oauth.token = issuer.token("alice", RESOURCE)
    assert oauth.call("deploy", {}).status == 403
    oauth.token = issuer.token("alice", RESOURCE, scope="deploy")
    assert oauth.call("deploy", {}).result["status"] == "working"


def test_both_modes_take_either_credential(
    make_mcp: Callable[..., Mcp], issuer: LocalIssuer
) -> None:
    mcp = make_mcp(auth=("oauth", "apikey"), resource_url=RESOURCE, oauth_issuer=issuer.url)
    mcp.token = mcp.api_key("svc")
    assert mcp.post("tools/list").status == 200
    mcp.token = issuer.token("alice", RESOURCE)
    assert mcp.post("tools/list").status == 200


@pytest.mark.parametrize(
    "path", ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"]
)
def test_protected_resource_metadata_is_served(oauth: Mcp, issuer: LocalIssuer, path: str) -> None:
    reply = oauth.client.simulate_get(path)
    assert reply.status_code == 200
    doc = reply.json
    assert doc["resource"] == RESOURCE
    assert doc["authorization_servers"] == [issuer.url]
    assert doc["bearer_methods_supported"] == ["header"]
    assert "deploy" in doc["scopes_supported"]


def test_metadata_is_not_served_without_oauth(mcp: Mcp) -> None:
    assert mcp.client.simulate_get("/.well-known/oauth-protected-resource").status_code == 404
