"""Test-only tools of the multi-host tests, loaded by their workers through ``MCPQ_TOOLS``
(``tests.multihost.tools_multihost``). Like any tool module it imports only ``shared``.

Each worker process is started with ``MULTIHOST_HOST`` naming its host, and the tools write that
name into what they leave behind, so a test sees *which host* did what:

- ``calls``: a line ``call <host>`` each time the tool body starts (once per run);
- ``path``: a line ``effect <host>`` each time the memoized step's function runs: the side
  effect that must happen exactly once per task whatever happens to hosts and links;
- the status messages and the result name the host that wrote them, so a refused (fenced) write
  of a stale run can never be mistaken for the live run's.

Every host shares the filesystem (only the network is separate), so the test reads the files
directly. Lines are short single ``write`` calls on a file opened for append: concurrent writers
never interleave.
"""

from __future__ import annotations

import os
import time

from mcpq import ToolContext, tool

HOST_ENV = "MULTIHOST_HOST"


def host() -> str:
    return os.environ.get(HOST_ENV, "?")


def append_line(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


@tool(
    task="optional",
    description=(
        "Test-only: a memoized step appends `effect <host>` to `path`, then the tool waits "
        "`seconds`: in ctx.sleep (a tool waiting on its context), or with `own_work` in its own "
        "code (an external call: no Redis traffic until it returns), then reports again."
    ),
)
def mh_effect(
    ctx: ToolContext, path: str, calls: str, seconds: float = 3.0, own_work: bool = False
) -> str:
    append_line(calls, f"call {host()}")
    ctx.step("effect", lambda: append_line(path, f"effect {host()}"))
    ctx.report(f"stepped on {host()}")
    if own_work:
        time.sleep(seconds)
    else:
        ctx.sleep(seconds)
    ctx.report(f"worked on {host()}")
    return f"done on {host()}"


@tool(
    task="optional",
    description="Test-only: reports `1/n` ... `n/n`, `interval` seconds apart.",
)
def mh_count(ctx: ToolContext, n: int = 8, interval: float = 0.3) -> str:
    for i in range(1, n + 1):
        ctx.report(f"{i}/{n}")
        ctx.sleep(interval)
    return f"counted to {n}"
