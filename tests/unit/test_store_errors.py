"""Redis failures that mean "not now" become StoreUnavailable (HTTP 503); bugs propagate."""

import pytest
import redis.exceptions as rexc

from shared.errors import StoreUnavailable
from shared.store.errors import store_errors


@pytest.mark.parametrize(
    "exc",
    [
        rexc.ConnectionError("refused"),
        rexc.TimeoutError("slow"),
        ConnectionResetError("reset"),
        rexc.ResponseError("OOM command not allowed when used memory > 'maxmemory'."),
        rexc.ResponseError("LOADING Redis is loading the dataset in memory"),
        rexc.ResponseError("READONLY You can't write against a read only replica."),
        # uvloop, writing on a connection another request just closed (a cluster failover)
        RuntimeError(
            "unable to perform operation on <TCPTransport closed=True reading=False "
            "0x558475e9af10>; the handler is closed"
        ),
    ],
)
def test_unavailable_store_errors(exc: Exception) -> None:
    with pytest.raises(StoreUnavailable) as raised, store_errors():
        raise exc
    assert raised.value.http_status == 503
    assert raised.value.message == "task store unavailable"


def test_other_redis_errors_are_bugs_and_propagate() -> None:
    with pytest.raises(rexc.ResponseError), store_errors():
        raise rexc.ResponseError("ERR wrong number of arguments for 'hset' command")
    with pytest.raises(RuntimeError), store_errors():
        raise RuntimeError("dictionary changed size during iteration")
