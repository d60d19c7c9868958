"""Test-only resources, and the tool that announces their updates, loaded through ``MCPQ_TOOLS``
by the stack of ``tests/e2e/test_resource_notices.py`` (``tests.e2e.resource_tools``). Written
against the public API only, as a user's module is."""

from __future__ import annotations

from mcpq import App, Context

app = App("e2e-notes")

BOARD, VAULT = "e2e://board", "e2e://vault"


@app.resource(BOARD, mime_type="text/plain")
def board() -> str:
    """Test-only: a static resource."""
    return "the board"


@app.resource("e2e://notes/{name}", mime_type="text/plain")
def note(name: str) -> str:
    """Test-only: a resource per name (a template)."""
    return f"note {name}"


@app.resource(VAULT, scopes=("vault",))
def vault() -> str:
    """Test-only: a resource only callers granted ``vault`` may read."""
    return "the vault"


@app.tool(task="optional", description="Test-only: announces that the resource at `uri` changed.")
def announce_update(ctx: Context, uri: str) -> str:
    # On the worker: through Redis, to every web replica's streams.
    return f"announced: {app.resource_updated(uri)}"
