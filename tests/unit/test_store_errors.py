"""Redis failures that mean "not now" become StoreUnavailable (HTTP 503); bugs propagate."""

import asyncio

import pytest
import redis.asyncio as aioredis
import redis.exceptions as rexc

from mcpq.shared.errors import StoreUnavailable
from mcpq.shared.store.redis_errors import store_errors
from tests.support.redis_server import redis_server


@pytest.mark.parametrize(
    "exc",
    [
        rexc.ConnectionError("refused"),
        rexc.TimeoutError("slow"),
        ConnectionResetError("reset"),
        rexc.ResponseError("OOM command not allowed when used memory > 'maxmemory'."),
        rexc.ResponseError("LOADING Redis is loading the dataset in memory"),
        rexc.ResponseError("READONLY You can't write against a read only replica."),
        # a replicated write's WAIT on a primary a Sentinel failover had just demoted
        rexc.ResponseError(
            "WAIT cannot be used with replica instances. Please also note that since Redis 4.0 "
            "if a replica is configured to be writable (which is not the default) writes to "
            "replicas are just local and are not propagated."
        ),
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


def test_a_write_on_a_connection_closed_under_it_is_unavailable() -> None:
    """redis-py's race, reproduced: one task writes a command while another closes the
    connection (as its cluster client does to a failed node's connections in a failover). The
    write meets a stream of None and raises AttributeError; the client must get a 503."""

    async def race(port: int) -> None:
        conn = aioredis.Connection(host="127.0.0.1", port=port, socket_timeout=5)
        await conn.connect()
        try:
            with store_errors():
                # wait_for runs the write in a task of its own: the disconnect gets in first
                await asyncio.gather(
                    conn.send_packed_command(b"*1\r\n$4\r\nPING\r\n", check_health=False),
                    conn.disconnect(nowait=True),
                )
        finally:
            await conn.disconnect()

    with redis_server() as server, pytest.raises(StoreUnavailable) as raised:
        asyncio.run(race(server.port))
    cause = raised.value.__cause__
    assert isinstance(cause, AttributeError | TypeError), repr(cause)


def test_attribute_errors_elsewhere_are_bugs_and_propagate() -> None:
    with pytest.raises(AttributeError), store_errors():
        None.writelines  # type: ignore[attr-defined]  # noqa: B018  (raised here, not in redis-py)
    with pytest.raises(TypeError), store_errors():
        len(3)  # type: ignore[arg-type]
