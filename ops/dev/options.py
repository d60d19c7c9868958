"""What `mcpq dev` was asked to run (its command-line flags)."""

from __future__ import annotations

from dataclasses import dataclass

from mcpq.ops.runtime import commands


@dataclass(frozen=True)
class DevOptions:
    """What `mcpq dev` was asked to run."""

    port: int = 8000
    worker: bool = True
    flower: bool = False
    flower_port: int = commands.DEFAULT_FLOWER_PORT
    verbose: bool = False
    #: Restart web and workers when a Python file of the project changes (``--reload``).
    reload: bool = False
