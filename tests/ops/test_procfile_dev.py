"""``honcho start -f Procfile.dev``: the local formation, as a developer runs it.

With a ``.env`` made from ``.env.example`` the way docs/operations.md says (its shell lines: the
copy, then a secret and a data key of the developer's own), honcho brings up
Redis (the ``redis`` line, on a free port; or, without one, a private redis-server of the test,
never the shared one), web, the two worker pools (``mcpq`` and ``bulk``) and Flower; a task
created through ``/mcp`` shows up in Flower under its tool name, on the node of its pool; SIGINT
to honcho stops everything (gunicorn workers and Celery pool children too). The ``.env`` gets this
test's Redis port and tools on top (appended: honcho takes a variable's last line). A ``.env``
copied without those lines stops web and workers with a line that names the missing step.

``Procfile.dev`` names its ports. When a port is a literal the test runs a copy of the file with
the literal replaced by a free port (so it never fights over 8000/5555 with whatever else runs on
the machine); once the ports come from the environment (``${VAR:-8000}``) it runs the file as is,
setting the variables. ``test_procfile_dev_ports_come_from_the_environment`` asks for the latter.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from mcpq.ops.harness.metric_dirs import multiproc_dir
from mcpq.ops.harness.stack import REPO, Child
from mcpq.ops.runtime.preflight import DOTENV_DATA_KEY_STEP
from mcpq.ops.runtime.processes import (
    descendant_pids,
    free_port,
    pid_alive,
    read_proc_stat,
    signal_group,
    stop_groups,
    wait_until,
)
from mcpq.ops.runtime.redis_binary import IN_MEMORY_ARGS, RedisProcess
from mcpq.shared.store import task_ref
from tests.ops.ops_harness import OPS_TOOLS, Flower, OpsClient, wait_flower_sees
from tests.support.stacks import FAST_KNOBS

pytestmark = [pytest.mark.ops, pytest.mark.timeout(150)]

PROCFILE = REPO / "Procfile.dev"
PORT_FLAG = re.compile(r"--port[= ](\S+)")
ENV_REF = re.compile(r"^\$\{?(\w+)(?::-\d+)?\}?$")
# `mcpq worker`'s default node name: mcpq-<queues>@%h, maybe with an instance (mcpq-bulk.x@%h).
POOL_NODE = {q: re.compile(rf"\bmcpq-{q}(\.[\w.-]+)?@") for q in ("mcpq", "bulk")}


def formation(text: str) -> dict[str, str]:
    """Process type -> command, as honcho reads a Procfile."""
    types = {}
    for line in text.splitlines():
        if m := re.match(r"^([A-Za-z0-9_-]+):\s*(.+)$", line):
            types[m.group(1)] = m.group(2).strip()
    return types


@dataclass
class Honcho:
    process: subprocess.Popen[bytes]
    log: Path
    web: str
    flower: str
    pids: set[int] = field(default_factory=set)
    pgids: set[int] = field(default_factory=set)
    metric_dirs: set[str] = field(default_factory=set)

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def snapshot(self) -> None:
        """Remember every process honcho started, and the metrics directories of
        ``mcpq web|worker`` (made in the temporary directory, never removed by them)."""
        self.pids |= descendant_pids(self.process.pid)
        self.pgids |= {s.pgid for pid in self.pids if (s := read_proc_stat(pid))} & self.pids
        self.metric_dirs |= {d for pid in self.pids if (d := multiproc_dir(pid))}

    def leftover_groups(self) -> set[int]:
        """Process groups honcho started that still have a member we saw."""
        live = (read_proc_stat(pid) for pid in self.pids)
        return {s.pgid for s in live if s is not None and s.state != "Z"} & self.pgids


def procfile_with_ports(workdir: Path, ports: dict[str, int], env: dict[str, str]) -> Path:
    """The Procfile to run: Procfile.dev itself if its ports are variables (then set in ``env``),
    else a copy with each literal port of ``ports`` (process type -> port) replaced."""
    text = PROCFILE.read_text()
    rewritten = []
    copy_needed = False
    for line in text.splitlines():
        name = line.split(":", 1)[0]
        m = PORT_FLAG.search(line) if name in ports else None
        if m is not None:
            if ref := ENV_REF.match(m.group(1)):
                env[ref.group(1)] = str(ports[name])
            else:
                line = line[: m.start(1)] + str(ports[name]) + line[m.end(1) :]
                copy_needed = True
        rewritten.append(line)
    if not copy_needed:
        return PROCFILE
    copy = workdir / "Procfile.dev"
    copy.write_text("\n".join(rewritten) + "\n")
    return copy


def documented_steps() -> list[str]:
    """The shell lines docs/operations.md gives under "Local formation" that make ``.env`` (the
    block that copies ``.env.example``, without its ``honcho start``)."""
    text = (REPO / "docs" / "operations.md").read_text()
    section = text.split("### Local formation", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    (block,) = [b for b in blocks if "cp .env.example .env" in b]
    return [line for line in block.splitlines() if line and not line.startswith("honcho ")]


def make_dotenv(folder: Path, env: dict[str, str], steps: list[str]) -> Path:
    """``.env`` in ``folder``, made by ``steps`` run there by a shell (``mcpq`` on ``PATH``)
    next to a copy of ``.env.example``."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / ".env.example", folder / ".env.example")
    for step in steps:
        subprocess.run(["bash", "-c", step], cwd=folder, env=env, check=True, timeout=60)
    return folder / ".env"


def dotenv_env(dotenv: Path) -> dict[str, str]:
    """The variables honcho passes on from ``dotenv``."""
    from honcho.environ import parse

    values: dict[str, str] = parse(dotenv.read_text())
    return values


@pytest.fixture
def honcho(tmp_path: Path) -> Iterator[Honcho]:
    types = formation(PROCFILE.read_text())
    ports = {"web": free_port(), "flower": free_port(), "redis": free_port()}
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPQ_")}
    env.pop("PORT", None)
    env.update(FAST_KNOBS)
    env.update(
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
        PYTHONUNBUFFERED="1",
        WEB_CONCURRENCY="2",
        MCPQ_WORKER_CONCURRENCY="1",
    )
    procfile = procfile_with_ports(tmp_path, ports, env)
    with contextlib.ExitStack() as cleanup:
        if "redis" in types:  # the formation brings its own Redis: on a free port
            redis_url = f"redis://127.0.0.1:{ports['redis']}/0"
        else:  # Redis is the developer's: a private one of this test
            server = RedisProcess(extra_args=IN_MEMORY_ARGS, data_dir=tmp_path)
            redis_url = cleanup.enter_context(server).url
        dotenv = make_dotenv(tmp_path, env, documented_steps())
        # This test's Redis port and tools, and Flower's API opened for it.
        extra = {"REDIS_URL": redis_url, "MCPQ_TOOLS": OPS_TOOLS}
        extra["FLOWER_UNAUTHENTICATED_API"] = "true"
        with dotenv.open("a") as out:
            out.writelines(f"{name}={value}\n" for name, value in extra.items())
        yield from _run_honcho(tmp_path, procfile, dotenv, env, ports)


def _run_honcho(
    tmp_path: Path, procfile: Path, dotenv: Path, env: dict[str, str], ports: dict[str, int]
) -> Iterator[Honcho]:
    argv = [
        sys.executable, "-m", "honcho", "start", "--no-colour",
        "-f", str(procfile), "-d", str(REPO), "-e", str(dotenv),
    ]  # fmt: skip
    child = Child("honcho", argv, env, tmp_path / "honcho.log")  # own group, cwd REPO
    process = child.popen
    web, flower = (f"http://127.0.0.1:{ports[name]}" for name in ("web", "flower"))
    running = Honcho(process, child.log_path, web, flower)
    try:
        yield running
    finally:
        running.snapshot()
        stop_groups([process], timeout=15)
        for pgid in running.leftover_groups():  # one group per process type honcho started
            signal_group(pgid, signal.SIGKILL)
        for directory in running.metric_dirs:
            if Path(directory).name.startswith("mcpq-"):
                shutil.rmtree(directory, ignore_errors=True)


def test_procfile_dev_declares_web_two_pools_and_flower() -> None:
    types = formation(PROCFILE.read_text())
    assert set(types) >= {"web", "worker", "worker_bulk", "flower"}, types
    assert types["web"].startswith("mcpq web")
    assert types["worker"].startswith("mcpq worker") and "--queues mcpq" in types["worker"]
    assert (
        types["worker_bulk"].startswith("mcpq worker") and "--queues bulk" in types["worker_bulk"]
    )
    assert types["flower"].startswith("mcpq flower")
    if "redis" in types:
        assert types["redis"].startswith("mcpq redis"), types["redis"]
    production = formation((REPO / "Procfile").read_text())
    assert set(production) >= {"web", "worker", "worker_bulk", "flower"}, production
    assert "redis" not in production  # production Redis is a managed service / add-on


def test_procfile_dev_ports_come_from_the_environment() -> None:
    types = formation(PROCFILE.read_text())
    for name in ("web", "flower", "redis"):
        if name not in types:
            continue
        m = PORT_FLAG.search(types[name])
        if name == "redis" and m is None:
            continue  # follows REDIS_URL
        assert m is not None and ENV_REF.match(m.group(1)), types[name]


def _up(url: str, honcho: Honcho) -> bool:
    assert honcho.process.poll() is None, honcho.text()[-3000:]
    try:
        return httpx.get(url, timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def test_honcho_runs_the_dev_formation_and_stops_it_all(honcho: Honcho) -> None:
    wait_until(lambda: _up(f"{honcho.web}/healthz", honcho), timeout=45, message="web")
    wait_until(lambda: _up(f"{honcho.flower}/healthcheck", honcho), timeout=45, message="flower")
    for queue in ("mcpq", "bulk"):
        wait_until(
            lambda q=queue: any(  # type: ignore[misc]
                POOL_NODE[q].search(line) and " ready." in line
                for line in honcho.text().splitlines()
            ),
            timeout=45,
            message=f"the {queue} pool ready",
        )
    for name in ("web.1", "worker.1", "worker_bulk.1", "flower.1"):
        assert f"{name} " in honcho.text() or f"{name}|" in honcho.text(), name

    flower = Flower(honcho.flower)
    try:
        with OpsClient(f"{honcho.web}/mcp") as client:
            wait_flower_sees(client, flower)
            plain = client.create_task("slow_compute", {"seconds": 0.2})["taskId"]
            bulk = client.create_task("bulk_job", {"seconds": 0.2})["taskId"]
            for task_id in (plain, bulk):
                client.wait_for_status(task_id, "completed", timeout=20)
        for task_id, tool, queue in ((plain, "slow_compute", "mcpq"), (bulk, "bulk_job", "bulk")):
            info = flower.wait_state(task_ref(task_id), "SUCCESS", timeout=10)
            assert info["name"] == tool
            assert POOL_NODE[queue].match(info["worker"]), info
    finally:
        flower.close()

    honcho.snapshot()
    assert len(honcho.metric_dirs) == 3, honcho.metric_dirs  # web and the two pools
    assert len(honcho.pids) >= 8, honcho.pids  # shells, gunicorn + 2 workers, 2 celery + pools
    os.kill(honcho.process.pid, signal.SIGINT)
    honcho.process.wait(timeout=30)
    wait_until(
        lambda: not [pid for pid in honcho.pids if pid_alive(pid)],
        timeout=15,
        message="every process of the formation gone",
    )


def test_the_documented_dotenv_has_keys_of_its_own(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
    }
    first = dotenv_env(make_dotenv(tmp_path / "a", env, documented_steps()))
    second = dotenv_env(make_dotenv(tmp_path / "b", env, documented_steps()))
    for name in ("MCPQ_SECRET", "MCPQ_DATA_KEYS"):
        assert first.get(name) and first[name] != second.get(name), name  # made, not copied


def test_a_dotenv_copied_alone_stops_the_workers_naming_the_step(tmp_path: Path) -> None:
    copied = tmp_path / ".env"
    shutil.copy(REPO / ".env.example", copied)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **dotenv_env(copied)}
    done = subprocess.run(
        [sys.executable, "-m", "mcpq", "worker"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    refusal = done.stderr.strip().splitlines()[-1]
    assert "MCPQ_DATA_KEYS is not set" in refusal and DOTENV_DATA_KEY_STEP in refusal, refusal
    assert DOTENV_DATA_KEY_STEP in documented_steps()  # the step it names is the doc's
