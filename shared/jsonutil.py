"""JSON in and out (orjson): the only serialisation mcpq uses, on the wire and in Redis."""

from __future__ import annotations

from typing import Any

import orjson


def dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def dumpb(value: Any) -> bytes:
    return orjson.dumps(value)


def loads(raw: str | bytes) -> Any:
    return orjson.loads(raw)
