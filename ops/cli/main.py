"""The `mcpq` command: one entry point per Procfile process, plus `mcpq dev` for a laptop.

`web`, `worker` and `flower` build their command line (`mcpq.ops.runtime.commands`) and *exec* it,
replacing this process, so the platform's SIGTERM reaches gunicorn or Celery directly and there is
no wrapper to forward signals or swallow exit codes. Defaults come from the environment through
`mcpq.shared.settings.Settings`; flags override them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from mcpq.ops.cli import call, tasks_admin, tools_command
from mcpq.ops.runtime import commands, preflight
from mcpq.shared.request_state import new_secret
from mcpq.shared.settings import Settings

Exec = Callable[[str, list[str]], object]
"""`os.execvp`'s shape; tests inject a recorder instead."""


def port_number(raw: str) -> int:
    """argparse type: a TCP port."""
    port = int(raw)
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"not a TCP port: {raw}")
    return port


def positive_int(raw: str) -> int:
    """argparse type: an integer >= 1."""
    value = int(raw)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {raw}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The `mcpq` argument parser (one sub-parser per command)."""
    parser = argparse.ArgumentParser(prog="mcpq", description="mcpq: an MCP Tasks server.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    web = sub.add_parser("web", help="serve HTTP (gunicorn + uvicorn workers)")
    web.add_argument("--port", type=port_number, help="default: $PORT or 8000")
    web.add_argument("--host", default="0.0.0.0", help="default: 0.0.0.0")  # noqa: S104

    worker = sub.add_parser("worker", help="run a Celery worker")
    worker.add_argument("--queues", help="comma-separated; default: $MCPQ_QUEUES or mcpq")
    worker.add_argument(
        "--pool",
        choices=["io", "cpu"],
        help="io: a thread per run, for tools that wait (default: $MCPQ_WORKER_POOL or io); "
        "cpu: a process per run (prefork), for CPU-bound tools",
    )
    worker.add_argument(
        "--concurrency",
        type=positive_int,
        help="runs at once: $MCPQ_IO_CONCURRENCY (100) threads for io, "
        "$MCPQ_WORKER_CONCURRENCY (4) processes for cpu",
    )
    worker.add_argument("--hostname", help="Celery node name; default: mcpq-<queues>@%%h")

    flower = sub.add_parser("flower", help="run the Flower dashboard")
    flower.add_argument("--port", type=port_number, help="default: $PORT or 5555")
    flower.add_argument(
        "--address",
        help="default: $MCPQ_FLOWER_ADDRESS or 127.0.0.1; any other needs FLOWER_BASIC_AUTH "
        "(or FLOWER_AUTH)",
    )

    redis = sub.add_parser("redis", help="run a local, non-persistent Redis (Procfile.dev)")
    redis.add_argument("--port", type=port_number, help="default: the port of $REDIS_URL")

    status = sub.add_parser("status", help="queue depths, workers, task counts (no task ids)")
    status.add_argument("--no-ping", action="store_true", help="skip the Celery ping")

    tasks_admin.add_parser(sub)  # `mcpq tasks`: the operator's list, show and cancel
    call.add_parsers(sub)  # `mcpq call`, `mcpq task`: a terminal client (ops/cli/call.py)
    tools_command.add_parser(sub)  # `mcpq tools`: what the tool modules declare

    sub.add_parser("secret", help="print a fresh value for MCPQ_SECRET (32 random bytes)")

    keys = sub.add_parser(
        "keys",
        help="API keys (MCPQ_AUTH=apikey): create, list, revoke; data keys (MCPQ_DATA_KEYS): "
        "new-data-key, rotate-data",
    )
    keys_sub = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    create = keys_sub.add_parser("create", help="make a key and print it once")
    create.add_argument("name", help="who or what uses it (shown by list)")
    create.add_argument(
        "--scope", action="append", default=[], help="a scope the key grants (repeatable)"
    )
    keys_sub.add_parser("list", help="every key: id, name, scopes, created, revoked")
    revoke = keys_sub.add_parser("revoke", help="revoke a key at once, on every replica")
    revoke.add_argument("key_id", help="the key's id (from list, or the token's middle part)")
    keys_sub.add_parser("new-data-key", help="print a fresh MCPQ_DATA_KEYS entry (id:key)")
    rotate = keys_sub.add_parser(
        "rotate-data",
        help="re-encrypt every stored payload under the first MCPQ_DATA_KEYS key (safe while "
        "serving, re-runnable)",
    )
    rotate.add_argument(
        "--batch", type=positive_int, default=200, help="keys per SCAN step (default 200)"
    )

    dev = sub.add_parser("dev", help="run Redis, web and a worker locally")
    dev.add_argument("--port", type=port_number, default=8000, help="web port (default 8000)")
    dev.add_argument("--no-worker", action="store_true", help="do not start a worker")
    dev.add_argument("--flower", action="store_true", help="also start Flower")
    dev.add_argument("--flower-port", type=port_number, default=commands.DEFAULT_FLOWER_PORT)
    dev.add_argument(
        "--verbose",
        action="store_true",
        help="show every child's output as it comes, at INFO (default: a short block at "
        "start-up, then warnings and errors; full logs in files)",
    )
    dev.add_argument(
        "--reload",
        action="store_true",
        help="restart the web and the workers when a .py file in this folder or below changes",
    )
    return parser


def exec_argv(
    args: argparse.Namespace, settings: Settings, environ: Mapping[str, str]
) -> list[str]:
    """The command line `web`, `worker` or `flower` execs."""
    if args.command == "web":
        port = args.port or settings.port
        return commands.web_command(port=port, workers=settings.web_concurrency, host=args.host)
    if args.command == "worker":
        queues = args.queues or ",".join(settings.worker_queues)
        pool = args.pool or settings.worker_pool
        concurrency = args.concurrency or settings.concurrency(pool)
        return commands.worker_command(
            queues=queues,
            concurrency=concurrency,
            hostname=args.hostname,
            instance=settings.instance,
            pool=pool,
            loglevel=settings.log_level,
        )
    if args.command == "redis":
        from mcpq.ops.runtime.redis_binary import choose_redis_server

        port = args.port or urlsplit(settings.redis_url).port or 6379
        binary = choose_redis_server(settings.redis_server)
        print(f"mcpq redis: {binary.describe()}", file=sys.stderr)
        return commands.redis_command(binary.path, port=port)
    if args.command == "flower":
        address, port = flower_bind(args, settings, environ)
        return commands.flower_command(port=port, address=address)
    raise ValueError(f"{args.command!r} is not an exec'ing command")


def flower_bind(
    args: argparse.Namespace, settings: Settings, environ: Mapping[str, str]
) -> tuple[str, int]:
    """Where `mcpq flower` listens: loopback unless told otherwise (flag, then setting)."""
    default = settings.port if "PORT" in environ else commands.DEFAULT_FLOWER_PORT
    return args.address or settings.flower_address, args.port or default


def flower_login(settings: Settings) -> str:
    """What guards Flower, for its start-up line (never a credential)."""
    if settings.flower_basic_auth:
        return "login: basic auth (FLOWER_BASIC_AUTH)"
    if settings.flower_auth:
        return "login: OAuth (FLOWER_AUTH)"
    return "no login: reachable from this machine only"


def metrics_dir(command: str, argv: Sequence[str]) -> str:
    """One prometheus-client multiprocess directory per server (named after its port or Celery
    node), emptied at each start: no stale series, and restarts do not pile up directories."""
    key = argv[argv.index("--bind") + 1] if "--bind" in argv else argv[argv.index("-n") + 1]
    safe = "".join(c if c.isalnum() or c in "-." else "_" for c in key)
    path = Path(tempfile.gettempdir()) / f"mcpq-metrics-{command}-{safe}"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return str(path)


def exec_environment(
    command: str, environ: Mapping[str, str], argv: Sequence[str]
) -> dict[str, str]:
    """Variables the exec'd server needs besides the caller's: a fresh prometheus-client
    multiprocess directory (so every gunicorn worker or pool process reports together), and for
    workers Heroku-style shutdown: SIGTERM becomes Celery's cold shutdown, which hands running
    jobs back at once instead of waiting for them."""
    extra: dict[str, str] = {}
    if command in {"web", "worker"} and not environ.get("PROMETHEUS_MULTIPROC_DIR"):
        extra["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir(command, argv)
    if command == "worker" and "REMAP_SIGTERM" not in environ:
        extra["REMAP_SIGTERM"] = "SIGQUIT"
    if command == "worker":
        extra.update(commands.IO_POOL_ENV)  # read only by `--pool custom` (the io pool)
    return extra


def keys_command(args: argparse.Namespace, settings: Settings) -> int:
    """`mcpq keys`: API keys (``ops.cli.key_commands``) or data keys (``ops.cli.data_keys``)."""
    if args.keys_command in {"new-data-key", "rotate-data"}:
        from mcpq.ops.cli.data_keys import run_data_keys

        return run_data_keys(args, settings)
    from mcpq.ops.cli.key_commands import run_keys

    return run_keys(args, settings)


def status_command(environ: Mapping[str, str], ping_timeout: float) -> int:
    """``mcpq status``: its first line names the Redis it reads and why that one
    (``mcpq.ops.cli.status.locate_redis``); a store it cannot read is one line naming it, exit 1."""
    from mcpq.ops.cli.status import collect, locate_redis, render
    from mcpq.shared.errors import StoreUnavailable

    target = locate_redis(environ)
    if target.problem:
        print(f"mcpq status: {target.problem}", file=sys.stderr)
        return 1
    try:
        text = render(collect(Settings.from_env(target.environ), ping_timeout=ping_timeout))
    except (StoreUnavailable, ValueError) as exc:  # unreachable; a bad TLS or data-key setting
        cause = exc.__cause__ or exc.__context__
        detail = f" ({cause})" if isinstance(exc, StoreUnavailable) and cause else ""
        print(f"mcpq status: {exc}{detail}; {target.line}", file=sys.stderr)
        return 1
    print(target.line)
    print(text)
    return 0


def operator_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """`mcpq status` and `mcpq tasks`: they read the store, found by ``ops.cli.status.locate_redis``
    (``REDIS_URL``, else a running `mcpq dev`), so they take the environment, not settings."""
    if args.command == "status":
        return status_command(environ, ping_timeout=0 if args.no_ping else 1.0)
    return tasks_admin.run_tasks(args, environ)


def main(
    argv: Sequence[str] | None = None,
    *,
    execute: Exec = os.execvp,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Run `mcpq`; returns the exit status (exec'ing commands only return if `execute` does)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    env = os.environ if environ is None else environ
    try:
        settings = Settings.from_env(env)
    except ValueError as exc:
        parser.error(f"bad environment: {exc}")
    if args.command == "secret":
        print(new_secret())
        return 0
    # One clear line now, not a traceback from every gunicorn worker (or an open server) later.
    if args.command == "web" and (problem := preflight.web_problem(settings, [args.host])):
        parser.error(problem)
    if args.command == "worker":
        # The broker is reached only with the process's own environment, the one the exec'd
        # worker inherits (a caller's ``environ`` is a test's, which execs nothing).
        preflight.check_worker(settings, refuse=parser.error, reach=environ is None)
    if args.command in {"web", "worker"} and (warning := preflight.data_keys_warning(settings)):
        print(f"mcpq {args.command}: warning: {warning}", file=sys.stderr)
    if args.command == "flower":
        address, port = flower_bind(args, settings, env)
        if problem := preflight.flower_problem(settings, address):
            parser.error(problem)
        # Flower's own banner names 127.0.0.1 whatever it binds: this line is the truth.
        print(commands.flower_banner(address, port, flower_login(settings)), file=sys.stderr)
    if args.command in {"keys", "tools"}:  # `mcpq tools`: what the tool modules declare
        return (
            keys_command(args, settings)
            if args.command == "keys"
            else tools_command.run(args, settings, env)
        )
    if args.command == "dev":
        from mcpq.ops.dev.launcher import DevOptions, run_dev

        options = DevOptions(
            args.port, not args.no_worker, args.flower, args.flower_port, args.verbose, args.reload
        )
        return run_dev(options, environ=env)
    if args.command in {"status", "tasks", "call", "task"}:
        # The operator's commands read the store; `call` and `task` speak MCP (ops/cli/call.py).
        return (
            operator_command(args, env)
            if args.command in {"status", "tasks"}
            else call.run(args, settings, env)
        )
    command = exec_argv(args, settings, env)
    if environ is None:
        os.environ.update(exec_environment(args.command, env, command))
    sys.stdout.flush()
    sys.stderr.flush()
    execute(command[0], command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
