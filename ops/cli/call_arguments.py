"""A tool's arguments from ``mcpq call``'s command line: ``key=value`` pairs typed by the tool's
input schema, over the object of ``--json``; and the answers given up front with ``--answer``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcpq.ops.cli.call_prompts import UsageError


def parse_arguments(
    pairs: list[str], raw_json: str | None, schema: Mapping[str, Any]
) -> dict[str, Any]:
    """``key=value`` pairs typed by the tool's input schema (integers, numbers, booleans, JSON
    for objects and arrays; strings as typed), over ``--json``'s object."""
    arguments: dict[str, Any] = {}
    if raw_json is not None:
        try:
            arguments = json.loads(raw_json)
        except ValueError as exc:
            raise UsageError(f"--json: not JSON: {exc}") from None
        if not isinstance(arguments, dict):
            raise UsageError("--json: must be a JSON object")
    properties = schema.get("properties") or {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"expected key=value, got {pair!r}")
        arguments[key] = _typed(key, value, properties.get(key) or {})
    return arguments


def parse_answers(pairs: list[str] | None) -> dict[str, Any]:
    """``--answer KEY=JSON`` pairs: the value of the field ``KEY`` of the forms the task asks,
    as JSON (``approve=true``, ``reason='"a string"'``)."""
    answers: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--answer: expected KEY=JSON, got {pair!r}")
        try:
            answers[key] = json.loads(raw)
        except ValueError:
            example = json.dumps(raw)
            raise UsageError(
                f"--answer {key}: not JSON (a string keeps its quotes: {key}='{example}')"
            ) from None
    return answers


_TRUE, _FALSE = {"true", "yes", "y", "1", "on"}, {"false", "no", "n", "0", "off"}


def _typed(key: str, value: str, prop: Mapping[str, Any]) -> Any:
    kinds = prop.get("type")
    if kinds is None and isinstance(prop.get("anyOf"), list):
        kinds = [p.get("type") for p in prop["anyOf"] if isinstance(p, dict)]
    kinds = set(kinds) if isinstance(kinds, list) else {kinds}
    if "string" in kinds:
        return value
    try:
        if "integer" in kinds:
            return int(value)
        if "number" in kinds:
            return float(value)
    except ValueError:
        raise UsageError(f"{key}: expected a number, got {value!r}") from None
    if "boolean" in kinds:
        if value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        raise UsageError(f"{key}: expected true or false, got {value!r}")
    if kinds & {"object", "array"}:
        try:
            return json.loads(value)
        except ValueError:
            raise UsageError(f"{key}: expected JSON, got {value!r}") from None
    return value  # not in the schema: the server says what it wants
