"""``mcpq worker``'s process: Celery's own ``worker`` command, run without Celery's umbrella
command-line program.

``python -m celery -A mcpq.workers.entry worker`` loads that whole program before the app: every
subcommand and every ``celery.commands`` plugin installed (Flower with tornado, click-repl with
prompt_toolkit, pygments...), about 10 MiB that each worker process holds for nothing. This runs
the same click command, with what the umbrella command would hand it (``celery.bin.celery``:
the app, its user options, the ``CELERY_WORKER_*`` environment defaults). The app is built here,
from the environment (``mcpq.workers.celery_app.create_worker_app``). The arguments are the
``worker`` command's, after an optional ``--quiet`` (the umbrella's own option: no banner).

    python -m mcpq.workers.main [--quiet] --pool custom -Q celery -c 100 ...
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    quiet = bool(args) and args[0] in {"--quiet", "-q"}
    if quiet:
        args = args[1:]
    from celery.bin.base import CLIContext
    from celery.bin.worker import worker

    from mcpq.shared.settings import Settings
    from mcpq.workers.celery_app import create_worker_app

    app = create_worker_app(Settings.from_env())

    worker.params.extend(app.user_options.get("worker", []))
    context = CLIContext(app=app, no_color=False, workdir=None, quiet=quiet)
    worker.main(
        args=args, prog_name="celery worker", obj=context, auto_envvar_prefix="CELERY_WORKER"
    )


if __name__ == "__main__":
    main()
