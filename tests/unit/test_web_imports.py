"""What the web tier imports, and where: OAuth's libraries only when OAuth is configured, and the
modules a gunicorn worker would load after the fork already in the master (so the workers share
their pages). Each check runs in a fresh interpreter: this process has imported everything."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcpq.ops.runtime import gunicorn_conf

REPO = Path(__file__).resolve().parents[2]
OAUTH_LIBRARIES = ("httpx", "jwt")
OAUTH_ENV = {
    "MCPQ_AUTH": "oauth",
    "MCPQ_RESOURCE_URL": "https://mcp.example.com/mcp",
    "MCPQ_OAUTH_ISSUER": "https://issuer.example.com",
}

#: The gunicorn master's start (``on_starting``) against a stand-in server, then the modules
#: it left loaded.
MASTER = """
import json, sys, types
from mcpq.ops.runtime import gunicorn_conf
server = types.SimpleNamespace(cfg=types.SimpleNamespace(bind=["127.0.0.1:8000"]))
gunicorn_conf.on_starting(server)
print(json.dumps(sorted(sys.modules)))
"""

#: ``create_app`` as a worker runs it, then the modules loaded.
APP = """
import json, sys
from mcpq.frontend.app import create_app
from mcpq.shared.settings import Settings
create_app(Settings.from_env())
print(json.dumps(sorted(sys.modules)))
"""


def modules_after(code: str, **env: str) -> set[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MCPQ_")}
    environ.update(
        MCPQ_TOOLS="mcpq.demo", MCPQ_DATA_KEYS="plaintext", MCPQ_LOG_LEVEL="ERROR", **env
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_without_oauth_the_app_never_imports_httpx_or_jwt() -> None:
    loaded = modules_after(APP)
    assert "mcpq.frontend.app" in loaded
    assert [name for name in OAUTH_LIBRARIES if name in loaded] == []


def test_with_oauth_the_app_imports_them() -> None:
    loaded = modules_after(APP, **OAUTH_ENV)
    assert [name for name in OAUTH_LIBRARIES if name in loaded] == list(OAUTH_LIBRARIES)


def test_the_master_imports_what_the_workers_would_load_after_the_fork() -> None:
    loaded = modules_after(MASTER)
    assert {"mcpq.frontend.app", *gunicorn_conf._POST_FORK_MODULES} <= loaded
    assert [name for name in OAUTH_LIBRARIES if name in loaded] == []


def test_with_oauth_the_master_imports_its_libraries_too() -> None:
    loaded = modules_after(MASTER, **OAUTH_ENV)
    assert [name for name in OAUTH_LIBRARIES if name in loaded] == list(OAUTH_LIBRARIES)


@pytest.mark.parametrize("name", gunicorn_conf._POST_FORK_MODULES)
def test_every_module_the_master_preloads_exists(name: str) -> None:
    # The master skips a module it cannot import (only memory is at stake): a release that
    # moved one must fail here instead.
    importlib.import_module(name)


def test_the_web_workers_load_no_websocket_library() -> None:
    code = """
import json, sys
from unittest import mock
import gunicorn.config
from mcpq.ops.runtime.uvicorn_worker import McpqUvicornWorker
cfg = gunicorn.config.Config()
log = mock.MagicMock()
log.error_log.handlers = log.access_log.handlers = []
log.error_log.level = log.access_log.level = 40
worker = McpqUvicornWorker(1, 0, [], None, 30, cfg, log)
worker.config.app = lambda scope, receive, send: None
worker.config.load()
assert worker.config.ws_protocol_class is None
print(json.dumps(sorted(sys.modules)))
"""
    loaded = modules_after(code)
    assert "mcpq.ops.runtime.uvicorn_worker" in loaded
    assert "websockets" not in loaded and "wsproto" not in loaded
