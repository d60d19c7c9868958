"""Code shared by the web tier and the workers: settings, wire errors, the tool registry and
the Redis task store. Imports neither Falcon nor Celery."""
