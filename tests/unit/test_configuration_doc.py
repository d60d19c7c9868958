"""Every setting is documented in docs/configuration.md, and nothing documented is stale."""

import re
from pathlib import Path

from mcpq.shared.settings import Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_every_setting_is_documented() -> None:
    documented = set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", DOC.read_text(), re.M))
    assert set(Settings.env_names()) - documented == set()


def test_nothing_documented_is_unknown() -> None:
    documented = set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", DOC.read_text(), re.M))
    assert documented - set(Settings.env_names()) == set()
