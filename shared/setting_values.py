"""How each setting's raw text becomes its value (``mcpq.shared.settings``): the parsers, each
raising ``ValueError`` with a message that names what is allowed, and the sets of allowed
values they check against."""

from __future__ import annotations


def parse_bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"not a boolean: {raw!r}")


def parse_optional_int(raw: str) -> int | None:
    value = raw.strip().lower()
    return None if value in {"", "null", "none", "unlimited"} else int(value)


def parse_ttl_ms(raw: str) -> int:
    # A task whose TTL is 0 or less would expire the moment it is created.
    value = int(raw)
    if value <= 0:
        raise ValueError(f"must be a positive number of milliseconds: {raw!r}")
    return value


def parse_optional_ttl_ms(raw: str) -> int | None:
    value = parse_optional_int(raw)
    if value is not None and value <= 0:
        raise ValueError(f"must be a positive number of milliseconds, or null (unlimited): {raw!r}")
    return value


def parse_non_negative(raw: str) -> float:
    value = float(raw)
    if not value >= 0:
        raise ValueError(f"must be a number of seconds, 0 or more: {raw!r}")
    return value


def parse_positive(raw: str) -> float:
    """A number of seconds more than 0."""
    value = float(raw)
    if not value > 0:  # (NaN too)
        raise ValueError(f"must be a number of seconds more than 0: {raw!r}")
    return value


def parse_shards(raw: str) -> int:
    value = int(raw)
    if not 1 <= value <= 1024:
        raise ValueError(f"must be a number of shards from 1 to 1024: {raw!r}")
    return value


def parse_csv(raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def parse_positive_int(raw: str) -> int:
    value = int(raw)
    if value < 1:
        raise ValueError(f"must be 1 or more: {raw!r}")
    return value


def parse_count(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise ValueError(f"must be 0 or more: {raw!r}")
    return value


def parse_limit(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise ValueError(f"must be 0 (no limit) or more: {raw!r}")
    return value


AUTH_MODES = ("oauth", "apikey", "none")
POOLS = ("io", "cpu")


def parse_pool(raw: str) -> str:
    value = raw.strip().lower()
    if value not in POOLS:
        raise ValueError(f"unknown pool {raw!r} (use io or cpu)")
    return value


BROKER_SCHEMES = (
    "redis://",
    "rediss://",
    "redis+sentinel://",  # mcpq.shared.redis_urls
    "amqp://",
    "amqps://",
    "pyamqp://",
)
AMQP_QUEUE_TYPES = ("quorum", "classic")


def parse_broker_url(raw: str) -> str:
    value = raw.strip()
    if value and not value.startswith(BROKER_SCHEMES):
        # Only the brokers mcpq is tested on; the URL itself is never echoed (a password).
        scheme = value.partition("://")[0][:16] if "://" in value else "(none)"
        raise ValueError(f"unsupported scheme {scheme!r} (use amqp://, amqps:// or redis://)")
    return value


def parse_amqp_queue_type(raw: str) -> str:
    value = raw.strip().lower()
    if value not in AMQP_QUEUE_TYPES:
        raise ValueError(f"unknown queue type {raw!r} (use quorum or classic)")
    return value


def parse_auth_modes(raw: str) -> tuple[str, ...]:
    modes = tuple(mode.lower() for mode in parse_csv(raw))
    unknown = [mode for mode in modes if mode not in AUTH_MODES]
    if unknown:
        raise ValueError(f"unknown mode {unknown[0]!r} (use oauth, apikey, both, or none)")
    if "none" in modes and len(modes) > 1:
        raise ValueError("'none' cannot be combined with another mode")
    return modes
