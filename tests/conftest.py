"""Shared by every test directory.

- Puts the repository root on ``sys.path``: ``tests`` has no ``__init__.py``, so pytest's default
  (prepend) import mode only adds each test file's own directory, and ``tests.support`` would
  not be importable.
- The report header names the redis-server binaries the tests start, with their versions.
- When a test fails while process stacks (``tests.support.stacks.LiveStack``) are running, the
  tails of their process logs are attached to the failure report.
- The suite runs in parallel, its tests that share a stack on one worker, the longest first;
  the unit tests and the store's scripts are the ``quick`` tier (``tests.support.parallel``).
"""

from __future__ import annotations

import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.support import parallel  # noqa: E402 (needs the path above)


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Which Redis the tests start: the stacks use the preferred one; the store's integration
    tests run on both versions."""
    from tests.support.redis_server import choose_redis_server, redis_servers_to_test

    try:
        lines = [f"redis (stacks): {choose_redis_server().describe()}"]
    except Exception as exc:
        lines = [f"redis (stacks): none ({exc})"]
    for name, binary in redis_servers_to_test().items():
        lines.append(f"redis ({name} store tests): {binary.describe() if binary else 'none'}")
    return lines


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    parallel.choose_workers(config)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    parallel.tell_worker(node)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    return parallel.make_scheduler(config, log)


def pytest_sessionstart(session: pytest.Session) -> None:
    parallel.start_clock(session.config)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    # Every phase's report (passed setups and teardowns are filed under ""), not warnings.
    reports = [r for kept in terminalreporter.stats.values() for r in kept if hasattr(r, "when")]
    lines = parallel.budget_lines(config, reports)
    if lines:
        terminalreporter.write_sep("-", "suite budget")
        for line in lines:
            terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    parallel.forget_units(config)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    return True if parallel.outside_the_quick_tier(collection_path, config) else None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> Generator[None]:
    """The ``quick`` mark first (``-m quick`` deselects by it); then, in an xdist worker, the
    tests in their units (groups), the longest first, told to the scheduler."""
    groups = parallel.group_names(items)
    unit_of = {id(item): groups.get(item.nodeid, item.nodeid) for item in items}
    for item in items:
        if parallel.is_quick(item):
            item.add_marker(pytest.mark.quick)
    yield
    if parallel.is_worker(config):
        items[:] = parallel.longest_first(items, unit_of)
        parallel.publish_units(config, items, unit_of)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[Any]
) -> Generator[None, Any, Any]:
    report = yield
    stacks = sys.modules.get("tests.support.stacks")
    if stacks is not None and report.failed:
        for stack in stacks.live_stacks():
            report.sections.append((f"process logs: {stack.name}", stack.tails()))
    return report
