"""mcpq.shared.redis_tls: one TLS policy for every Redis client, verified unless explicitly not."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from mcpq.ops.runtime import preflight
from mcpq.shared import redis_tls
from mcpq.shared.celery_config import celery_config
from mcpq.shared.redis_tls import RedisTlsError
from mcpq.shared.settings import Settings


def settings(url: str, **env: str) -> Settings:
    return Settings.from_env({"REDIS_URL": url, "MCPQ_TOOLS": "mcpq.demo", **env})


def test_rediss_is_verified_by_default_in_every_client_shape() -> None:
    tls = redis_tls.redis_tls(settings("rediss://:pw@redis.example:6380/0"))
    assert tls.redis_py() == {
        "ssl_cert_reqs": "required",
        "ssl_check_hostname": True,
        "ssl_ca_certs": None,
    }
    assert tls.kombu() == {"ssl_cert_reqs": ssl.CERT_REQUIRED, "ssl_check_hostname": True}
    conf = celery_config(settings("rediss://:pw@redis.example:6380/0"))
    assert conf["broker_use_ssl"] == tls.kombu()
    assert redis_tls.startup_warning(settings("rediss://redis.example/0")) is None


def test_the_ca_reaches_every_client(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    tls = redis_tls.redis_tls(settings("rediss://redis.example/0", MCPQ_REDIS_TLS_CA=str(ca)))
    assert tls.redis_py()["ssl_ca_certs"] == str(ca)
    assert tls.kombu() == {
        "ssl_cert_reqs": ssl.CERT_REQUIRED,
        "ssl_check_hostname": True,
        "ssl_ca_certs": str(ca),
    }


def test_plain_redis_gets_no_tls_options() -> None:
    """A ``broker_use_ssl`` dict would turn TLS on for a redis:// URL (kombu, Flower)."""
    url = "redis://127.0.0.1:6379/0"
    assert redis_tls.redis_tls(settings(url)).redis_py() == {}
    assert celery_config(settings(url))["broker_use_ssl"] is None
    assert celery_config(settings(url))["broker_url"] == url
    unix = "unix:///run/redis.sock?db=1"
    assert redis_tls.redis_tls(settings(unix)).url == unix  # not rewritten


@pytest.mark.parametrize(
    ("url", "env", "named"),
    [
        ("rediss://h/0", {"MCPQ_REDIS_TLS_VERIFY": "false"}, "MCPQ_REDIS_TLS_VERIFY=false"),
        ("rediss://h/0?ssl_cert_reqs=none", {}, "ssl_cert_reqs=none in REDIS_URL"),
        ("rediss://h/0?ssl_cert_reqs=CERT_NONE", {}, "ssl_cert_reqs=none in REDIS_URL"),
    ],
)
def test_opting_out_is_honoured_and_named(url: str, env: dict[str, str], named: str) -> None:
    s = settings(url, **env)
    tls = redis_tls.redis_tls(s)
    assert "ssl_cert_reqs" not in tls.url  # kombu would let the URL replace the options
    assert tls.redis_py() == {"ssl_cert_reqs": "none", "ssl_check_hostname": False}
    assert tls.kombu() == {"ssl_cert_reqs": ssl.CERT_NONE}
    warning = redis_tls.startup_warning(s)
    assert warning is not None and named in warning and "MCPQ_REDIS_TLS_CA" in warning


def test_the_url_keeps_its_other_parameters() -> None:
    tls = redis_tls.redis_tls(settings("rediss://u:p%40ss@h:6380/2?ssl_cert_reqs=required&x=1"))
    assert tls.url == "rediss://u:p%40ss@h:6380/2?x=1"
    assert tls.verify


@pytest.mark.parametrize(
    ("url", "env", "named"),
    [
        ("rediss://h/0?ssl_check_hostname=false", {}, "ssl_check_hostname"),
        ("rediss://h/0?ssl_ca_certs=/x.pem", {}, "MCPQ_REDIS_TLS_CA"),
        ("rediss://h/0?ssl_cert_reqs=optional", {}, "ssl_cert_reqs=optional"),
        ("redis://h/0?ssl_cert_reqs=none", {}, "rediss://"),
        ("redis://h/0", {"MCPQ_REDIS_TLS_CA": "/etc/ssl/certs"}, "MCPQ_REDIS_TLS_CA"),
        ("rediss://h/0", {"MCPQ_REDIS_TLS_CA": "/nonexistent/ca.pem"}, "MCPQ_REDIS_TLS_CA"),
        (
            "rediss://h/0?ssl_cert_reqs=required",
            {"MCPQ_REDIS_TLS_VERIFY": "false"},
            "MCPQ_REDIS_TLS_VERIFY",
        ),
        ("rediss://h/0", {"MCPQ_REDIS_TLS_VERIFY": "0", "MCPQ_REDIS_TLS_CA": "x"}, "choose one"),
    ],
)
def test_contradictions_are_one_line_naming_the_setting(
    url: str, env: dict[str, str], named: str
) -> None:
    s = settings(url, **env)
    with pytest.raises(RedisTlsError) as refused:
        redis_tls.redis_tls(s)
    message = str(refused.value)
    assert named in message and "\n" not in message
    # mcpq web / mcpq worker stop on it before they start anything
    assert preflight.worker_problem(s) == message
    assert preflight.web_problem(s, ["127.0.0.1"]) == message
