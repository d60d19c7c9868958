"""A project whose own packages are called ``tools``, ``shared``, ``ops``, ``frontend`` and
``workers`` is served by an installed mcpq, whichever way it was installed.

mcpq installs one top-level package, ``mcpq``; a project's folders of those names shadow nothing
of it, and it shadows nothing of theirs. The project (made here: a regular package of each name,
``shared/settings.py`` among them, and a tool module that imports from every one) is served
from its own folder, the way its developer runs it:

- by ``mcpq dev`` (its own Redis, web and workers);
- by ``mcpq web`` and ``mcpq worker`` against a private redis-server;

with mcpq installed into a fresh virtualenv that holds the hashed lock (``requirements.txt``),
both from a wheel built from this checkout (``pip wheel --no-deps --no-build-isolation``, then
``pip install --no-deps``: nothing fetched beyond the lock) and as an editable install of the
checkout (``pip install --no-deps --no-build-isolation -e``). Each case makes one ``tools/call``
of the project's tool, which a worker runs: it reports where every module it used came from.
One virtualenv per kind of install, shared by its cases.
"""

from __future__ import annotations

import shlex
import signal
import subprocess
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpq.ops.harness.mcp_client import McpClient
from mcpq.ops.runtime.processes import descendant_pids, stop_groups
from mcpq.ops.runtime.redis_binary import IN_MEMORY_ARGS, RedisProcess
from mcpq.shared.request_state import new_secret
from mcpq.shared.sealing import new_data_key
from tests.ops.install_envs import REPO, app_env, build_wheel, lock_venv, pip_install
from tests.support.procs import OutputLines, free_port, start_process_group, wait_until

pytestmark = [pytest.mark.ops, pytest.mark.timeout(600)]

TOOL = "project_echo"
TOOLS_MODULE = "tools.mine"
#: The project's own packages: each has a module the tool imports (module, value it holds).
PROJECT_MODULES = {
    "tools.helpers": "the project's tools.helpers",
    "shared.settings": "the project's shared.settings",
    "ops.deploy": "the project's ops.deploy",
    "frontend.pages": "the project's frontend.pages",
    "workers.jobs": "the project's workers.jobs",
}
TOOL_SOURCE = '''"""The project's tools: one, which imports from every package of the project."""

from __future__ import annotations

import os
from typing import Any

import mcpq
from mcpq import tool

import frontend.pages
import ops.deploy
import shared.settings
import tools.helpers
import workers.jobs

USED = (tools.helpers, shared.settings, ops.deploy, frontend.pages, workers.jobs)


@tool(description="Echoes its text and says where every module it uses came from.")
def project_echo(text: str) -> dict[str, Any]:
    return {
        "echo": text,
        "values": {module.__name__: module.VALUE for module in USED},
        "files": {module.__name__: module.__file__ for module in USED},
        "mcpq": mcpq.__file__,
        "pid": os.getpid(),
    }
'''


@dataclass(frozen=True)
class Installed:
    kind: str
    python: Path

    @property
    def mcpq(self) -> str:
        return str(self.python.parent / "mcpq")

    def expected_mcpq_file(self) -> Path:
        if self.kind == "editable":
            return REPO / "mcpq" / "__init__.py"
        venv = self.python.parent.parent
        purelib = sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)})
        return Path(purelib) / "mcpq" / "__init__.py"


@pytest.fixture(scope="module", params=["wheel", "editable"])
def installed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Installed:
    kind: str = request.param
    root = tmp_path_factory.mktemp(f"install-{kind}")
    python = lock_venv(root / "venv")
    if kind == "wheel":
        pip_install(python, str(build_wheel(python, root / "build").wheel))
    else:
        pip_install(python, "--no-build-isolation", "-e", str(REPO))
    return Installed(kind, python)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The developer's project folder: regular packages named like mcpq's folders."""
    folder = tmp_path / "project"
    for module, value in PROJECT_MODULES.items():
        package, name = module.split(".")
        (folder / package).mkdir(parents=True, exist_ok=True)
        (folder / package / "__init__.py").write_text(f'"""The project\'s own {package}."""\n')
        (folder / package / f"{name}.py").write_text(f"VALUE = {value!r}\n")
    (folder / "tools" / "mine.py").write_text(TOOL_SOURCE)
    return folder


def run_env(installed: Installed, home: Path, **extra: str) -> dict[str, str]:
    return app_env(
        installed.python,
        home,
        MCPQ_TOOLS=TOOLS_MODULE,
        MCPQ_LOG_FORMAT="text",
        WEB_CONCURRENCY="1",
        MCPQ_WORKER_CONCURRENCY="1",
        MCPQ_IO_CONCURRENCY="4",
        **extra,
    )


def wait_for_line(
    process: subprocess.Popen[bytes], output: OutputLines, needle: str, timeout: float
) -> None:
    """Until ``process`` has printed ``needle``; fails at once if it exits first."""

    def printed() -> bool:
        if needle in output.text:
            return True
        if process.poll() is not None:
            output.join(timeout=2)
            raise AssertionError(f"exited {process.returncode}:\n{output.text[-4000:]}")
        return False

    wait_until(printed, timeout=timeout, interval=0.2, message=repr(needle))


def call_the_tool(port: int, output: OutputLines) -> dict[str, Any]:
    """One ``tools/call`` of the project's tool (answered once a worker ran it)."""
    with McpClient(f"http://127.0.0.1:{port}/mcp", tasks=False, timeout_s=60) as client:
        reply = client.call_tool(TOOL, {"text": "hello"})
    assert reply.status == 200 and "result" in reply.body, f"{reply}\n{output.text[-4000:]}"
    result = reply.body["result"]
    assert not result.get("isError"), f"{result}\n{output.text[-4000:]}"
    structured: dict[str, Any] = result["structuredContent"]
    return structured


def check_answer(answer: dict[str, Any], installed: Installed, project: Path) -> None:
    assert answer["echo"] == "hello"
    assert answer["values"] == PROJECT_MODULES, answer
    for module, file in answer["files"].items():
        assert Path(file).resolve().is_relative_to(project.resolve()), (module, file)
    # mcpq is the one installed, not something the project's folder put on the path.
    assert Path(answer["mcpq"]).resolve() == installed.expected_mcpq_file().resolve(), answer


def test_mcpq_dev_serves_the_projects_tool(
    installed: Installed, project: Path, tmp_path: Path
) -> None:
    port = free_port()
    env = run_env(installed, tmp_path / "home")
    launcher = start_process_group(
        [installed.mcpq, "dev", "--port", str(port)], env=env, cwd=str(project)
    )
    output = OutputLines(launcher)
    try:
        wait_for_line(launcher, output, "; Ctrl-C stops", timeout=120)
        check_answer(call_the_tool(port, output), installed, project)
        launcher.send_signal(signal.SIGINT)
        assert launcher.wait(timeout=30) == 0, output.text[-4000:]
    finally:
        stop_groups([launcher], timeout=10)


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    with RedisProcess(extra_args=IN_MEMORY_ARGS, data_dir=tmp_path) as server:
        yield server.url


def test_web_and_worker_serve_the_projects_tool(
    installed: Installed, project: Path, tmp_path: Path, redis_url: str
) -> None:
    port = free_port()
    env = run_env(
        installed,
        tmp_path / "home",
        REDIS_URL=redis_url,
        MCPQ_SECRET=new_secret(),
        MCPQ_DATA_KEYS=new_data_key(),
    )
    worker = start_process_group([installed.mcpq, "worker"], env=env, cwd=str(project))
    web = start_process_group(
        [installed.mcpq, "web", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        cwd=str(project),
    )
    worker_output, web_output = OutputLines(worker), OutputLines(web)
    try:
        wait_for_line(worker, worker_output, " ready.", timeout=90)
        wait_until(
            lambda: _healthy(port, web, web_output), timeout=60, message=f"web /healthz on {port}"
        )
        answer = call_the_tool(port, web_output)
        check_answer(answer, installed, project)
        # A worker ran it: the tool's process is the worker's (or one of its pool's).
        assert answer["pid"] in descendant_pids(worker.pid) | {worker.pid}, answer
    finally:
        stop_groups([web, worker], timeout=10)


def _healthy(port: int, web: subprocess.Popen[bytes], output: OutputLines) -> bool:
    assert web.poll() is None, output.text[-4000:]
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def test_the_grafana_dashboard_is_where_the_docs_say(installed: Installed, tmp_path: Path) -> None:
    # docs/operations.md's one line that prints the installed dashboard's path, run elsewhere.
    text = (REPO / "docs" / "operations.md").read_text()
    (line,) = [ln for ln in text.splitlines() if ln.startswith("python -c") and "grafana" in ln]
    done = subprocess.run(
        [str(installed.python), *shlex.split(line)[1:]],
        cwd=tmp_path,
        env=app_env(installed.python, tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    dashboard = Path(done.stdout.strip())
    assert dashboard.read_bytes() == (REPO / "ops" / "grafana" / "mcpq.json").read_bytes()
    installed_package = installed.expected_mcpq_file().parent
    assert dashboard.is_relative_to(installed_package), dashboard
