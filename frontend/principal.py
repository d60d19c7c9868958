"""Who is calling: the owner every task is bound to, and the scopes the caller was granted."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Principal:
    """``id`` is the owner stored with every task and compared by the store's scripts:
    ``oauth:<hash of iss and sub>``, ``key:<key id>``, or ``anonymous`` when authentication is
    off. ``scopes`` ``None`` means unrestricted (authentication off)."""

    id: str
    scopes: frozenset[str] | None = None

    def missing(self, needed: Iterable[str]) -> list[str]:
        """The scopes of ``needed`` this principal was not granted, in order."""
        if self.scopes is None:
            return []
        return [scope for scope in needed if scope not in self.scopes]


ANONYMOUS = Principal("anonymous")
