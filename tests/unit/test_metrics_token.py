"""``/metrics`` is never public: off (404, like any unknown path) without ``MCPQ_METRICS_TOKEN``,
401 without its bearer token (or with a wrong one), the series with it; never a 500."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mcpq.frontend.web_metrics import bearer_matches
from tests.unit.fakes import Mcp

TOKEN = "a-metrics-token-of-reasonable-length"


def test_without_a_token_metrics_is_off(make_mcp: Callable[..., Mcp]) -> None:
    app = make_mcp()
    for headers in ({}, {"Authorization": "Bearer "}, {"Authorization": f"Bearer {TOKEN}"}):
        got = app.client.simulate_get("/metrics", headers=headers)
        assert got.status_code == 404, headers
        assert b"mcpq_" not in got.content


@pytest.mark.parametrize(
    "header",
    [None, "", "Bearer", "Bearer ", "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x",
     "Bearer \u00e9t\u00e9"],
)  # fmt: skip
def test_a_missing_or_wrong_token_is_401_without_detail(
    make_mcp: Callable[..., Mcp], header: str | None
) -> None:
    app = make_mcp(metrics_token=TOKEN)
    headers = {} if header is None else {"Authorization": header}
    got = app.client.simulate_get("/metrics", headers=headers)
    assert got.status_code == 401
    assert got.headers["www-authenticate"] == 'Bearer realm="metrics"'
    assert b"mcpq_" not in got.content and b"Traceback" not in got.content


def test_the_token_gets_the_series(make_mcp: Callable[..., Mcp]) -> None:
    app = make_mcp(metrics_token=TOKEN)
    for scheme in ("Bearer", "bearer"):
        got = app.client.simulate_get("/metrics", headers={"Authorization": f"{scheme} {TOKEN}"})
        assert got.status_code == 200
        assert b"mcpq_tasks_in_state" in got.content


def test_an_empty_token_matches_nothing() -> None:
    assert not bearer_matches("Bearer ", "")
    assert not bearer_matches(None, "")
    assert bearer_matches(f"Bearer {TOKEN}", TOKEN)
