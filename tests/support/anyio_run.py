"""Running an MCP SDK client's ``async`` main in a test: ``anyio.run``, with the one exception a
failure raised taken out of the task groups' wrappers, so the test shows it, not a group."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator

import anyio


def run(main: Callable[[], Awaitable[None]]) -> None:
    """``anyio.run``, re-raising a lone exception out of the task-group wrappers."""
    try:
        anyio.run(main)
    except BaseExceptionGroup as group:
        leaves = list(_leaves(group))
        if len(leaves) == 1:
            raise leaves[0] from None
        raise


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc
