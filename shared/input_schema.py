"""A tool's own JSON Schema for its arguments (``@tool(input_schema=...)``).

By default a tool's ``inputSchema`` is built from its signature by pydantic. A signature cannot say
everything JSON Schema 2020-12 can (``allOf``/``anyOf`` across arguments, ``if``/``then``/``else``,
``$schema``, ``$anchor``), so a tool may declare the schema itself, as the MCP SDKs' low-level
servers do. Then:

- ``tools/list`` advertises that schema exactly as written (SEP-1613, SEP-2106: every keyword
  kept);
- a call's arguments are checked against it (the ``jsonschema`` library, draft 2020-12) and then
  by the signature's types, so the function still gets typed values;
- it is checked once, at declaration: a valid 2020-12 schema, of ``type: object``, whose
  properties are all parameters of the function, with no ``$ref`` outside the document. SEP-2106
  forbids dereferencing a network ``$ref``, and ``jsonschema`` would fetch one when no registry
  is given: an empty registry is given, and such a ``$ref`` is refused up front.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match
from referencing import Registry

JsonObject = dict[str, Any]


class InputSchemaError(ValueError):
    """What is wrong with a declared input schema, in one line (the declaration is refused)."""


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


class InputSchema:
    """A declared schema: what ``tools/list`` shows, and the check of a call's arguments."""

    def __init__(self, schema: JsonObject, parameters: set[str]) -> None:
        if not isinstance(schema, dict):
            raise InputSchemaError(f"input_schema must be a JSON object (a dict), not {schema!r}")
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            where = "/".join(map(str, exc.absolute_path)) or "the top"
            raise InputSchemaError(
                f"input_schema is not a valid JSON Schema 2020-12 (at {where}: {exc.message})"
            ) from None
        if schema.get("type") != "object":
            raise InputSchemaError('input_schema must have "type": "object" (MCP tool arguments)')
        outside = sorted({r for r in _refs(schema) if not r.startswith("#")})
        if outside:
            raise InputSchemaError(
                f"input_schema $ref {outside[0]!r} points outside the schema: MCP forbids "
                "fetching it (SEP-2106); put the definition under $defs and use '#/$defs/...'"
            )
        properties = schema.get("properties") or {}
        unknown = sorted(set(properties) - parameters)
        if unknown:
            raise InputSchemaError(
                f"input_schema property {unknown[0]!r} is not a parameter of the function: "
                "add the parameter or drop the property"
            )
        self._schema = copy.deepcopy(schema)
        # An empty registry: same-document references resolve, nothing is ever retrieved.
        self._validator = Draft202012Validator(self._schema, registry=Registry())

    @property
    def advertised(self) -> JsonObject:
        """The schema as written (a copy: a listing may be changed by its reader)."""
        return copy.deepcopy(self._schema)

    def problem(self, arguments: JsonObject) -> str | None:
        """Why ``arguments`` fail the schema (the most relevant error), or ``None``."""
        error = best_match(self._validator.iter_errors(arguments))
        if error is None:
            return None
        where = ".".join(map(str, error.absolute_path)) or "arguments"
        return f"{where}: {error.message}"
