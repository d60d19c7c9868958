"""The README's tool example, exactly as written: lint-clean, importable, and served as the
tool it describes (its own code, ``myshop``, stands in as a stub module)."""

from __future__ import annotations

import re
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpq.shared.registry import Registry

README = Path(__file__).resolve().parents[2] / "README.md"


def tool_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    (example,) = [block for block in blocks if "@tool(" in block]
    return example


@pytest.fixture
def example_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    (tmp_path / "readme_tool_example.py").write_text(tool_example())
    shop = types.ModuleType("myshop")
    shop.load_order = lambda order_id: {"id": order_id}  # type: ignore[attr-defined]
    shop.payments = types.SimpleNamespace(refund=lambda order, cents: "r-1")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "myshop", shop)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "readme_tool_example"
    sys.modules.pop("readme_tool_example", None)


def test_the_tool_example_is_lint_clean() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "E,F,W,B",
         "--line-length", "100", "--stdin-filename", "readme_tool_example.py", "-"],
        input=tool_example(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_tool_example_is_served_as_described(example_module: str) -> None:
    spec = Registry.from_modules([example_module]).get("refund")
    assert spec is not None
    assert spec.mode == "required" and spec.queue == "mcpq" and spec.ttl_ms == 24 * 3600 * 1000
    assert set(spec.args_model.model_fields) == {"order_id", "amount_cents"}
