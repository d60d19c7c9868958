"""The lock files are current, complete and hashed, and this environment was installed from them.

``requirements.txt`` (the buildpack's install) and ``requirements-dev.txt`` (CI, the README) pin
every package with its hashes (``ops/ci/lock`` writes them from ``pyproject.toml``); the npm locks
pin every package with its integrity hash. A range changed in ``pyproject.toml`` without a
re-lock, a hand-added unhashed line, or an environment installed around the lock fails here.
"""

from __future__ import annotations

import json
import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from mcpq.ops.ci.audit import NPM_LOCKS

REPO = Path(__file__).resolve().parents[2]
_PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")


def locked(name: str) -> dict[str, tuple[str, str, int]]:
    """Package -> (version, marker, number of hashes), as a hashed lock file lists them."""
    pins: dict[str, tuple[str, str, int]] = {}
    current = ""
    for line in (REPO / name).read_text().splitlines():
        if match := _PIN.match(line):
            current = canonicalize_name(match[1])
            pins[current] = (match[2], (match[3] or "").strip(), 0)
        elif line.strip().startswith("--hash=sha256:") and current:
            version, marker, hashes = pins[current]
            pins[current] = (version, marker, hashes + 1)
        elif line.strip() and not line.lstrip().startswith(("#", "--hash")):
            pytest.fail(f"{name}: a line that is not a pin with hashes: {line!r}")
    return pins


def declared(extra: str | None = None) -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lines = project["optional-dependencies"][extra] if extra else project["dependencies"]
    return [Requirement(line) for line in lines]


@pytest.mark.parametrize(
    ("lock", "wanted"),
    [
        ("requirements.txt", declared()),
        ("requirements-dev.txt", declared() + declared("dev")),
    ],
)
def test_every_declared_dependency_is_pinned_within_its_range(
    lock: str, wanted: list[Requirement]
) -> None:
    pins = locked(lock)
    for requirement in wanted:
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{lock} does not pin {name}: run ops/ci/lock"
        version = pins[name][0]
        assert requirement.specifier.contains(version, prereleases=True), (
            f"{lock} pins {name}=={version}, outside pyproject's {requirement.specifier}: "
            "run ops/ci/lock"
        )


def test_every_pin_has_hashes_and_the_two_locks_agree() -> None:
    runtime, dev = locked("requirements.txt"), locked("requirements-dev.txt")
    for lock, pins in (("requirements.txt", runtime), ("requirements-dev.txt", dev)):
        unhashed = [name for name, (_, _, hashes) in pins.items() if hashes == 0]
        assert not unhashed, f"{lock}: pins without a hash: {unhashed}"
    differ = {n: (v, dev.get(n, ("-",))[0]) for n, (v, _, _) in runtime.items() if n != "pip"}
    assert {n: pair for n, pair in differ.items() if pair[0] != pair[1]} == {}


def test_this_environment_was_installed_from_the_dev_lock() -> None:
    """What CI and the README install is what the lock says (markers for other platforms or
    Pythons excluded)."""
    mismatched = {}
    for name, (version, marker, _) in locked("requirements-dev.txt").items():
        if marker and not Requirement(f"{name}; {marker}").marker.evaluate():  # type: ignore[union-attr]
            continue
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = "missing"
        if installed != version:
            mismatched[name] = (version, installed)
    assert mismatched == {}, f"installed around the lock (locked, installed): {mismatched}"


@pytest.mark.parametrize("directory", NPM_LOCKS, ids=lambda d: d.name)
def test_npm_locks_pin_every_package_with_its_integrity(directory: Path) -> None:
    manifest = json.loads((directory / "package.json").read_text())
    lock = json.loads((directory / "package-lock.json").read_text())
    packages = lock["packages"]
    assert packages[""]["dependencies"] == manifest["dependencies"], "package-lock.json is stale"
    for version in manifest["dependencies"].values():
        assert re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?", version), f"not exact: {version}"
    missing = [path for path, entry in packages.items() if path and not entry.get("integrity")]
    missing = [path for path in missing if not packages[path].get("link")]
    assert missing == [], f"{directory.name}: packages without an integrity hash: {missing}"
