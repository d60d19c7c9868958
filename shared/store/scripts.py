"""The Lua scripts of the task store, loaded once from ``shared/store/lua``.

Each script is one edge of the task state machine, one fenced worker write, or the release of
a lock; its header documents its KEYS/ARGV/returns contract. ``_prelude.lua`` is prepended to
each, and ``_clock.lua`` (``now``: Redis's time, sent by the caller as the last ARGV, see
``mcpq.shared.store.clock``) to those that use ``now`` (:func:`uses_clock`). Only the task store
calls them.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

NAMES = (
    "create",
    "admit",
    "mark_enqueued",
    "claim",
    "renew",
    "report",
    "request_input",
    "answer",
    "park",
    "finish",
    "cancel",
    "release",
    "save_step",
    "begin_step",
    "lost_alone",
    "sweep",
    "unlock",
    "list_add",
    "read",
    "watch",
    "reseal",
    "set_level",
    "resource_subscribe",
    "resource_refresh",
    "resource_updated",
    "lists_changed",
)


@cache
def uses_clock(name: str) -> bool:
    """Whether script ``name`` needs ``now`` (its caller then appends it to ARGV)."""
    if name not in NAMES:
        raise KeyError(name)
    body = (resources.files("mcpq.shared.store") / "lua" / f"{name}.lua").read_text()
    code = re.sub(r"--[^\n]*", "", body)  # comments may say "now" without needing the clock
    return re.search(r"\bnow\b", code) is not None


@cache
def source(name: str) -> str:
    """The full source of script ``name``: the prelude, then the script."""
    folder = resources.files("mcpq.shared.store") / "lua"
    prelude = (folder / "_prelude.lua").read_text()
    if uses_clock(name):
        prelude = (folder / "_clock.lua").read_text() + prelude
    return prelude + "\n" + (folder / f"{name}.lua").read_text()
