"""The Node.js MCP clients of the real-client tests: the official TypeScript SDK and the MCP
Inspector CLI, at the exact versions pinned in ``tests/clients/node/package.json`` (and its lock).

They are installed once into a cache directory (``.cache/clients/node`` in the repository, or
``$MCPQ_CLIENTS_DIR/node``) by copying ``package.json`` and ``package-lock.json`` there and
running ``npm ci --ignore-scripts``; nothing is installed again while the installed versions
and the lock match. Scripts are run from that directory (ESM ``import`` ignores ``NODE_PATH``, so
each script is copied next to the installed ``node_modules``), and their output is returned as a
:class:`NodeRun` whose :meth:`NodeRun.describe` goes into assertion messages.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mcpq.ops.harness.conformance_runner import installed_version
from tests.clients.py_clients import last_json_line

NODE_SOURCE = Path(__file__).resolve().parent / "node"
PACKAGE_FILES = ("package.json", "package-lock.json")
SDK_PACKAGE = "@modelcontextprotocol/sdk"
INSPECTOR_PACKAGE = "@modelcontextprotocol/inspector"
SDK_SCENARIOS = NODE_SOURCE / "sdk_scenarios.mjs"
INSTALL_TIMEOUT_S = 600
NPM_CI = ("ci", "--ignore-scripts", "--no-audit", "--no-fund")


class NodeUnavailable(RuntimeError):
    """``node`` or ``npm`` is not on PATH: the Node client tests cannot run here."""


def default_install_dir() -> Path:
    base = os.environ.get("MCPQ_CLIENTS_DIR")
    repo_default = NODE_SOURCE.parents[2] / ".cache" / "clients"
    return (Path(base) if base else repo_default) / "node"


def pinned_versions() -> dict[str, str]:
    """The exact versions ``package.json`` pins, by package name."""
    manifest = json.loads((NODE_SOURCE / "package.json").read_text())
    deps = manifest.get("dependencies", {})
    return {str(name): str(version) for name, version in deps.items()}


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.read_bytes() == b.read_bytes()
    except OSError:
        return False


def _is_current(install_dir: Path) -> bool:
    if not all(_same_file(NODE_SOURCE / name, install_dir / name) for name in PACKAGE_FILES):
        return False
    wanted = pinned_versions()
    return all(installed_version(install_dir, p) == v for p, v in wanted.items())


@contextlib.contextmanager
def _install_lock(install_dir: Path) -> Iterator[None]:
    """Serialise installs into one directory (parallel pytest processes share the cache)."""
    install_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(install_dir.parent / f".{install_dir.name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass(frozen=True)
class NodeInstall:
    """An installed copy of ``tests/clients/node``."""

    root: Path
    node: str
    versions: dict[str, str]
    installed_now: bool
    install_s: float

    def package_dir(self, package: str) -> Path:
        return self.root / "node_modules" / package


def ensure_installed(install_dir: Path | None = None) -> NodeInstall:
    """Install the pinned packages into install_dir unless they are there already.

    Raises :class:`NodeUnavailable` without node/npm on PATH, ``RuntimeError`` if npm fails.
    """
    install_dir = install_dir or default_install_dir()
    node = shutil.which("node")
    if node is None:
        raise NodeUnavailable("node not found on PATH; it runs the TypeScript SDK and Inspector")
    started = time.monotonic()
    installed_now = False
    with _install_lock(install_dir):
        if not _is_current(install_dir):
            npm = shutil.which("npm")
            if npm is None:
                raise NodeUnavailable("npm not found on PATH; it installs the Node MCP clients")
            install_dir.mkdir(parents=True, exist_ok=True)
            for name in PACKAGE_FILES:
                shutil.copyfile(NODE_SOURCE / name, install_dir / name)
            done = subprocess.run(
                [npm, *NPM_CI],
                cwd=install_dir,
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT_S,
            )
            if done.returncode != 0 or not _is_current(install_dir):
                output = (done.stderr.strip() or done.stdout.strip())[-2000:]
                raise RuntimeError(f"npm ci in {install_dir} failed ({done.returncode}): {output}")
            installed_now = True
    versions = {p: installed_version(install_dir, p) or "?" for p in pinned_versions()}
    return NodeInstall(install_dir, node, versions, installed_now, time.monotonic() - started)


def installed_or_skip() -> NodeInstall:
    """:func:`ensure_installed`, skipping the calling test when Node/npm are missing."""
    try:
        return ensure_installed()
    except NodeUnavailable as exc:
        pytest.skip(str(exc))


# -- running ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeRun:
    """One finished (or killed) node process."""

    argv: list[str]
    returncode: int | None  # None: killed at the timeout
    stdout: str
    stderr: str
    elapsed_s: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def describe(self, limit: int = 6000) -> str:
        how = "killed at the timeout" if self.timed_out else f"exit code {self.returncode}"
        return (
            f"$ {' '.join(self.argv)}\n({how}, {self.elapsed_s:.1f} s)\n"
            f"--- stdout ---\n{_cut(self.stdout.strip(), limit)}\n"
            f"--- stderr ---\n{_cut(self.stderr.strip(), limit)}"
        )


def _text(output: str | bytes | None) -> str:
    if output is None:
        return ""
    return output.decode(errors="replace") if isinstance(output, bytes) else output


def _run(
    argv: list[str], *, cwd: Path, timeout_s: float, env: Mapping[str, str] | None = None
) -> NodeRun:
    started = time.monotonic()
    full_env = {**os.environ, **(env or {})}
    try:
        done = subprocess.run(
            argv, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired as exc:
        out, err = _text(exc.stdout), _text(exc.stderr)
        return NodeRun(argv, None, out, err, time.monotonic() - started)
    return NodeRun(argv, done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def run_node_script(
    install: NodeInstall,
    script: Path,
    args: Sequence[str] = (),
    *,
    timeout_s: float = 120.0,
    env: Mapping[str, str] | None = None,
) -> NodeRun:
    """Run ``script`` with ``node`` so that its imports resolve in the installed node_modules.

    The script is copied into ``<install>/scripts/`` (module resolution starts from the script's
    own directory, and ESM ignores ``NODE_PATH``); ``NODE_PATH`` is set as well for CommonJS.
    """
    scripts = install.root / "scripts"
    scripts.mkdir(exist_ok=True)
    copy = scripts / script.name
    if not _same_file(script, copy):
        tmp = copy.with_name(f".{copy.name}.{os.getpid()}.tmp")
        shutil.copyfile(script, tmp)
        tmp.replace(copy)
    node_env = {"NODE_PATH": str(install.root / "node_modules"), "NO_COLOR": "1"}
    argv = [install.node, str(copy), *args]
    return _run(argv, cwd=install.root, timeout_s=timeout_s, env={**node_env, **(env or {})})


@dataclass
class ScenarioRun:
    """What ``sdk_scenarios.mjs`` reported (its last JSON line on stdout) and the raw run."""

    scenario: str
    run: NodeRun
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.report.get("ok") is True

    def describe(self) -> str:
        """The report (without its HTTP log), the HTTP log one line per exchange, and stderr;
        the whole process output when there is no report."""
        if not self.report:
            return f"sdk_scenarios.mjs {self.scenario}: no JSON report\n{self.run.describe()}"
        head = {k: v for k, v in self.report.items() if k != "http"}
        how = "killed at the timeout" if self.run.timed_out else f"exit {self.run.returncode}"
        lines = [
            f"sdk_scenarios.mjs {self.scenario}: ok={self.report.get('ok')} "
            f"error={json.dumps(self.report.get('error'))} ({how}, {self.run.elapsed_s:.1f} s)",
            "report: " + _cut(json.dumps(head, indent=1, default=str), 8000),
            "http:" + _http_log(self.report.get("http")),
        ]
        if self.run.stderr.strip():
            lines.append("stderr: " + _cut(self.run.stderr.strip(), 3000))
        return "\n".join(lines)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f" ... [{len(text)} chars]"


def _http_log(http: object, limit: int = 8000) -> str:
    """One line per HTTP exchange of the report's wire log (the newest kept when too long)."""
    if not isinstance(http, list):
        return " (none)"
    rows = []
    for entry in http:
        if not isinstance(entry, dict):
            continue
        sent = entry.get("sent") or ""
        if "taskParam" in entry:
            sent += f" task={json.dumps(entry['taskParam'])}"
        row = f"\n  +{entry.get('t')}ms {entry.get('method')} {sent} -> {entry.get('status')}"
        row += f" {entry.get('contentType') or ''}"
        if entry.get("body"):
            row += f" body={entry.get('bodyText') or entry.get('body')}"
        events = entry.get("events")
        if isinstance(events, list):
            msgs = ", ".join(str(e.get("msg")) for e in events if isinstance(e, dict))
            row += f" sse[{msgs}] keepalives={entry.get('comments')} end={entry.get('end')}"
        elif entry.get("end"):
            row += f" {entry.get('end')}"
        rows.append(row)
    text = "".join(rows)
    return text if len(text) <= limit else " ..." + text[-limit:]


def run_sdk_scenario(
    install: NodeInstall,
    url: str,
    scenario: str,
    args: Mapping[str, Any] | None = None,
    *,
    timeout_s: float = 60.0,
) -> ScenarioRun:
    """Run one scenario of ``sdk_scenarios.mjs`` against ``url``.

    The script gets a deadline a few seconds shorter than ``timeout_s`` so that a hanging server
    still produces a report (with ``error.name == "Deadline"``) rather than a killed process.
    """
    payload = {"deadlineMs": int(max(timeout_s - 5.0, 1.0) * 1000), **(args or {})}
    run = run_node_script(
        install, SDK_SCENARIOS, [url, scenario, json.dumps(payload)], timeout_s=timeout_s
    )
    return ScenarioRun(scenario, run, last_json_line(run.stdout))


# -- the Inspector CLI ------------------------------------------------------------------------


def inspector_bin(install: NodeInstall) -> Path:
    """The Inspector's ``mcp-inspector`` entry point (what ``npx @modelcontextprotocol/inspector``
    runs)."""
    package = install.package_dir(INSPECTOR_PACKAGE)
    manifest = json.loads((package / "package.json").read_text())
    bins = manifest.get("bin")
    entry = bins.get("mcp-inspector") if isinstance(bins, dict) else bins
    if not isinstance(entry, str):
        raise RuntimeError(f"{INSPECTOR_PACKAGE} has no mcp-inspector bin: {bins!r}")
    return package / entry


def run_inspector_cli(
    install: NodeInstall, args: Sequence[str], *, timeout_s: float = 60.0
) -> NodeRun:
    """``mcp-inspector --cli ARGS`` (the equivalent of ``npx @modelcontextprotocol/inspector --cli
    ARGS``), with HOME and the Inspector's catalog/storage in a throwaway directory so that it
    writes nothing into the real home directory."""
    with tempfile.TemporaryDirectory(prefix="mcpq-inspector-") as home:
        env = {
            "HOME": home,
            "MCP_STORAGE_DIR": str(Path(home) / "storage"),
            "MCP_CATALOG_PATH": str(Path(home) / "mcp.json"),
            "NO_COLOR": "1",
        }
        argv = [install.node, str(inspector_bin(install)), "--cli", *args]
        return _run(argv, cwd=install.root, timeout_s=timeout_s, env=env)
