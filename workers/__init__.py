"""Celery workers: they claim tasks from the store and run tools. They never speak MCP."""
