"""The Lua scripts of the task store, loaded once from ``shared/store/lua``.

Each script is one edge of the task state machine, one fenced worker write, or the release of
a lock; its header documents its KEYS/ARGV/returns contract. ``_prelude.lua`` is prepended to
each, and ``_clock.lua`` (Redis's ``TIME`` as ``now``) to those that use ``now``. Only the task
store calls them.
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
    "sweep",
    "unlock",
    "list_add",
    "read",
    "reseal",
)


@cache
def source(name: str) -> str:
    """The full source of script ``name``: the prelude, then the script."""
    if name not in NAMES:
        raise KeyError(name)
    folder = resources.files("shared.store") / "lua"
    prelude = (folder / "_prelude.lua").read_text()
    body = (folder / f"{name}.lua").read_text()
    code = re.sub(r"--[^\n]*", "", body)  # comments may say "now" without needing the clock
    if re.search(r"\bnow\b", code):
        prelude = (folder / "_clock.lua").read_text() + prelude
    return prelude + "\n" + body
