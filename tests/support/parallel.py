"""How the suite runs in parallel (pytest-xdist), which tests share a worker, and the quick tier.

The hooks that use this live in ``tests/conftest.py``; here is what they decide.

- **Workers.** A run of the whole suite (``pytest`` or ``pytest -m quick``: no paths given)
  runs on :data:`DEFAULT_WORKERS` xdist workers, more than this machine's two cores, because
  most of the suite waits on its stacks (leases expiring, sweeps, workers starting). ``-n N``
  chooses; ``-n 0`` or ``-p no:xdist`` runs serially; a run of chosen paths stays serial
  unless ``-n`` is given (its ``-s`` output shows, and one module does not start its stack on
  several workers). Every stack starts its own redis-server on free ports and, on RabbitMQ, its
  own vhost (``tests.support.stacks``), so workers never share a server's state.
- **Groups.** Session and module fixtures are set up once per *worker*: a test that uses one
  of the suite's shared stacks (any fixture of the test tree whose scope is wider than a test,
  but those of :data:`PER_WORKER_FIXTURES`, cheap enough to start on every worker) is put in
  the ``xdist_group`` of that stack, so that every test of one stack runs on one worker, one
  after another, on one stack. A session fixture with parameters (the e2e stack on each pool
  and broker) is one group per parameter set. Tests that share two such fixtures join their
  groups into one.
- **Order.** The scheduler (``--dist loadgroup``) hands out one group, or one ungrouped test,
  at a time, in the order of the collection: the collection is ordered longest first
  (:func:`estimated_s`), so that the end of the run is not one long group started last while
  the other workers are idle.
- **quick.** The unit tests and the store's scripts on a real Redis
  (``tests/integration/test_store_*.py``) are marked ``quick``: ``pytest -m quick``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import pytest
from _pytest.config import Config

#: xdist workers for a run of the whole suite (``-n`` overrides).
DEFAULT_WORKERS = 4

#: Fixtures wider than a test that every worker may set up for itself: cheap, and a group of
#: their tests would be a long serial run (every store test shares ``redis_process``).
PER_WORKER_FIXTURES = frozenset({"broker", "redis_process", "redis_client", "raw_client"})

QUICK_PATHS = ("tests/unit/", "tests/integration/test_store_")


def choose_workers(config: Config) -> None:
    """Before xdist reads its options: the default workers for a run of the whole suite, and
    ``loadgroup`` whenever tests are distributed and no ``--dist`` was chosen."""
    if not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput"):
        return
    option = config.option
    whole_suite = config.args_source is Config.ArgsSource.TESTPATHS
    if option.numprocesses is None and whole_suite and not option.collectonly:
        option.numprocesses = DEFAULT_WORKERS
    if option.numprocesses and option.dist == "no":
        option.dist = "loadgroup"
    # The scheduler keeps the collection's order (longest first), not "most tests first".
    option.loadscopereorder = False


def distributed(config: Config) -> bool:
    """Whether this process collects for xdist's scheduler (an xdist worker)."""
    return hasattr(config, "workerinput")


def shared_fixture_keys(item: pytest.Item) -> list[tuple[int, str]]:
    """The shared fixtures (scope wider than a test, defined in the test tree) that the test
    uses, one key per fixture *instance*: its name, where it is defined, and the parameters
    of its scope or wider it was set up with. Each with its scope's rank (session first)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    callspec = getattr(item, "callspec", None)
    keys = []
    for name in item.fixturenames:  # type: ignore[attr-defined]
        defs = info.name2fixturedefs.get(name)
        if not defs or name in PER_WORKER_FIXTURES:
            continue
        fixture = defs[-1]
        if fixture.scope == "function" or not fixture.baseid.startswith("tests"):
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


#: Seconds a test takes, by where it lives (the longest prefix wins), measured on a 2-core
#: machine; only the order of the run depends on them, so that they may be rough.
ESTIMATES = {
    "tests/unit/": 0.05,
    "tests/integration/": 0.1,
    "tests/e2e/": 3.0,
    "tests/clients/": 5.0,
    "tests/faults/": 25.0,
    "tests/ops/": 5.0,
    "tests/multihost/": 30.0,
    "tests/conformance/": 60.0,
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
