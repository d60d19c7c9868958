"""The one rule for blocking Redis reads (BLPOP and kin): never send a timeout Redis reads as
"block forever".

Redis takes a BLPOP timeout in seconds, and ``0`` means forever. Redis 6.2 converts the seconds to
whole milliseconds by truncating a long double: ``0.001`` becomes ``0.99999…`` ms, truncated to
``0``, i.e. forever (so does anything below 1 ms). Redis 7 returns at once for the same values.
A loop that waits "until the deadline" in slices hands Redis such a sliver near its deadline, and
on 6.2 that wait never returns. Every blocking wait in mcpq goes through :func:`block_timeout`.
"""

from __future__ import annotations

import math

MIN_BLOCK_MS = 2
"""The smallest timeout sent. 2 ms survives 6.2's truncation (``0.002`` reads as 1 ms or 2 ms);
Redis 6.2 then returns within its timer resolution (about 100 ms at ``hz 10``)."""


def block_timeout(seconds: float) -> float | None:
    """The timeout to send for a wait of ``seconds``, or ``None`` when there is nothing left to
    wait for (the caller returns at once instead of asking Redis).

    Positive values are rounded up to whole milliseconds and to at least :data:`MIN_BLOCK_MS`,
    so the result is never 0 and never below what Redis 6.2 truncates to 0. ``0`` ("forever")
    is never produced: a caller that means forever must say so itself.
    """
    if not seconds > 0:  # also catches NaN
        return None
    if math.isinf(seconds):
        raise ValueError("an infinite wait must be asked for explicitly, not as a timeout")
    return max(math.ceil(seconds * 1000), MIN_BLOCK_MS) / 1000
