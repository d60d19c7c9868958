"""A tool's async HTTP calls through httpx do not walk ``sys.path`` on every request: httpcore 1.0
imports ``sniffio`` each time it makes a lock, and a failed import is tried again every time
(encode/httpcore#1103). anyio no longer brings sniffio, so mcpq depends on it itself."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import httpcore


def test_httpcore_finds_sniffio_without_an_import_each_time(monkeypatch: Any) -> None:
    searched: list[str] = []

    class Spy:
        def find_spec(self, name: str, *_: Any) -> None:
            searched.append(name)
            return None

    async def detect() -> str:
        return str(httpcore._synchronization.current_async_library())

    assert asyncio.run(detect()) == "asyncio"  # (first: sniffio imported once, if at all)
    monkeypatch.setattr(sys, "meta_path", [Spy(), *sys.meta_path])
    for _ in range(3):
        assert asyncio.run(detect()) == "asyncio"
    assert "sniffio" not in searched  # found in sys.modules: no search of the path
