"""How Redis failures reach the rest of mcpq: as :class:`StoreUnavailable` (HTTP 503).

A connection that fails or times out, and the replies that say "not now" (out of memory under
``noeviction``, still loading the AOF after a restart, a read-only replica, a busy script) all
mean the store cannot serve this call; anything else is a bug and propagates as it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis.exceptions as rexc

from mcpq.shared.errors import INTERNAL_ERROR, McpError, StoreUnavailable


class NotReplicated(StoreUnavailable):
    """The primary made a write that fewer than ``MCPQ_REDIS_MIN_REPLICAS`` replicas confirmed
    within ``MCPQ_REDIS_REPLICA_WAIT_MS``: a failover now could lose it, so the client is not
    told it succeeded. HTTP 503 (with ``Retry-After``, as every 503): retry."""

    def __init__(self, required: int, replicas: int) -> None:
        data = {"requiredReplicas": required, "replicas": replicas}
        McpError.__init__(self, INTERNAL_ERROR, "not replicated", data, http_status=503)
        #: The script's own reply, as parsed: what it did on the primary.
        self.result: object = None


_NOT_NOW = (
    "OOM",
    "LOADING",
    "READONLY",
    "MASTERDOWN",
    "BUSY",
    "TRYAGAIN",
    "CLUSTERDOWN",
    "NOREPLICAS",  # min-replicas-to-write: the primary has too few replicas right now
    # A replicated write's WAIT on an instance a failover has just made a replica (its script
    # ran there while it was still the primary; the write will not survive the resync).
    "WAIT cannot be used with replica instances",
)


#: uvloop's message for a write on a closed transport (``UVHandle._ensure_alive``).
_CLOSED_TRANSPORT = "the handler is closed"

#: redis-py's asyncio functions that write a command on a connection's stream, and their module.
_SENDS = frozenset({"send_packed_command", "_send_packed_command"})
_REDIS_CONNECTION = "/redis/asyncio/connection.py"


def _closed_while_sending(exc: BaseException) -> bool:
    """An ``AttributeError``/``TypeError`` raised while redis-py's asyncio client wrote a command:
    the connection was closed under it (its stream is ``None``, or the transport's callbacks are
    gone). redis-py lets these escape instead of a ``ConnectionError`` (redis/redis-py#3546,
    #4287). Told apart from a bug by where it was raised: inside redis-py's send path."""
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name in _SENDS and code.co_filename.endswith(_REDIS_CONNECTION):
            return True
        tb = tb.tb_next
    return False


@contextmanager
def store_errors() -> Iterator[None]:
    """Redis failures raised in the block become :class:`StoreUnavailable`
    (:func:`as_store_error`); anything else propagates as it is."""
    try:
        yield
    except Exception as exc:
        translated = as_store_error(exc)
        if translated is exc:
            raise
        raise translated from exc


def as_store_error(exc: Exception) -> Exception:
    """``exc`` as the rest of mcpq is to see it: a :class:`StoreUnavailable` caused by it when
    it means Redis cannot serve this call now, else ``exc`` itself (a bug: it stays loud)."""
    if isinstance(exc, rexc.ConnectionError | rexc.TimeoutError | OSError):
        return _unavailable(exc)
    if isinstance(exc, RuntimeError):
        # uvloop raises RuntimeError, not a ConnectionError, when a write meets a connection
        # that another task closed a moment before: redis-py's cluster client closes a failed
        # node's connections while other requests still hold them (a primary's failover). That
        # is the connection failing: the client gets a 503 and tries again, not an error 500.
        return _unavailable(exc) if _CLOSED_TRANSPORT in str(exc) else exc
    if isinstance(exc, AttributeError | TypeError):
        # The same race without uvloop's check: the other task's disconnect has already set the
        # connection's stream to None (``'NoneType' object has no attribute 'writelines'``,
        # seen in a cluster failover test) or torn down the transport. A 503 too.
        return _unavailable(exc) if _closed_while_sending(exc) else exc
    if isinstance(exc, rexc.ResponseError):
        # A script that failed for our own reasons (a bug) must stay loud; only replies that
        # mean "try again later" become a 503.
        return _unavailable(exc) if str(exc).startswith(_NOT_NOW) else exc
    return exc


def _unavailable(cause: Exception) -> StoreUnavailable:
    unavailable = StoreUnavailable()
    unavailable.__cause__ = cause  # as ``raise ... from cause`` (the context is not shown)
    return unavailable
