"""The official MCP conformance suite (``@modelcontextprotocol/conformance``, ``tasks-*``
scenarios) against a real stack: redis-server, one web process, one Celery worker.

``mcpq.ops.harness.conformance_runner.run_conformance`` installs Node 22 and the suite into
``.cache/conformance`` (or ``$MCPQ_CONFORMANCE_DIR``) with npm on first use, then runs every
scenario. The project's bar is 44 passed and 0 failed (the notifications scenario is skipped by
the suite itself).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpq.ops.harness.conformance_runner import ConformanceSummary, run_conformance
from mcpq.ops.harness.stack import Stack
from mcpq.shared.settings import DEFAULT_TOOLS
from tests.support.stacks import LiveStack

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(240)]

EXPECTED_PASSED = 44


@pytest.fixture(scope="module")
def conformance_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("conformance-stack")
    stack = LiveStack("conformance", workdir, tools=DEFAULT_TOOLS).start(webs=1, workers=1)
    yield stack
    stack.close()


def _describe(summary: ConformanceSummary) -> str:
    lines = [
        f"conformance: {summary.passed} passed, {summary.failed} failed, "
        f"{summary.skipped} skipped, {summary.warnings} warnings, {summary.info} info"
    ]
    for scenario, counts in summary.per_scenario.items():
        lines.append(f"  {scenario}: " + ", ".join(f"{n} {k}" for k, n in counts.items() if n))
    for item in summary.failures + summary.notes:
        lines.append(f"  {item.status} {item.scenario} {item.check_id}: {item.message[:300]}")
    return "\n".join(lines)


def test_official_conformance_suite(conformance_stack: Stack, tmp_path: Path) -> None:
    summary = run_conformance(conformance_stack.url(0), out_dir=tmp_path / "results")
    report = _describe(summary)
    print("\n" + report)
    assert summary.failed == 0, report
    assert summary.passed == EXPECTED_PASSED, report
