"""How a run is interrupted from inside its context: the exceptions ``RunContext`` raises to end
a run early. BaseExceptions, so ``except Exception`` in a tool cannot swallow them."""

from __future__ import annotations

from mcpq.shared.errors import TaskCancelled
from mcpq.shared.store import Reply


class RunParked(BaseException):
    """The run stopped waiting for input: the job ends, the task stays input_required."""


class RunSuperseded(BaseException):
    """A newer run (higher generation) owns the task, or the task is gone: stop quietly."""


def raise_for(reply: Reply) -> None:
    """Turn the fence's refusal of a write into the matching control-flow exception: the task
    ended (for a running tool that can only be a cancel), or this run lost it."""
    if reply is Reply.TERMINAL:
        raise TaskCancelled()
    if reply in {Reply.GONE, Reply.SUPERSEDED}:
        raise RunSuperseded()
    raise RuntimeError(f"unexpected reply from the store: {reply}")
