"""Resources: what a server lets clients read (``resources/list``, ``resources/read``), declared
beside its tools as FastMCP and the MCP SDK do::

    @app.resource("shop://policy", mime_type="text/markdown")
    def policy() -> str:
        return POLICY

    @app.resource("shop://orders/{order_id}")     # a template (RFC 6570, one segment a variable)
    def order(order_id: int) -> dict[str, Any]: ...

A resource's function returns its contents: ``str`` (text), ``bytes`` (a blob), an
:class:`~mcpq.shared.content.EmbeddedResource` (either, with its own URI and MIME type), a list
of those, or any other JSON-ready value (sent as JSON text, ``application/json``). A template's
variables are its function's parameters, validated by their types like a tool's arguments: a
value that fails its type is ``-32602``, never a call of the function.

NOTE: a template variable (``{name}``) matches one path segment, percent-decoded; a value that
decodes to a ``/``, or is ``.`` or ``..``, does not match (``%2e%2e%2f`` is not a way out of a
folder): a file-backed resource gets a name, never a path.
"""

from __future__ import annotations

import base64
import inspect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypedDict, TypeVar, Unpack
from urllib.parse import unquote

import pydantic

from mcpq.shared import jsonutil
from mcpq.shared.content import EmbeddedResource
from mcpq.shared.tool_signature import (
    ToolDefinitionError,
    check_decorated,
    read_signature,
    refuse,
)

JsonObject = dict[str, Any]
F = TypeVar("F", bound=Callable[..., Any])
RESOURCE_MARK = "__mcpq_resource__"
_VARIABLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: What a completion provider is: the values to offer, or a function of the partial value (and
#: the other arguments already chosen) that returns them.
Completer = Iterable[str] | Callable[[str, dict[str, str]], Iterable[str]]


class TemplateArgumentsInvalid(ValueError):
    """A URI matched a template, but a variable failed its type (``-32602``)."""


@dataclass(frozen=True)
class Resource:
    """A static resource: one URI."""

    uri: str
    name: str
    fn: Callable[..., Any]
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    scopes: tuple[str, ...] = ()

    def listing(self) -> JsonObject:
        return _listing({"uri": self.uri}, self.name, self.title, self.description, self.mime_type)

    def call(self) -> Any:
        return self.fn()


@dataclass(frozen=True)
class ResourceTemplate:
    """A family of resources: a URI template whose variables are the function's parameters."""

    uri_template: str
    name: str
    fn: Callable[..., Any]
    args_model: type[pydantic.BaseModel]
    variables: tuple[str, ...]
    pattern: re.Pattern[str]
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    scopes: tuple[str, ...] = ()
    complete: dict[str, Completer] = field(default_factory=dict)

    def listing(self) -> JsonObject:
        fields = {"uriTemplate": self.uri_template}
        return _listing(fields, self.name, self.title, self.description, self.mime_type)

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of ``uri`` if it is one of this template's, percent-decoded."""
        found = self.pattern.fullmatch(uri)
        if found is None:
            return None
        values = {name: unquote(found.group(name)) for name in self.variables}
        if any("/" in v or v in {".", ".."} or not v for v in values.values()):
            return None  # a segment must stay a segment (see the module's note)
        return values

    def arguments(self, values: dict[str, str]) -> dict[str, Any]:
        """The function's arguments from a URI's variables, by their types;
        :class:`TemplateArgumentsInvalid` when one fails."""
        try:
            return dict(self.args_model.model_validate(values).__dict__)
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()
            )
            raise TemplateArgumentsInvalid(problems) from None


def _listing(
    fields: JsonObject, name: str, title: str | None, description: str | None, mime: str | None
) -> JsonObject:
    listing = {**fields, "name": name}
    if title:
        listing["title"] = title
    if description:
        listing["description"] = description
    if mime:
        listing["mimeType"] = mime
    return listing


def declare(
    fn: Callable[..., Any],
    uri: str,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
    scopes: Iterable[str] = (),
    complete: dict[str, Completer] | None = None,
) -> Resource | ResourceTemplate:
    """The resource (or template) ``fn`` serves at ``uri``; one line naming the fix when it
    cannot be one."""
    check_decorated(fn, name)
    if not isinstance(uri, str) or ":" not in uri:
        raise refuse(fn, f"@resource needs a URI with a scheme (e.g. 'shop://policy'), not {uri!r}")
    label = name or fn.__name__
    doc = description or inspect.getdoc(fn)
    variables = tuple(_VARIABLE.findall(uri))
    signature = read_signature(label, fn)
    if signature.context is not None:
        raise refuse(
            fn, f"resource {label!r}: a resource gets no context; drop {signature.context!r}"
        )
    params = tuple(signature.args_model.model_fields)
    if not variables:
        if "{" in uri or "}" in uri:
            raise refuse(fn, f"resource {uri!r}: only {{name}} variables are supported")
        if params:
            raise refuse(
                fn, f"resource {uri!r} has no {{variables}}, so its function takes no parameters"
            )
        return Resource(uri, label, fn, title, doc, mime_type, tuple(scopes))
    if set(variables) != set(params) or len(variables) != len(set(variables)):
        raise refuse(
            fn,
            f"resource template {uri!r}: its variables ({', '.join(variables)}) and the "
            f"function's parameters ({', '.join(params) or 'none'}) must be the same names",
        )
    unknown = set(complete or {}) - set(variables)
    if unknown:
        raise refuse(
            fn, f"resource template {uri!r}: complete= names no variable {sorted(unknown)}"
        )
    pattern = _pattern(uri)
    return ResourceTemplate(
        uri,
        label,
        fn,
        signature.args_model,
        variables,
        pattern,
        title,
        doc,
        mime_type,
        tuple(scopes),
        dict(complete or {}),
    )


def template_for(listing: JsonObject, fn: Callable[..., Any]) -> ResourceTemplate:
    """A template another server lists (``uriTemplate``, ``name``...), read by ``fn`` called
    with its variables as strings (``mcpq.shared.brought``). Only ``{name}`` variables, each one
    path segment, as ours: another form is refused (:class:`ToolDefinitionError`)."""
    uri = str(listing["uriTemplate"])
    variables = tuple(_VARIABLE.findall(uri))
    if _VARIABLE.sub("", uri).count("{") or _VARIABLE.sub("", uri).count("}"):
        raise ToolDefinitionError(
            f"resource template {uri!r}: only {{name}} variables, one path segment each, can be "
            "served ({path*}, {?query} and the other RFC 6570 forms cannot)"
        )
    fields: dict[str, Any] = {name: (str, ...) for name in variables}
    model = pydantic.create_model(f"{listing.get('name', 'template')}_variables", **fields)
    return ResourceTemplate(
        uri,
        str(listing.get("name") or uri),
        fn,
        model,
        variables,
        _pattern(uri),
        listing.get("title"),
        listing.get("description"),
        listing.get("mimeType"),
    )


def _pattern(template: str) -> re.Pattern[str]:
    parts, last = [], 0
    for found in _VARIABLE.finditer(template):
        parts.append(re.escape(template[last : found.start()]))
        parts.append(f"(?P<{found.group(1)}>[^/?#]+)")
        last = found.end()
    parts.append(re.escape(template[last:]))
    return re.compile("".join(parts))


class ResourceNotFound(LookupError):
    """No resource or template of the app serves this URI."""


def read(
    found: tuple[Resource | ResourceTemplate, dict[str, str]] | None, uri: str
) -> list[JsonObject]:
    """Read a resource in this process (a tool's ``ctx.read_resource``): what ``resources/read``
    would answer, without the web's bounds (it is the server's own code, on the tool's run)."""
    if found is None:
        raise ResourceNotFound(uri)
    spec, values = found
    arguments = spec.arguments(values) if isinstance(spec, ResourceTemplate) else {}
    return contents(uri, spec.fn(**arguments), spec.mime_type)


def contents(uri: str, value: Any, mime_type: str | None) -> list[JsonObject]:
    """A read's ``contents``: what the function returned, as resource contents objects."""
    items = value if isinstance(value, list) and all(_is_item(v) for v in value) else [value]
    return [_one(uri, item, mime_type) for item in items]


def _is_item(value: Any) -> bool:
    return isinstance(value, str | bytes | EmbeddedResource)


def _one(uri: str, value: Any, mime_type: str | None) -> JsonObject:
    if isinstance(value, EmbeddedResource):
        return value.contents()
    entry: JsonObject = {"uri": uri}
    if isinstance(value, str):
        entry["mimeType"] = mime_type or "text/plain"
        entry["text"] = value
    elif isinstance(value, bytes):
        entry["mimeType"] = mime_type or "application/octet-stream"
        entry["blob"] = base64.b64encode(value).decode("ascii")
    else:
        entry["mimeType"] = mime_type or "application/json"
        entry["text"] = jsonutil.dumps(pydantic.TypeAdapter(Any).dump_python(value, mode="json"))
    return entry


class ResourceOptions(TypedDict, total=False):
    """What ``@resource(uri, ...)`` and ``@app.resource(uri, ...)`` take besides the URI."""

    name: str | None
    title: str | None
    description: str | None
    mime_type: str | None
    scopes: Iterable[str]
    complete: dict[str, Completer] | None


def resource(uri: str, **options: Unpack[ResourceOptions]) -> Callable[[F], F]:
    """Declare a function the resource (or, with ``{variables}``, the template) at ``uri``.
    Served where its module is loaded (``MCPQ_TOOLS``), like a ``@tool``."""

    def mark(fn: F) -> F:
        spec = declare(fn, uri, **options)
        setattr(fn, RESOURCE_MARK, spec)
        return fn

    return mark
