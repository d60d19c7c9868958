"""How the suite runs in parallel (pytest-xdist), which tests share a worker, and the quick tier.

The hooks that use this live in ``tests/conftest.py``; here is what they decide.

- **Workers.** A run of the whole suite (``pytest``: no paths given) runs on
  :data:`DEFAULT_WORKERS` xdist workers, more than this machine's two cores, because most of
  the suite waits on its stacks (leases expiring, sweeps, workers starting); ``pytest -m quick``
  on :data:`QUICK_WORKERS`. ``-n N`` chooses; ``-n 0`` or ``-p no:xdist`` runs serially; a run
  of chosen paths stays serial unless ``-n`` is given (its ``-s`` output shows). Every stack
  starts its own redis-server on free ports and, on RabbitMQ, its own vhost
  (``tests.support.stacks``), so workers never share a server's state.
- **Groups.** Session and module fixtures are set up once per *worker*: a test that uses one
  of the suite's shared fixtures (any fixture of the test tree whose scope is wider than a
  test, but those of :data:`PER_WORKER_FIXTURES`) belongs to the group of that
  fixture, and a group runs on one worker, its tests one after another in pytest's order, on
  one stack (or one Redis, for a module of store tests). A fixture with parameters (the e2e
  stack on each pool and broker) is one group per parameter set; tests that share two such
  fixtures join their groups into one; an ``xdist_group`` mark names a group too.
- **Order.** :class:`GroupScheduling` hands out one group, or one ungrouped test, at a time, in
  the order of the collection, which is longest first (:func:`estimated_s`): the end of the
  run is not one long group started last while the other workers are idle.
- **quick.** The unit tests and the store's scripts on a real Redis
  (``tests/integration/test_store_*.py``) are marked ``quick``: ``pytest -m quick``.
- **Budget.** A run of the whole suite ends with its wall time against :data:`BUDGET_S` and its
  longest units (:func:`budget_lines`), so that a change that costs the suite shows where.

NOTE(xdist): xdist's own ``loadgroup`` learns a test's group from a suffix its workers add to
the test's nodeid, which pytest 9.2's structured node ids ignore (the groups are silently lost).
Here the workers write each test's group to a file the controller named instead
(:func:`publish_units`), and the nodeids stay as they are.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from _pytest.config import Config
from xdist.scheduler import LoadScopeScheduling

#: What a run of the whole suite may take on a 2-core machine (the README's test command).
BUDGET_S = 600.0

#: xdist workers for a run of the whole suite (``-n`` overrides): most of its tests wait on
#: their stacks, so three per core (measured: 6 beat 4 by a third on 2 cores). The quick tier
#: is computation, and runs best on two per core.
DEFAULT_WORKERS = 6
QUICK_WORKERS = 4

#: Fixtures wider than a test that every worker may set up for itself (``<where>::<name>``):
#: the e2e session stack's parameters (that stack is one group per broker and pool, not one
#: group of all), and the real-client layer's stack, so that its modules (each first installs
#: its client: npm, a venv) run side by side, on a stack per worker, not one after another.
PER_WORKER_FIXTURES = frozenset(
    {"tests/e2e::broker", "tests/e2e::pool", "tests/clients::client_stack"}
)

QUICK_PATHS = ("tests/unit/", "tests/integration/test_store_")

_UNITS_FILE = pytest.StashKey[Path]()
_STARTED = pytest.StashKey[float]()
_WORKER_KEY = "mcpq_units_file"


# -- options (controller) ----------------------------------------------------------------------
def choose_workers(config: Config) -> None:
    """Before xdist reads its options: the default workers for a run of the whole suite, and
    ``loadgroup`` (served by :class:`GroupScheduling`) whenever tests are distributed and no
    ``--dist`` was chosen."""
    if not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput"):
        return
    option = config.option
    whole_suite = config.args_source is Config.ArgsSource.TESTPATHS
    if option.numprocesses is None and whole_suite and not option.collectonly:
        quick = option.markexpr.strip() == "quick"
        option.numprocesses = QUICK_WORKERS if quick else DEFAULT_WORKERS
    if option.numprocesses and option.dist == "no":
        option.dist = "loadgroup"


def tell_worker(node: Any) -> None:
    """``pytest_configure_node``: where the worker writes the groups of the tests it collected."""
    config = node.config
    if _UNITS_FILE not in config.stash:
        config.stash[_UNITS_FILE] = Path(tempfile.mkdtemp(prefix="mcpq-units-")) / "units.json"
    node.workerinput[_WORKER_KEY] = str(config.stash[_UNITS_FILE])


def forget_units(config: Config) -> None:
    """``pytest_unconfigure``: the controller removes the units file's directory."""
    if _UNITS_FILE in config.stash:
        shutil.rmtree(config.stash[_UNITS_FILE].parent, ignore_errors=True)


def make_scheduler(config: Config, log: Any) -> LoadScopeScheduling | None:
    if config.getvalue("dist") != "loadgroup" or _UNITS_FILE not in config.stash:
        return None
    return GroupScheduling(config, log, config.stash[_UNITS_FILE])


class GroupScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with our units as its scopes: each group whole to one worker,
    each other test alone, in the order of the collection."""

    def __init__(self, config: Config, log: Any, units_file: Path) -> None:
        super().__init__(config, log)
        self.units_file = units_file
        self.units: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        # Read once every worker has collected (the scheduler's first call comes after that).
        if self.units is None:
            self.units = json.loads(self.units_file.read_text())
        return self.units.get(nodeid, nodeid)


# -- collection (every process) ------------------------------------------------------------------
def shared_fixture_keys(item: pytest.Item) -> list[tuple[int, str]]:
    """The shared fixtures (scope wider than a test, defined in the test tree) that the test
    uses, one key per fixture *instance*: its name, where it is defined, and the parameters of
    its scope or wider it was set up with; each with its scope's rank (session first). An
    ``xdist_group`` mark is a key too."""
    marks = item.iter_markers("xdist_group")
    keys = [(0, f"xdist_group:{m.args[0] if m.args else m.kwargs.get('name')}") for m in marks]
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return keys
    callspec = getattr(item, "callspec", None)
    for name in item.fixturenames:  # type: ignore[attr-defined]
        defs = info.name2fixturedefs.get(name)
        if not defs:
            continue
        fixture = defs[-1]
        if fixture.scope == "function" or not fixture.baseid.startswith("tests"):
            continue
        if f"{fixture.baseid}::{name}" in PER_WORKER_FIXTURES:
            continue
        wide = fixture.scope in ("session", "package")
        where = fixture.baseid if wide else item.nodeid.split("::")[0]
        params = ""
        if callspec is not None:
            scoped = sorted(
                f"{arg}={value}"
                for arg, value in callspec.params.items()
                if callspec._arg2scope[arg] >= fixture._scope
            )
            params = f"[{','.join(scoped)}]" if scoped else ""
        keys.append((0 if wide else 1, f"{where}::{name}{params}"))
    return keys


def group_names(items: Sequence[pytest.Item]) -> dict[str, str]:
    """Test nodeid -> the name of its group, for tests that use a shared fixture. Tests whose
    fixtures overlap are in one group (union-find over the fixture keys), named after its
    widest fixture."""
    parent: dict[tuple[int, str], tuple[int, str]] = {}

    def find(key: tuple[int, str]) -> tuple[int, str]:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    by_item = {item.nodeid: shared_fixture_keys(item) for item in items}
    for keys in by_item.values():
        for key in keys:
            parent[find(key)] = find(keys[0])
    members: dict[tuple[int, str], list[tuple[int, str]]] = defaultdict(list)
    for key in parent:
        members[find(key)].append(key)
    names = {root: min(keys)[1] for root, keys in members.items()}
    return {nodeid: names[find(keys[0])] for nodeid, keys in by_item.items() if keys}


def is_quick(item: pytest.Item) -> bool:
    return item.nodeid.startswith(QUICK_PATHS)


def outside_the_quick_tier(path: Path, config: Config) -> bool:
    """``pytest -m quick`` does not collect the test directories the tier takes nothing from
    (importing them is most of a collection's time)."""
    if config.option.markexpr.strip() != "quick" or not path.is_dir():
        return False
    parts = path.relative_to(config.rootpath).parts if path.is_relative_to(config.rootpath) else ()
    tier_dirs = {p.split("/")[1] for p in QUICK_PATHS}
    return len(parts) == 2 and parts[0] == "tests" and parts[1] not in tier_dirs


def is_worker(config: Config) -> bool:
    """Whether this process collects for the scheduler (an xdist worker)."""
    return hasattr(config, "workerinput")


#: Seconds a test takes, by where it lives (the longest prefix wins), as measured on this 2-core
#: machine: a layer's usual test, and the modules far from it. Only the order of the run depends
#: on them (a new module without its line is scheduled as its layer's usual test).
ESTIMATES = {
    "tests/unit/": 0.05,
    "tests/unit/test_resource_notice_methods.py": 0.5,
    "tests/integration/": 0.1,
    "tests/integration/test_dev_": 5.0,
    "tests/integration/test_worker_broker_unreachable.py": 5.0,
    "tests/e2e/": 1.5,
    "tests/e2e/test_mcpq_call_errors.py": 8.0,
    "tests/e2e/test_mcpq_call_tty.py": 12.0,
    "tests/e2e/test_operator_tasks_cli.py": 6.0,
    "tests/e2e/test_payloads_at_rest.py": 12.0,
    "tests/e2e/test_async_runs_on_the_loop.py": 14.0,
    "tests/e2e/test_readme_client_on_dev.py": 12.0,
    "tests/clients/": 6.0,
    "tests/conformance/": 1.0,
    "tests/conformance/test_conformance_suite.py::test_requirements": 12.0,
    "tests/faults/": 15.0,
    "tests/faults/test_faults_cluster.py": 60.0,
    "tests/faults/test_faults_poison.py::test_healthy_runs": 55.0,
    "tests/faults/test_faults_poison.py::test_waiting_runs": 45.0,
    "tests/multihost/": 15.0,
    "tests/ops/": 3.0,
    "tests/ops/test_buildpack_install.py": 20.0,
    "tests/ops/test_install_collisions.py": 30.0,
    "tests/ops/test_bench_": 40.0,
    "tests/ops/test_bench_capacity.py": 130.0,
    "tests/ops/test_bench_capacity_profile.py": 3.0,
}


def estimated_s(item: pytest.Item) -> float:
    prefixes = [p for p in ESTIMATES if item.nodeid.startswith(p)]
    return ESTIMATES[max(prefixes, key=len)] if prefixes else 1.0


def longest_first(items: list[pytest.Item], unit_of: dict[int, str]) -> list[pytest.Item]:
    """The items as the scheduler's units (``unit_of``: ``id(item)`` -> its group, or its own
    nodeid), the longest unit first; a group's tests keep their order (pytest's, which sets
    each stack up once)."""
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(unit_of[id(item)], []).append(item)
    ordered = sorted(units.values(), key=lambda unit: -sum(map(estimated_s, unit)))
    return [item for unit in ordered for item in unit]


def publish_units(config: Config, items: Sequence[pytest.Item], unit_of: dict[int, str]) -> None:
    """Worker side: each collected test's unit (its group, or its own nodeid), for
    :class:`GroupScheduling` in the controller (every worker collects the same; written whole,
    then renamed into place)."""
    target = Path(config.workerinput[_WORKER_KEY])  # type: ignore[attr-defined]
    units = {item.nodeid: unit_of[id(item)] for item in items}
    partial = target.with_name(f"{target.name}.{os.getpid()}")
    partial.write_text(json.dumps(units))
    os.replace(partial, target)


# -- the budget (controller) ---------------------------------------------------------------------
def start_clock(config: Config) -> None:
    config.stash[_STARTED] = time.monotonic()


def budget_lines(config: Config, reports: Sequence[Any], shown: int = 8) -> list[str]:
    """For a run of the whole suite: its wall time against the budget, and the units (groups, or
    single tests) whose tests took longest, setups and teardowns included."""
    whole_suite = config.args_source is Config.ArgsSource.TESTPATHS
    if is_worker(config) or not whole_suite or _STARTED not in config.stash:
        return []
    units: dict[str, str] = {}
    if _UNITS_FILE in config.stash and config.stash[_UNITS_FILE].exists():
        units = json.loads(config.stash[_UNITS_FILE].read_text())
    took: dict[str, float] = defaultdict(float)
    for report in reports:
        took[units.get(report.nodeid, report.nodeid.split("::")[0])] += getattr(
            report, "duration", 0.0
        )  # (a collection error's report has none)
    elapsed = time.monotonic() - config.stash[_STARTED]
    lines = [f"wall time {elapsed:.0f} s (budget {BUDGET_S:.0f} s on 2 cores); longest units:"]
    for unit, seconds in sorted(took.items(), key=lambda kv: -kv[1])[:shown]:
        lines.append(f"  {seconds:6.1f} s  {unit}")
    return lines
