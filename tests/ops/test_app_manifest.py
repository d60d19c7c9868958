"""The Heroku manifest (``app.json``), ``.python-version`` and the Grafana dashboard agree with the
code: the formation is the Procfile's, every variable is one mcpq (or Flower) reads, and the
buildpack can find something to install.
"""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

import pytest

from mcpq.ops.harness.stack import REPO
from mcpq.shared.settings import Settings

pytestmark = [pytest.mark.ops]

FLOWER_OPTIONS = {"FLOWER_BASIC_AUTH", "FLOWER_UNAUTHENTICATED_API", "FLOWER_TASKS_COLUMNS"}


def app_json() -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((REPO / "app.json").read_text())
    return manifest


def procfile_types() -> set[str]:
    text = (REPO / "Procfile").read_text()
    return set(re.findall(r"^([A-Za-z0-9_-]+):", text, re.M))


def test_app_json_formation_is_the_procfile() -> None:
    manifest = app_json()
    assert set(manifest["formation"]) == procfile_types()
    assert {"web", "worker", "worker_bulk", "flower"} <= set(manifest["formation"])
    assert manifest["buildpacks"] == [{"url": "heroku/python"}]


def test_app_json_redis_and_secret() -> None:
    manifest = app_json()
    (redis,) = [a for a in manifest["addons"] if str(a["plan"]).startswith("heroku-redis")]
    assert redis.get("as", "REDIS") == "REDIS"  # the add-on sets REDIS_URL, what mcpq reads
    assert manifest["env"]["MCPQ_SECRET"]["generator"] == "secret"
    assert "REDIS_URL" not in manifest["env"]  # comes from the add-on
    known = set(Settings.env_names()) | FLOWER_OPTIONS
    assert set(manifest["env"]) <= known, set(manifest["env"]) - known


def test_python_version_satisfies_requires_python() -> None:
    pinned = (REPO / ".python-version").read_text().strip()
    assert re.fullmatch(r"3\.\d+", pinned), pinned  # major.minor: the buildpack takes patches
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    minimum = re.fullmatch(r">=\s*3\.(\d+)", requires)
    assert minimum is not None and int(pinned.split(".")[1]) >= int(minimum.group(1)), requires


def test_buildpack_finds_something_to_install() -> None:
    names = ("requirements.txt", "Pipfile", "poetry.lock", "uv.lock")
    assert any((REPO / name).exists() for name in names)


def test_grafana_dashboard_is_importable() -> None:
    dashboard = json.loads((REPO / "ops" / "grafana" / "mcpq.json").read_text())
    assert dashboard["title"] == "mcpq" and dashboard["uid"]
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert "datasource" in variables
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    traced = 0
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        if panel["datasource"]["type"] == "tempo":  # traces: a TraceQL query on ${traces}
            traced += 1
            assert panel["datasource"]["uid"] == "${traces}", panel["title"]
            for target in panel["targets"]:
                query = target["query"]
                assert target["queryType"] == "traceql" and query.startswith("{"), query
                assert query.count("{") == query.count("}") and query.count('"') % 2 == 0, query
                used = set(re.findall(r"\$\{(\w+)", query))
                assert used <= variables, (panel["title"], used)
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"] and all(t["expr"] for t in panel["targets"]), panel["title"]
        for target in panel["targets"]:
            assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]
            used = set(re.findall(r"\$(\w+)", target["expr"])) - {"__rate_interval"}
            assert used <= variables, (panel["title"], used)
    assert traced and "traces" in variables


def test_the_dashboard_s_trace_queries_read_attributes_mcpq_sets() -> None:
    """Each ``span.<attribute>`` a TraceQL query or a link of the dashboard names is one that
    mcpq's spans carry (set by the web's request spans or the workers' run spans), so a renamed
    attribute cannot leave a panel silently empty."""
    text = (REPO / "ops" / "grafana" / "mcpq.json").read_text()
    named = set(re.findall(r"span\.([a-z_.]+[a-z])", text))
    assert {"gen_ai.tool.name", "mcpq.run.outcome", "mcp.method.name"} <= named, named
    sources = ["frontend/request_spans.py", "workers/celery_app.py"]
    code = "".join((REPO / source).read_text() for source in sources)
    assert {name for name in named if f'"{name}"' not in code} == set()
