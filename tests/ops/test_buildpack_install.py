"""The buildpack's install: ``requirements.txt`` alone (hashed, exact) runs every Procfile process
and every one-off command docs/deploy.md gives.

Heroku's and Dokku's Python buildpack installs ``requirements.txt`` into a fresh environment and
nothing else; mcpq itself is not installed (no ``mcpq`` script), and the Procfile runs
``python -m mcpq …`` from the app directory. This builds that environment the buildpack's way
(``pip install -r``, which the hashes put in hash-checking mode) and checks that

- every Procfile command starts far enough to parse its command line and import what its
  process serves;
- the one-off commands of docs/deploy.md (``heroku run …``, ``dokku run mcpq …``) run there, with
  ``app.json``'s settings, against a real (private) Redis;
- a web process with ``app.json``'s settings serves ``/mcp`` to a request for a public host name
  (a deployment without ``MCPQ_ALLOWED_HOSTS`` or ``MCPQ_RESOURCE_URL`` answers every one 421),
  with an API key made by the docs' one-off command.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mcpq.ops.harness.mcp_client import McpClient
from mcpq.ops.runtime.processes import stop_groups
from mcpq.ops.runtime.redis_binary import IN_MEMORY_ARGS, RedisProcess
from tests.ops.install_envs import REPO, lock_venv
from tests.support.procs import OutputLines, free_port, start_process_group, wait_until

pytestmark = [pytest.mark.ops, pytest.mark.timeout(600)]

# What each process type imports before it serves (its command's own --help imports only
# mcpq.ops.cli.main).
SERVES = {
    "web": "mcpq.frontend.app",
    "worker": "mcpq.workers.entry",
    "worker_bulk": "mcpq.workers.entry",
    "flower": "flower.command",
}
#: A public host name of the app, as Heroku's router passes it on.
PUBLIC_HOST = "my-mcpq-1a2b3c4d5e6f.herokuapp.com"
#: A one-off command in deploy.md's recipes: what follows ``heroku run`` or ``dokku run <app>``.
ONE_OFF = re.compile(r"^(?:heroku run|dokku run \S+)\s+(.+?)\s*(?:#.*)?$", re.M)


@pytest.fixture(scope="module")
def buildpack_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return lock_venv(tmp_path_factory.mktemp("buildpack") / "venv")


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The add-on's Redis: a private redis-server of this module."""
    data = tmp_path_factory.mktemp("buildpack-redis")
    with RedisProcess(extra_args=IN_MEMORY_ARGS, data_dir=data) as server:
        yield server.url


def procfile() -> dict[str, list[str]]:
    text = (REPO / "Procfile").read_text()
    return {m[1]: shlex.split(m[2]) for m in re.finditer(r"^([\w-]+):\s*(.+)$", text, re.M)}


def base_env(python: Path) -> dict[str, str]:
    return {"PATH": f"{python.parent}:/usr/bin:/bin", "HOME": str(python.parents[2])}


def dyno_env(python: Path, redis_url: str) -> dict[str, str]:
    """A dyno's environment: ``app.json``'s settings (a ``"generator": "secret"`` is 64 random
    hex characters, as Heroku makes it), the add-on's ``REDIS_URL``."""
    manifest = json.loads((REPO / "app.json").read_text())
    env = base_env(python)
    for name, spec in manifest["env"].items():
        if "value" in spec:
            env[name] = str(spec["value"])
        elif spec.get("generator") == "secret":
            env[name] = secrets.token_hex(32)
    env["REDIS_URL"] = redis_url
    return env


def one_off_commands() -> list[list[str]]:
    """The one-off commands of deploy.md's recipes, each once."""
    text = (REPO / "docs" / "deploy.md").read_text()
    commands = list(dict.fromkeys(m[1] for m in ONE_OFF.finditer(text)))
    return [shlex.split(command) for command in commands]


def run_one_off(python: Path, command: list[str], env: dict[str, str]) -> str:
    assert command[:3] == ["python", "-m", "mcpq"], command  # no `mcpq` script on a dyno
    done = subprocess.run(
        [str(python), *command[1:]], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
    return done.stdout


def test_mcpq_itself_is_not_installed(buildpack_python: Path) -> None:
    # mcpq is not installed: the processes run from the app directory.
    for name in ("mcpq-server", "mcpq"):
        done = subprocess.run(
            [str(buildpack_python), "-m", "pip", "show", name], capture_output=True, timeout=60
        )
        assert done.returncode != 0, name
    assert not (buildpack_python.parent / "mcpq").exists()


@pytest.mark.parametrize("kind", sorted(SERVES))
def test_every_procfile_process_starts_from_the_lock_alone(
    buildpack_python: Path, kind: str
) -> None:
    command = procfile()[kind]
    assert command[:3] == ["python", "-m", "mcpq"], command
    env = base_env(buildpack_python)
    helped = subprocess.run(
        [str(buildpack_python), *command[1:], "--help"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert helped.returncode == 0 and "usage:" in helped.stdout, helped.stderr[-2000:]
    imported = subprocess.run(
        [str(buildpack_python), "-c", f"import {SERVES[kind]}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert imported.returncode == 0, imported.stderr[-2000:]


def test_the_docs_one_off_commands_run_from_the_lock_alone(
    buildpack_python: Path, redis_url: str
) -> None:
    commands = one_off_commands()
    # Heroku's and Dokku's recipes make an API key and read the status, at least.
    assert [c for c in commands if c[3:5] == ["keys", "create"]], commands
    assert [c for c in commands if c[3:4] == ["status"]], commands
    env = dyno_env(buildpack_python, redis_url)
    for command in commands:
        out = run_one_off(buildpack_python, command, env)
        if command[3:5] == ["keys", "create"]:
            assert re.fullmatch(r"\S{20,}\n", out), out  # the key, alone on stdout
        if command[3:4] == ["status"]:
            assert "redis: " in out and "(REDIS_URL)" in out, out


def test_a_web_dyno_with_app_json_settings_answers_its_public_host_name(
    buildpack_python: Path, redis_url: str, tmp_path: Path
) -> None:
    env = dyno_env(buildpack_python, redis_url)
    (create,) = [c for c in one_off_commands() if c[3:5] == ["keys", "create"]]
    token = run_one_off(buildpack_python, create, env).strip()
    port = free_port()
    web = start_process_group(
        [str(buildpack_python), *procfile()["web"][1:]],
        env={**env, "PORT": str(port), "WEB_CONCURRENCY": "1", "TMPDIR": str(tmp_path)},
        cwd=str(REPO),
    )
    output = OutputLines(web)
    try:
        wait_until(lambda: _healthy(port, web, output), timeout=60, message="web /healthz")
        with McpClient(f"http://127.0.0.1:{port}/mcp", token=token) as client:
            reply = client.request("tools/list", headers={"Host": PUBLIC_HOST})
        assert reply.status == 200, f"{reply}\n{output.text[-3000:]}"
        names = {t["name"] for t in reply.result["tools"]}
        assert "build_report" in names, names  # app.json's MCPQ_TOOLS: the bundled demo
    finally:
        stop_groups([web], timeout=10)


def test_every_public_recipe_names_the_host_names_mcp_answers_to() -> None:
    # Unset, /mcp answers only loopback names: 421 to every request for the public one.
    text = (REPO / "docs" / "deploy.md").read_text()
    sections = dict(re.findall(r"^## (.+?)\n(.*?)(?=^## |\Z)", text, re.M | re.S))
    for title in ("Heroku", "Dokku", "A plain VM"):
        code = "".join(re.findall(r"```\w*\n(.*?)```", sections[title], re.S))
        assert re.search(r"MCPQ_(?:ALLOWED_HOSTS|RESOURCE_URL)=\S", code), title


def _healthy(port: int, web: subprocess.Popen[bytes], output: OutputLines) -> bool:
    assert web.poll() is None, output.text[-3000:]
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False
