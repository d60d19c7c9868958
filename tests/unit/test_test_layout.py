"""The suite's own layout: pytest imports test modules by their basename (the tree has no
``__init__.py`` in its test folders), so two test files of one name in two folders break the
whole run's collection ("import file mismatch") — which only the whole run would show."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_basename() -> None:
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
