"""Celery's settings per broker (``shared.celery_config``): Redis-only transport options stay on
Redis, RabbitMQ gets publisher confirms, its queue type and a verified ``amqps://``, and a broker
URL mcpq does not support is refused naming the setting (never echoing the URL)."""

from __future__ import annotations

import ssl

import pytest

from mcpq.shared.celery_config import (
    CONFIRM_TIMEOUT_S,
    broker_is_amqp,
    broker_is_store,
    broker_url,
    celery_config,
    publish_options,
)
from mcpq.shared.settings import Settings

REDIS = "redis://127.0.0.1:6390/0"
AMQP = "amqp://mcpq:s3cret-pass@rabbit.internal:5672/mcpq"


def test_the_store_redis_is_the_broker_by_default() -> None:
    settings = Settings(redis_url=REDIS)
    config = celery_config(settings)
    assert broker_is_store(settings) and not broker_is_amqp(settings)
    assert config["broker_url"] == REDIS
    assert config["broker_transport_options"]["visibility_timeout"] > 0
    assert "task_default_queue_type" not in config and "broker_heartbeat" not in config
    assert publish_options(settings) == {}


@pytest.mark.parametrize("queue_type", ["quorum", "classic"])
def test_rabbitmq_gets_confirms_its_queue_type_and_no_redis_options(queue_type: str) -> None:
    settings = Settings(redis_url=REDIS, broker_url=AMQP, amqp_queue_type=queue_type)
    config = celery_config(settings)
    assert broker_is_amqp(settings) and not broker_is_store(settings)
    assert broker_url(settings) == AMQP
    assert config["broker_transport_options"] == {"confirm_publish": True}
    assert config["broker_use_ssl"] is None  # amqp://: a dict would turn TLS on
    assert config["task_default_queue_type"] == queue_type
    assert config["task_create_missing_queue_type"] == queue_type
    assert config["worker_detect_quorum_queues"] is True
    assert config["broker_native_delayed_delivery_queue_type"] == "classic"
    assert config["broker_heartbeat"] == 30
    assert config["accept_content"] == ["json"]
    assert publish_options(settings) == {"confirm_timeout": CONFIRM_TIMEOUT_S}


def test_amqps_verifies_the_chain_and_the_host_name() -> None:
    settings = Settings(redis_url=REDIS, broker_url=AMQP.replace("amqp://", "amqps://"))
    tls = celery_config(settings)["broker_use_ssl"]
    # server_hostname None: kombu fills in the URL's host, and py-amqp then checks it.
    assert tls == {"cert_reqs": ssl.CERT_REQUIRED, "server_hostname": None}


def test_the_settings_of_the_broker_are_read_from_the_environment() -> None:
    env = {
        "CELERY_BROKER_URL": AMQP,
        "MCPQ_AMQP_QUEUE_TYPE": "Classic",
        "MCPQ_AMQP_HEARTBEAT_S": "12",
    }
    settings = Settings.from_env(env)
    assert (settings.broker_url, settings.amqp_queue_type) == (AMQP, "classic")
    assert celery_config(settings)["broker_heartbeat"] == 12
    assert "s3cret-pass" not in repr(settings), "the broker URL holds a password"


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("CELERY_BROKER_URL", "sqs://key:s3cret-pass@queue", "unsupported scheme 'sqs'"),
        ("CELERY_BROKER_URL", "s3cret-pass@rabbit", "unsupported scheme '(none)'"),
        ("MCPQ_AMQP_QUEUE_TYPE", "stream", "unknown queue type 'stream'"),
        ("MCPQ_AMQP_HEARTBEAT_S", "-1", "must be 0"),
    ],
)
def test_a_bad_broker_setting_is_one_line_naming_it(name: str, value: str, expected: str) -> None:
    with pytest.raises(ValueError, match="^" + name) as raised:
        Settings.from_env({name: value})
    assert expected in str(raised.value)
    assert "s3cret-pass" not in str(raised.value)
