"""``shared.settings.Settings.from_env``: parsing, defaults, and errors that name the variable."""

from __future__ import annotations

from dataclasses import fields

import pytest

from mcpq.shared.celery_config import celery_config
from mcpq.shared.settings import Settings


def test_an_empty_environment_gives_the_defaults() -> None:
    assert Settings.from_env({}) == Settings()


def test_unrelated_variables_are_ignored() -> None:
    assert Settings.from_env({"HOME": "/root", "MCPQ_NOPE": "1"}) == Settings()


def test_it_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPQ_SERVER_NAME", "from-env")
    assert Settings.from_env().server_name == "from-env"


@pytest.mark.parametrize(
    ("name", "raw", "attr", "value"),
    [
        ("REDIS_URL", "redis://h:1/2", "redis_url", "redis://h:1/2"),
        ("MCPQ_SECRET", " s ", "secret", " s "),
        ("MCPQ_DEFAULT_TTL_MS", "5000", "default_ttl_ms", 5000),
        ("MCPQ_DEFAULT_TTL_MS", " 5000 ", "default_ttl_ms", 5000),
        ("MCPQ_DEFAULT_TTL_MS", "", "default_ttl_ms", None),
        ("MCPQ_DEFAULT_TTL_MS", "null", "default_ttl_ms", None),
        ("MCPQ_DEFAULT_TTL_MS", "None", "default_ttl_ms", None),
        ("MCPQ_DEFAULT_TTL_MS", "unlimited", "default_ttl_ms", None),
        ("MCPQ_POLL_INTERVAL_MS", "250", "poll_interval_ms", 250),
        ("MCPQ_SYNC_TIMEOUT_S", "1.5", "sync_timeout_s", 1.5),
        ("MCPQ_REQUIRE_TASK_NAME", "true", "require_task_name", True),
        ("MCPQ_REQUIRE_TASK_NAME", " YES ", "require_task_name", True),
        ("MCPQ_REQUIRE_TASK_NAME", "1", "require_task_name", True),
        ("MCPQ_REQUIRE_TASK_NAME", "on", "require_task_name", True),
        ("MCPQ_REQUIRE_TASK_NAME", "off", "require_task_name", False),
        ("MCPQ_REQUIRE_TASK_NAME", "0", "require_task_name", False),
        ("MCPQ_REQUIRE_TASK_NAME", "", "require_task_name", False),
        (
            "MCPQ_ALLOWED_ORIGINS",
            "https://a, https://b ,,",
            "allowed_origins",
            ("https://a", "https://b"),
        ),
        ("MCPQ_ALLOWED_ORIGINS", "", "allowed_origins", ()),
        ("MCPQ_TOOLS", "pkg.one,pkg.two", "tools", ("pkg.one", "pkg.two")),
        ("MCPQ_QUEUES", "a,b", "worker_queues", ("a", "b")),
        ("MCPQ_MAX_BODY_BYTES", "1024", "max_body_bytes", 1024),
        ("MCPQ_REDIS_TIMEOUT_S", "0.25", "redis_timeout_s", 0.25),
        ("PORT", "9000", "port", 9000),
        ("WEB_CONCURRENCY", "4", "web_concurrency", 4),
    ],
)
def test_values_are_parsed(name: str, raw: str, attr: str, value: object) -> None:
    assert getattr(Settings.from_env({name: raw}), attr) == value


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("MCPQ_POLL_INTERVAL_MS", "abc"),
        ("MCPQ_POLL_INTERVAL_MS", "1.5"),
        ("MCPQ_DEFAULT_TTL_MS", "forever"),
        ("MCPQ_SYNC_TIMEOUT_S", "soon"),
        ("MCPQ_REQUIRE_TASK_NAME", "maybe"),
        ("MCPQ_MAX_BODY_BYTES", "4MB"),
        ("PORT", ""),
        ("MCPQ_LEASE_S", "ten"),
    ],
)
def test_bad_values_raise_value_error_naming_the_variable(name: str, raw: str) -> None:
    with pytest.raises(ValueError, match=f"^{name}: ") as info:
        Settings.from_env({name: raw})
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__


def test_every_field_has_one_unique_variable() -> None:
    names = Settings.env_names()
    assert len(names) == len(fields(Settings)) == len(set(names))


def test_settings_are_immutable() -> None:
    with pytest.raises(AttributeError):
        Settings().port = 1  # type: ignore[misc]


def test_celery_task_events_are_off_unless_asked_for() -> None:
    # Flower turns workers' events on when it starts; each is a PUBLISH per run otherwise.
    quiet = celery_config(Settings.from_env({}))
    assert (quiet["worker_send_task_events"], quiet["task_send_sent_event"]) == (False, False)
    loud = celery_config(Settings.from_env({"MCPQ_TASK_EVENTS": "true"}))
    assert (loud["worker_send_task_events"], loud["task_send_sent_event"]) == (True, True)
