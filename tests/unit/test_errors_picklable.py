"""mcpq's exceptions survive pickling, whatever their ``__init__`` takes.

Celery pickles what a task raised; an exception that does not survive that is logged as an
``UnpickleableExceptionWrapper(...)`` instead of itself (``StoreUnavailable()`` takes no
argument, so ``StoreUnavailable(*args)`` failed), once per run a Redis outage stopped.
"""

from __future__ import annotations

import pickle

import pytest
from celery.utils.serialization import get_pickleable_exception

from mcpq.shared.errors import (
    McpError,
    ProtocolError,
    StoreUnavailable,
    TaskLost,
    TaskNotFound,
    ToolError,
)
from mcpq.shared.store.payloads import UnreadablePayload
from mcpq.shared.store.redis_errors import NotReplicated

CASES = [
    McpError(-32000, "custom", {"why": 1}, http_status=503, headers={"Retry-After": "1"}),
    TaskNotFound(),
    TaskLost(),
    StoreUnavailable(),
    NotReplicated(2, 1),
    UnreadablePayload(),
    ProtocolError(-32602, "bad", {"field": "x"}),
    ToolError("the tool's own words"),
]


@pytest.mark.parametrize("error", CASES, ids=lambda e: type(e).__name__)
def test_an_error_pickles_to_an_equal_one(error: Exception) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert copy.args == error.args
    assert vars(copy) == vars(error)
    assert str(copy) == str(error)


def test_celery_keeps_a_store_error_as_it_is() -> None:
    kept = get_pickleable_exception(StoreUnavailable())
    assert isinstance(kept, StoreUnavailable)
    assert repr(kept) == "StoreUnavailable('task store unavailable')"
