"""Content a tool, a prompt or a resource gives back beyond plain text: images, audio and
embedded resources, as FastMCP's ``Image``/``Audio`` and the MCP SDK's content types are used.

::

    from mcpq import Image

    @app.tool
    def chart() -> Image:
        return Image(data=png_bytes, mime_type="image/png")

A tool may return one of these, or a list mixing them with strings (each string a text block);
a prompt's message may hold one. Each becomes its MCP content block (``{"type": "image",
"data": <base64>, "mimeType": ...}``), so nothing here is sent as Python objects: the worker
stores the block (JSON), and the web tier serves it.
"""

from __future__ import annotations

import base64
import mimetypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JsonObject = dict[str, Any]


def _base64(data: bytes | str) -> str:
    """``data`` as base64 text: bytes are encoded; a string is taken as base64 already."""
    if isinstance(data, str):
        return data
    return base64.b64encode(data).decode("ascii")


def _media(
    data: bytes | str | None, path: str | Path | None, mime_type: str | None
) -> tuple[str, str]:
    if (data is None) == (path is None):
        raise TypeError("give the content as data= (bytes, or base64 text) or path=, once")
    if path is not None:
        file = Path(path)
        guessed = mimetypes.guess_type(file.name)[0]
        return _base64(file.read_bytes()), mime_type or guessed or "application/octet-stream"
    assert data is not None
    if mime_type is None:
        raise TypeError("data= needs its mime_type= (e.g. 'image/png')")
    return _base64(data), mime_type


@dataclass(frozen=True, init=False)
class _Media:
    """Base64 data and its MIME type: from bytes (or base64 text) with ``mime_type=``, or read
    from ``path=`` (its type guessed from the name unless given)."""

    data: str  # base64
    mime_type: str

    def __init__(
        self,
        data: bytes | str | None = None,
        *,
        path: str | Path | None = None,
        mime_type: str | None = None,
    ) -> None:
        encoded, mime = _media(data, path, mime_type)
        object.__setattr__(self, "data", encoded)
        object.__setattr__(self, "mime_type", mime)


class Image(_Media):
    """An image content block."""

    def block(self) -> JsonObject:
        return {"type": "image", "data": self.data, "mimeType": self.mime_type}


class Audio(_Media):
    """An audio content block."""

    def block(self) -> JsonObject:
        return {"type": "audio", "data": self.data, "mimeType": self.mime_type}


@dataclass(frozen=True)
class EmbeddedResource:
    """A resource embedded in a result or a prompt message: its URI and its text or its bytes."""

    uri: str
    text: str | None = None
    blob: bytes | None = None
    mime_type: str | None = None

    def __post_init__(self) -> None:
        if (self.text is None) == (self.blob is None):
            raise TypeError("EmbeddedResource: give its text= or its blob=, once")

    def contents(self) -> JsonObject:
        """The ``TextResourceContents`` / ``BlobResourceContents`` object."""
        contents: JsonObject = {"uri": self.uri}
        if self.mime_type is not None:
            contents["mimeType"] = self.mime_type
        if self.text is not None:
            contents["text"] = self.text
        else:
            assert self.blob is not None
            contents["blob"] = _base64(self.blob)
        return contents

    def block(self) -> JsonObject:
        return {"type": "resource", "resource": self.contents()}


Content = Image | Audio | EmbeddedResource


def block(item: Any) -> JsonObject:
    """One content block: a string is text; a helper its block; a dict taken as a block."""
    if isinstance(item, str):
        return {"type": "text", "text": item}
    if isinstance(item, Image | Audio | EmbeddedResource):
        return item.block()
    if isinstance(item, dict) and isinstance(item.get("type"), str):
        return item
    raise TypeError(f"not a content block: {type(item).__name__}")


def is_content(value: Any) -> bool:
    """``value`` is content (a helper, or a list of strings and helpers) rather than data."""
    if isinstance(value, Image | Audio | EmbeddedResource):
        return True
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, str | Image | Audio | EmbeddedResource) for v in value)
        and any(not isinstance(v, str) for v in value)
    )
