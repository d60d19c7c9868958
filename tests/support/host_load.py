"""Latency targets on a shared host: the target itself on an idle machine, stretched by how
oversubscribed its CPUs are at the moment (the whole suite runs six workers on two cores, and a
process restart then takes three times as long). A test that holds a target this way still
fails when the thing never happens or is slow on an idle host."""

from __future__ import annotations

import os


def contention() -> float:
    """The one-minute load average per core, at least 1."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def scaled_s(target_s: float) -> float:
    """``target_s`` times :func:`contention`."""
    return target_s * contention()
