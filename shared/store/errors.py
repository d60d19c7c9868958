"""How Redis failures reach the rest of mcpq: as :class:`StoreUnavailable` (HTTP 503).

A connection that fails or times out, and the replies that say "not now" (out of memory under
``noeviction``, still loading the AOF after a restart, a read-only replica, a busy script) all
mean the store cannot serve this call; anything else is a bug and propagates as it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis.exceptions as rexc

from shared.errors import StoreUnavailable

_NOT_NOW = ("OOM", "LOADING", "READONLY", "MASTERDOWN", "BUSY", "TRYAGAIN", "CLUSTERDOWN")


@contextmanager
def store_errors() -> Iterator[None]:
    try:
        yield
    except (rexc.ConnectionError, rexc.TimeoutError, OSError) as exc:
        raise StoreUnavailable() from exc
    except rexc.ResponseError as exc:
        # A script that failed for our own reasons (a bug) must stay loud; only replies that
        # mean "try again later" become a 503.
        if str(exc).startswith(_NOT_NOW):
            raise StoreUnavailable() from exc
        raise
