"""`mcpq web|worker|flower|dev`: given flags and environment, then exactly this command is exec'd.

No servers: `main()` gets a recording `execute` instead of `os.execvp`.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace

import pytest

from mcpq.ops.cli import main as cli
from mcpq.ops.runtime import commands
from mcpq.shared.request_state import parse_secrets
from mcpq.shared.sealing import new_data_key

PY = sys.executable
REPO = Path(__file__).resolve().parents[2]


class Recorder:
    """Stands in for os.execvp and remembers what would have replaced the process."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def __call__(self, file: str, args: list[str]) -> None:
        self.calls.append((file, list(args)))


#: What a deployment must set for ``mcpq web`` on a public address to start at all.
BASE = {"MCPQ_TOOLS": "mcpq.demo", "MCPQ_AUTH": "none", "MCPQ_DATA_KEYS": new_data_key()}


def run(argv: list[str], environ: Mapping[str, str] | None = None) -> list[str]:
    recorder = Recorder()
    assert cli.main(argv, execute=recorder, environ={**BASE, **(environ or {})}) == 0
    [(file, args)] = recorder.calls
    assert file == args[0] == PY
    return args


def gunicorn(bind: str, workers: int) -> list[str]:
    return [PY, "-m", "gunicorn", "-c", "python:mcpq.ops.runtime.gunicorn_conf",
            "--bind", bind, "--workers", str(workers), "mcpq.frontend.entry:app"]  # fmt: skip


def celery_worker(queues: str, concurrency: int, hostname: str, pool: str = "custom") -> list[str]:
    return [PY, "-m", "mcpq.workers.main", "--pool", pool,
            "--loglevel", "INFO", "-Q", queues, "-c", str(concurrency), "-n", hostname]  # fmt: skip


def test_web_defaults_bind_all_interfaces_on_8000_with_two_workers() -> None:
    assert run(["web"]) == gunicorn("0.0.0.0:8000", 2)


def test_web_follows_port_and_web_concurrency_from_the_environment() -> None:
    env = {"PORT": "5123", "WEB_CONCURRENCY": "5"}
    assert run(["web"], env) == gunicorn("0.0.0.0:5123", 5)


def test_web_flags_override_the_environment() -> None:
    argv = ["web", "--port", "9001", "--host", "127.0.0.1"]
    assert run(argv, {"PORT": "5123"}) == gunicorn("127.0.0.1:9001", 2)


def test_web_brackets_an_ipv6_host() -> None:
    assert run(["web", "--host", "::1", "--port", "8080"]) == gunicorn("[::1]:8080", 2)


def test_worker_defaults_to_an_io_pool_of_100_threads_on_the_mcpq_queue() -> None:
    assert run(["worker"]) == celery_worker("mcpq", 100, "mcpq-mcpq@%h")


def test_a_cpu_pool_is_prefork_with_four_processes() -> None:
    assert run(["worker", "--pool", "cpu"]) == celery_worker("mcpq", 4, "mcpq-mcpq@%h", "prefork")
    env = {"MCPQ_WORKER_POOL": "cpu"}
    assert run(["worker"], env) == celery_worker("mcpq", 4, "mcpq-mcpq@%h", "prefork")


def test_worker_follows_queues_and_concurrency_from_the_environment() -> None:
    env = {"MCPQ_QUEUES": "bulk, gpu", "MCPQ_WORKER_CONCURRENCY": "8", "MCPQ_IO_CONCURRENCY": "50"}
    assert run(["worker"], env) == celery_worker("bulk,gpu", 50, "mcpq-bulk-gpu@%h")
    cpu = celery_worker("bulk,gpu", 8, "mcpq-bulk-gpu@%h", "prefork")
    assert run(["worker", "--pool", "cpu"], env) == cpu


def test_worker_flags_override_the_environment() -> None:
    argv = ["worker", "--queues", "bulk", "--concurrency", "2", "--hostname", "w1@%h"]
    assert run(argv, {"MCPQ_QUEUES": "gpu"}) == celery_worker("bulk", 2, "w1@%h")


def test_an_unknown_pool_is_a_bad_environment(capsys: pytest.CaptureFixture[str]) -> None:
    line = refusal(["worker"], {"MCPQ_TOOLS": "mcpq.demo", "MCPQ_WORKER_POOL": "gevent"}, capsys)
    assert "MCPQ_WORKER_POOL" in line


def test_flower_defaults_to_5555_unless_port_is_set() -> None:
    flower = [PY, "-m", "celery", "-A", "mcpq.workers.entry", "flower"]
    loopback = "--address=127.0.0.1"
    assert run(["flower"]) == [*flower, "--port=5555", loopback]
    assert run(["flower"], {"PORT": "6001"}) == [*flower, "--port=6001", loopback]
    assert run(["flower", "--port", "7001"], {"PORT": "6001"}) == [*flower, "--port=7001", loopback]


@pytest.mark.parametrize(
    "argv",
    [["web", "--port", "0"], ["web", "--port", "70000"], ["worker", "--concurrency", "0"], []],
)
def test_bad_flags_exit_with_usage_error(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(argv, execute=Recorder(), environ={})
    assert exited.value.code == 2


def test_a_bad_environment_value_is_a_usage_error_not_a_traceback() -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["web"], execute=Recorder(), environ={"WEB_CONCURRENCY": "many"})
    assert exited.value.code == 2


@pytest.mark.parametrize("secret", ["x", "change-me-to-a-long-random-string"])
def test_a_weak_or_placeholder_secret_stops_web_in_one_line(
    secret: str, capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = Recorder()
    with pytest.raises(SystemExit) as exited:
        cli.main(["web"], execute=recorder, environ={**BASE, "MCPQ_SECRET": secret})
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "MCPQ_SECRET" in err and "Traceback" not in err
    assert secret not in err  # the secret itself is never echoed


def test_secret_prints_a_fresh_strong_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["secret"], execute=Recorder(), environ={}) == 0
    first = capsys.readouterr().out.strip()
    cli.main(["secret"], execute=Recorder(), environ={})
    second = capsys.readouterr().out.strip()
    assert first != second
    assert parse_secrets(first) == [first]


def test_dev_options_default_to_port_8000_with_a_worker_and_no_flower() -> None:
    args = cli.build_parser().parse_args(["dev"])
    assert (args.port, args.no_worker, args.flower, args.flower_port) == (8000, False, False, 5555)
    args = cli.build_parser().parse_args(["dev", "--port", "8123", "--no-worker", "--flower"])
    assert (args.port, args.no_worker, args.flower) == (8123, True, True)


def test_dev_children_are_mcpq_commands_of_the_same_interpreter() -> None:
    mcpq = [PY, "-m", "mcpq"]
    assert commands.dev_web_command(8123) == [
        *mcpq, "web", "--port", "8123", "--host", "127.0.0.1"
    ]  # fmt: skip
    assert commands.dev_worker_command() == [*mcpq, "worker"]
    assert commands.dev_flower_command(5556) == [
        *mcpq, "flower", "--port", "5556", "--address", "127.0.0.1"
    ]  # fmt: skip


def test_gunicorn_conf_uses_the_uvicorn_worker_and_only_known_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gunicorn_config = pytest.importorskip("gunicorn.config")
    monkeypatch.setenv("PORT", "8765")
    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    conf = importlib.reload(importlib.import_module("mcpq.ops.runtime.gunicorn_conf"))
    known = {setting.name for setting in gunicorn_config.KNOWN_SETTINGS}
    public = {name for name in vars(conf) if not name.startswith("_")}
    imported = {"annotations", "os", "Any", "Settings"}
    assert public - imported <= known, public - imported - known
    assert conf.worker_class == "mcpq.ops.runtime.uvicorn_worker.McpqUvicornWorker"
    assert conf.wsgi_app == "mcpq.frontend.entry:app"
    assert (conf.bind, conf.workers) == (["0.0.0.0:8765"], 3)
    assert 0 < conf.graceful_timeout < 30  # inside Heroku's SIGTERM-to-SIGKILL window
    assert callable(conf.post_fork)


def test_mcpq_is_runnable_as_a_module() -> None:
    done = subprocess.run(
        [PY, "-m", "mcpq", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for command in ("web", "worker", "flower", "dev"):
        assert command in done.stdout


def test_dev_launcher_never_prints_a_redis_password() -> None:
    from mcpq.shared.redis_urls import redact_url

    assert redact_url("redis://:s3cret@host:6379/0") == "redis://:***@host:6379/0"
    assert redact_url("rediss://user:s3cret@host:6380") == "rediss://user:***@host:6380"
    assert redact_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"


def refusal(argv: list[str], environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line ``mcpq`` stops with (usage error, exit 2, nothing exec'd)."""
    recorder = Recorder()
    with pytest.raises(SystemExit) as exited:
        cli.main(argv, execute=recorder, environ=environ)
    assert exited.value.code == 2
    assert recorder.calls == []
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize("command", ["web", "worker"])
def test_web_and_worker_refuse_to_start_without_mcpq_tools(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refusal([command], {"MCPQ_AUTH": "none"}, capsys)
    assert "MCPQ_TOOLS is not set" in line


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "mcp.example.com"])
def test_a_public_bind_without_auth_is_refused_in_one_line(
    host: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refusal(["web", "--host", host], {"MCPQ_TOOLS": "mcpq.demo"}, capsys)
    assert "without authentication" in line and "MCPQ_AUTH" in line


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_a_loopback_bind_needs_no_auth(host: str) -> None:
    assert run(["web", "--host", host], {"MCPQ_AUTH": ""})[6].endswith(":8000")


@pytest.mark.parametrize("auth", ["none", "apikey"])
def test_a_public_bind_starts_with_an_explicit_auth_mode(auth: str) -> None:
    assert run(["web"], {"MCPQ_AUTH": auth}) == gunicorn("0.0.0.0:8000", 2)


def test_oauth_without_its_settings_names_the_missing_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = {"MCPQ_TOOLS": "mcpq.demo", "MCPQ_AUTH": "oauth"}
    assert "MCPQ_RESOURCE_URL" in refusal(["web"], env, capsys)
    env["MCPQ_RESOURCE_URL"] = "https://mcp.example.com/mcp"
    assert "MCPQ_OAUTH_ISSUER" in refusal(["web"], env, capsys)
    env.update(MCPQ_OAUTH_ISSUER="https://id.example.com", MCPQ_OAUTH_ALGORITHMS="HS256")
    assert "MCPQ_OAUTH_ALGORITHMS" in refusal(["web"], env, capsys)
    env.pop("MCPQ_OAUTH_ALGORITHMS")
    assert run(["web"], env) == gunicorn("0.0.0.0:8000", 2)


def test_an_unknown_auth_mode_is_a_bad_environment(capsys: pytest.CaptureFixture[str]) -> None:
    line = refusal(["web"], {"MCPQ_TOOLS": "mcpq.demo", "MCPQ_AUTH": "basic"}, capsys)
    assert "MCPQ_AUTH" in line and "basic" in line


def test_gunicorn_refuses_a_public_bind_without_auth_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """``gunicorn -c python:ops.runtime.gunicorn_conf`` without ``mcpq web`` runs the same
    checks."""
    import importlib

    import mcpq.ops.runtime.gunicorn_conf as conf

    monkeypatch.setenv("MCPQ_TOOLS", "mcpq.demo")
    monkeypatch.setenv("MCPQ_DATA_KEYS", new_data_key())
    monkeypatch.delenv("MCPQ_AUTH", raising=False)
    conf = importlib.reload(conf)

    server = SimpleNamespace(cfg=SimpleNamespace(bind=["0.0.0.0:8000"]))
    with pytest.raises(SystemExit, match="MCPQ_AUTH"):
        conf.on_starting(server)
    server.cfg.bind = ["127.0.0.1:8000"]
    conf.on_starting(server)
