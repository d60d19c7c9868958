"""Every line that installs mcpq from the package registry names its distribution, ``mcpq-server``:
``mcpq`` on PyPI is another project, so ``pip install 'mcpq[client]'`` would install that one.

The docs, the code (the hints commands print) and the repository's scripts are read; the change
log is history and is left as it was.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SKIPPED_FOLDERS = {".git", ".venv", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
SKIPPED_FILES = {"CHANGELOG.md", "requirements.txt", "requirements-dev.txt"}
TEXT_SUFFIXES = {".md", ".py", ".toml", ".json", ".txt", ".cfg", ".ini", ".sh", ".yml", ".yaml"}
TEXT_NAMES = {"Procfile", "Procfile.dev", ".env.example", "run", "lock"}

# `mcpq` as a requirement: not part of a longer name or a path (`mcpq-server`, `/srv/mcpq`).
_OLD = r"(?<![\w./-])['\"]?mcpq(?![\w-])(?:\[[\w,\s-]*\])?['\"]?(?=[\s'\"=<>~!;]|$)"
#: An installer's command line that installs the old name (``pip install mcpq``, ``pip install
#: -U 'mcpq[client]'``, ``uv pip install mcpq==0.1``, ``pipx install mcpq``).
OLD_INSTALL = re.compile(rf"\b(?:pip3?|pipx|uv pip|uv tool)\s+install\b[^\n`&|;]*?\s{_OLD}")
#: The old name with an extra, anywhere (an extra is only ever installed from the registry).
OLD_EXTRA = re.compile(r"(?<![\w./{-])mcpq\[[A-Za-z]")


def repository_texts() -> list[Path]:
    found = []
    for path in REPO.rglob("*"):
        relative = path.relative_to(REPO)
        if SKIPPED_FOLDERS & set(relative.parts) or not path.is_file():
            continue
        if path.name in SKIPPED_FILES or path.resolve() == Path(__file__).resolve():
            continue
        if path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES:
            found.append(path)
    return found


def old_name_installs(text: str) -> list[str]:
    return [
        line.strip()
        for line in text.splitlines()
        if OLD_INSTALL.search(line) or OLD_EXTRA.search(line)
    ]


def test_the_patterns_tell_the_old_name_from_the_new() -> None:
    old = [
        "pip install mcpq",
        "pip install 'mcpq[client]'",
        'python -m pip install -U "mcpq[client,dev]"',
        "uv pip install mcpq==0.1.0",
        "the `mcpq[client]` extra",
        "pipx install mcpq",
    ]
    new = [
        "pip install 'mcpq-server[client]'",
        "pip install mcpq-server",
        "pip install -e . && mcpq dev",
        'scan_iter(match="[{]mcpq[}]:t:*")',
        "pip install --no-deps --no-build-isolation -e .",
        "pip install --no-deps /srv/mcpq/wheels/mcpq_server-0.1.0-py3-none-any.whl",
        "sudo -u mcpq /srv/mcpq/.venv/bin/pip install --require-hashes -r requirements.txt",
        "pip install --no-deps --no-build-isolation /srv/mcpq",
        "mcpq keys create ci",
    ]
    assert [line for line in old if not old_name_installs(line)] == []
    assert [line for line in new if old_name_installs(line)] == []


def test_no_line_installs_the_old_name_from_the_registry() -> None:
    texts = repository_texts()
    assert any(p.name == "README.md" for p in texts) and any(p.suffix == ".py" for p in texts)
    found = [
        f"{path.relative_to(REPO)}: {line}"
        for path in texts
        for line in old_name_installs(path.read_text(errors="replace"))
    ]
    assert not found, "\n".join(found)
