"""The web tier: MCP over Streamable HTTP (Falcon ASGI under gunicorn). Never runs tool code."""
