"""The Lua scripts of the task store, loaded once from ``shared/store/lua``.

Each script is one edge of the task state machine, one fenced worker write, or the release of
a lock; its header documents its KEYS/ARGV/returns contract. ``_prelude.lua`` is prepended to
each. Only the task store calls them.
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
    "unlock",
    "list_add",
    "read",
)


@cache
def source(name: str) -> str:
    """The full source of script ``name``: the prelude, then the script."""
    if name not in NAMES:
        raise KeyError(name)
    folder = resources.files("shared.store") / "lua"
    prelude = (folder / "_prelude.lua").read_text()
    return prelude + "\n" + (folder / f"{name}.lua").read_text()
