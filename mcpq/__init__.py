"""mcpq's client side: :mod:`mcpq.client`, a Python client for MCP tasks (the ``client``
extra)."""
