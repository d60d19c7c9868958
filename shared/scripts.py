"""The Lua scripts of the task store, loaded once from ``shared/lua``.

Each script is one edge of the task state machine (or one fenced worker write); its header
documents its KEYS/ARGV/returns contract. ``_prelude.lua`` is prepended to each. Only the task
store calls them.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

NAMES = (
    "create",
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
    "sweep",
)


@cache
def source(name: str) -> str:
    """The full source of script ``name``: the prelude, then the script."""
    if name not in NAMES:
        raise KeyError(name)
    folder = resources.files("shared") / "lua"
    prelude = (folder / "_prelude.lua").read_text()
    return prelude + "\n" + (folder / f"{name}.lua").read_text()
