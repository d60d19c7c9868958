"""MCP method handlers. Each takes the services and the validated request, returns a result
object (``resultType`` and ``_meta.serverInfo`` are stamped by the dispatcher)."""
