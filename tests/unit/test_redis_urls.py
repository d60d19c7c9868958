"""mcpq.shared.redis_urls: the ``redis+sentinel://`` form of REDIS_URL and what each client gets."""

from __future__ import annotations

import ssl

import pytest

from mcpq.ops.runtime import preflight
from mcpq.shared import redis_tls, redis_urls
from mcpq.shared.celery_config import broker_is_store, broker_url, celery_config
from mcpq.shared.redis_urls import RedisUrlError, SentinelUrl
from mcpq.shared.settings import Settings
from mcpq.shared.store.clients import (
    _AsyncBlockingSentinelPool,
    _BlockingSentinelPool,
    async_client,
    sync_client,
)

URL = "redis+sentinel://:s3cret@10.0.0.1:26379,10.0.0.2,[::1]:26380/mymaster/2"


def settings(url: str, **env: str) -> Settings:
    return Settings.from_env({"REDIS_URL": url, "MCPQ_TOOLS": "mcpq.demo", **env})


def test_the_url_names_sentinels_service_db_and_the_servers_credentials() -> None:
    parsed = redis_urls.parse_sentinel(URL)
    assert parsed == SentinelUrl(
        (("10.0.0.1", 26379), ("10.0.0.2", 26379), ("::1", 26380)),
        "mymaster",
        2,
        None,
        "s3cret",
        False,
    )
    assert "s3cret" not in repr(parsed)
    user = redis_urls.parse_sentinel("rediss+sentinel://app:p%40ss@h:1/svc")
    assert (user.username, user.password, user.db, user.tls) == ("app", "p@ss", 0, True)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("redis+sentinel://h1:26379", "name the Sentinel service"),
        ("redis+sentinel://h1:26379/svc/0/extra", "name the Sentinel service"),
        ("redis+sentinel://h1:26379/svc/zero", "database must be a number"),
        ("redis+sentinel://h1:port/svc", "bad sentinel port"),
        ("redis+sentinel://h1:70000/svc", "bad sentinel port"),
        ("redis+sentinel://:26379/svc", "without a host"),
        ("redis+sentinel://h1/svc?socket_timeout=1", "no query parameters"),
    ],
)
def test_a_bad_url_is_one_line_naming_the_setting(url: str, why: str) -> None:
    with pytest.raises(RedisUrlError, match=why) as caught:
        redis_urls.parse_sentinel(url)
    assert str(caught.value).startswith("REDIS_URL: ")
    assert preflight.redis_tls.problem(settings(url)) == str(caught.value)


def test_celery_gets_kombus_sentinel_form_and_the_service() -> None:
    s = settings(URL, MCPQ_REDIS_SENTINEL_PASSWORD="sentinel-pw")
    assert broker_is_store(s), "the broker stays the store's Redis (the create pushes the run)"
    assert broker_url(s) == (
        "sentinel://:s3cret@10.0.0.1:26379/2;sentinel://:s3cret@10.0.0.2:26379/2;"
        "sentinel://:s3cret@[::1]:26380/2"
    )
    options = celery_config(s)["broker_transport_options"]
    assert options["master_name"] == "mymaster"
    assert options["sentinel_kwargs"] == {
        "socket_timeout": 2.0,
        "socket_connect_timeout": 2.0,
        "password": "sentinel-pw",
    }
    assert options["visibility_timeout"] == s.visibility_timeout_s
    assert celery_config(s)["broker_use_ssl"] is None
    plain = celery_config(settings("redis://h:6379/0"))["broker_transport_options"]
    assert "master_name" not in plain


def test_tls_reaches_sentinels_and_servers_alike() -> None:
    s = settings("rediss+sentinel://h1:26379/svc/0")
    tls = redis_tls.redis_tls(s)
    assert tls.enabled and tls.verify
    conf = celery_config(s)
    assert conf["broker_use_ssl"] == {
        "ssl_cert_reqs": ssl.CERT_REQUIRED,
        "ssl_check_hostname": True,
    }
    assert conf["broker_transport_options"]["sentinel_kwargs"]["ssl"] is True
    assert conf["broker_transport_options"]["sentinel_kwargs"]["ssl_check_hostname"] is True
    pool = sync_client(s).connection_pool
    assert pool.connection_kwargs["ssl_check_hostname"] is True
    assert "SSL" in pool.connection_class.__name__


def test_a_separate_sentinel_broker_is_translated_but_not_over_tls() -> None:
    s = settings("redis://store:6379/0", CELERY_BROKER_URL="redis+sentinel://b1,b2/brokers/1")
    assert not broker_is_store(s)
    assert broker_url(s) == "sentinel://b1:26379/1;sentinel://b2:26379/1"
    assert celery_config(s)["broker_transport_options"]["master_name"] == "brokers"
    with pytest.raises(ValueError, match=r"^CELERY_BROKER_URL: unsupported scheme"):
        settings("redis://store:6379/0", CELERY_BROKER_URL="rediss+sentinel://b1/brokers")
    with pytest.raises(RedisUrlError, match=r"^CELERY_BROKER_URL: rediss\+sentinel"):
        redis_urls.parse_sentinel("rediss+sentinel://b1/brokers", "CELERY_BROKER_URL", tls=False)


def test_store_clients_use_blocking_sentinel_pools() -> None:
    s = settings(URL, MCPQ_REDIS_MIN_REPLICAS="1", MCPQ_REDIS_REPLICA_WAIT_MS="700")
    sync_pool = sync_client(s).connection_pool
    assert isinstance(sync_pool, _BlockingSentinelPool)
    assert sync_pool.service_name == "mymaster" and sync_pool.is_master
    assert sync_pool.connection_kwargs["password"] == "s3cret"
    assert sync_pool.connection_kwargs["db"] == 2
    assert sync_pool.max_connections == 64 and sync_pool.timeout == s.redis_timeout_s
    sentinels = sync_pool.sentinel_manager.sentinels
    assert [c.connection_pool.connection_kwargs["port"] for c in sentinels] == [26379] * 2 + [26380]
    aio_pool = async_client(s).connection_pool
    assert isinstance(aio_pool, _AsyncBlockingSentinelPool)
    # A write's WAIT may take MCPQ_REDIS_REPLICA_WAIT_MS on top of a round trip.
    assert aio_pool.connection_kwargs["socket_timeout"] == pytest.approx(s.redis_timeout_s + 0.7)


def test_min_replicas_settings() -> None:
    assert Settings().redis_min_replicas == 0
    with pytest.raises(ValueError, match="MCPQ_REDIS_MIN_REPLICAS"):
        settings("redis://h/0", MCPQ_REDIS_MIN_REPLICAS="-1")
    with pytest.raises(ValueError, match="MCPQ_REDIS_REPLICA_WAIT_MS"):
        settings("redis://h/0", MCPQ_REDIS_REPLICA_WAIT_MS="0")
