"""Operations side of mcpq: the `mcpq` command line, process launchers and their configuration.

Nothing here runs MCP or tool code. `ops.cli` turns a Procfile line (`mcpq web`, `mcpq worker`,
`mcpq flower`) into the exact gunicorn or celery command and execs it, so the platform's signals
reach the server directly; `mcpq dev` supervises Redis, web and a worker on one machine.
"""
