"""Known-vulnerability audit of every locked dependency: ``python -m mcpq.ops.ci.audit
[--require]``.

Audits what the lock files pin, not what happens to be installed: the Python lock
(``requirements-dev.txt``, a superset of ``requirements.txt``) with ``pip-audit`` (no install,
hashes required; a package whose per-release document the index did not serve is checked
through PyPI's project document, which carries the vulnerabilities of the latest release, so
it answers for a package locked at its latest release), and each npm lock
(``package-lock.json`` of the conformance suite and of the Node client tests) with ``npm
audit``. Exit status:

- 1: a locked package has a known vulnerability (each one is listed, with its fixed versions);
- 2: nothing known, but some packages could not be checked (the vulnerability service did not
  answer) and ``--require`` (or ``MCPQ_AUDIT_REQUIRED=1``) was given;
- 0: nothing known. What could not be checked is still printed, as ``NOT AUDITED``, so a
  machine without access to the vulnerability services never passes silently.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PYTHON_LOCK = REPO / "requirements-dev.txt"
NPM_LOCKS = (REPO / "ops" / "harness" / "conformance", REPO / "tests" / "clients" / "node")
TIMEOUT_S = 600


@dataclass
class Findings:
    """What an audit found: vulnerabilities, and what it could not check (and why)."""

    vulnerable: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    checked: int = 0

    def merge(self, other: Findings) -> None:
        self.vulnerable += other.vulnerable
        self.unchecked += other.unchecked
        self.checked += other.checked


def read_pip_audit(report: dict[str, Any]) -> Findings:
    """pip-audit's ``--format json`` report: ``dependencies`` each with ``vulns`` or a
    ``skip_reason``."""
    found = Findings()
    for dep in report.get("dependencies", []):
        if dep.get("skip_reason"):  # the reason names the package and its version
            found.unchecked.append(str(dep["skip_reason"]))
            continue
        name = f"{dep.get('name')}=={dep.get('version', '?')}"
        found.checked += 1
        for vuln in dep.get("vulns", []):
            fixes = ", ".join(vuln.get("fix_versions") or []) or "no fixed release"
            found.vulnerable.append(f"{name}: {vuln.get('id')} (fixed in {fixes})")
    return found


def read_npm_audit(where: str, report: dict[str, Any]) -> Findings:
    """``npm audit --json``: ``vulnerabilities`` by package, or an ``error`` when the registry's
    audit endpoint did not answer."""
    found = Findings()
    if "error" in report:
        error = report["error"]
        summary = error.get("summary") if isinstance(error, dict) else error
        reason = summary or report.get("message") or "no reason given"
        found.unchecked.append(f"{where}: npm audit failed: {str(reason)[:200]}")
        return found
    total = report.get("metadata", {}).get("dependencies", {})
    found.checked += int(total.get("total", 0)) if isinstance(total, dict) else 0
    for name, vuln in report.get("vulnerabilities", {}).items():
        found.vulnerable.append(f"{where}: {name} ({vuln.get('severity', '?')})")
    return found


def _json_run(command: list[str], cwd: Path) -> tuple[int, dict[str, Any] | None, str]:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)
    try:
        parsed = json.loads(done.stdout)
    except ValueError:
        parsed = None
    return done.returncode, parsed if isinstance(parsed, dict) else None, done.stderr.strip()


_SKIPPED = re.compile(r"(\S+) \(([^)\s]+)\)$")  # "...could not be audited: name (version)"


def read_project_json(name: str, version: str, project: dict[str, Any]) -> Findings:
    """PyPI's project document (``/pypi/<name>/json``) describes its latest release only,
    ``vulnerabilities`` included: it answers for ``version`` when that is the latest."""
    latest = str(project.get("info", {}).get("version", ""))
    if latest != version:
        return Findings(unchecked=[f"{name}=={version}: PyPI's data covers {latest} only"])
    found = Findings(checked=1)
    for vuln in project.get("vulnerabilities") or []:
        if vuln.get("withdrawn"):
            continue
        fixes = ", ".join(vuln.get("fixed_in") or []) or "no fixed release"
        found.vulnerable.append(f"{name}=={version}: {vuln.get('id')} (fixed in {fixes})")
    return found


def _from_project_json(unchecked: str) -> Findings:
    """A package pip-audit skipped because its per-release document was not served: asked
    again through the project document (some mirrors and proxies serve only that one)."""
    match = _SKIPPED.search(unchecked)
    if match is None:
        return Findings(unchecked=[unchecked])
    name, version = match[1], match[2]
    url = f"https://pypi.org/pypi/{urllib.parse.quote(name)}/json"
    try:
        with urllib.request.urlopen(url, timeout=30) as reply:
            project = json.load(reply)
    except (OSError, ValueError) as exc:
        return Findings(unchecked=[f"{unchecked} (and {url}: {exc})"])
    return read_project_json(name, version, project)


def audit_python(lock: Path = PYTHON_LOCK) -> Findings:
    command = [sys.executable, "-m", "pip_audit", "--format", "json", "--progress-spinner", "off"]
    command += ["--disable-pip", "--require-hashes", "-r", str(lock)]
    _, report, stderr = _json_run(command, REPO)
    if report is None:  # pip-audit itself failed (e.g. the service refused every request)
        return Findings(unchecked=[f"{lock.name}: pip-audit failed: {stderr[-300:]}"])
    found = read_pip_audit(report)
    skipped, found.unchecked = found.unchecked, []
    with ThreadPoolExecutor(8) as pool:
        for again in pool.map(_from_project_json, skipped):
            found.merge(again)
    return found


def audit_npm(directory: Path) -> Findings:
    npm = shutil.which("npm")
    where = str(directory.relative_to(REPO))
    if npm is None:
        return Findings(unchecked=[f"{where}: npm not found on PATH"])
    _, report, stderr = _json_run([npm, "audit", "--json", "--package-lock-only"], directory)
    if report is None:
        return Findings(unchecked=[f"{where}: npm audit failed: {stderr[-300:]}"])
    return read_npm_audit(where, report)


def verdict(found: Findings, require: bool) -> int:
    for line in found.vulnerable:
        print(f"VULNERABLE  {line}")
    for line in found.unchecked:
        print(f"NOT AUDITED {line}")
    print(
        f"audit: {found.checked} packages checked, {len(found.vulnerable)} known "
        f"vulnerabilities, {len(found.unchecked)} not audited"
    )
    if found.vulnerable:
        return 1
    return 2 if found.unchecked and require else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mcpq.ops.ci.audit", description=__doc__)
    parser.add_argument(
        "--require",
        action="store_true",
        default=os.environ.get("MCPQ_AUDIT_REQUIRED", "") in {"1", "true", "yes"},
        help="fail (exit 2) when a package could not be checked",
    )
    args = parser.parse_args(argv)
    found = audit_python()
    for directory in NPM_LOCKS:
        found.merge(audit_npm(directory))
    return verdict(found, args.require)


if __name__ == "__main__":
    raise SystemExit(main())
