"""How a run is interrupted from inside its context: the exceptions ``RunContext`` raises to end
a run early. BaseExceptions, so ``except Exception`` in a tool cannot swallow them."""

from __future__ import annotations


class RunParked(BaseException):
    """The run stopped waiting for input: the job ends, the task stays input_required."""


class RunSuperseded(BaseException):
    """A newer run (higher generation) owns the task, or the task is gone: stop quietly."""
