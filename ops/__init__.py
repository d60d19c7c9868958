"""Operations side of mcpq, by role: the ``mcpq`` command line (``ops.cli``), the runtime around
the Procfile's processes (``ops.runtime``: the exact gunicorn and Celery command lines, their
configuration, start-up checks) and ``mcpq dev`` (``ops.dev``). Nothing here runs MCP or tool
code.

Not installed (run from a checkout): the test and benchmark harness (``ops.harness``), the
benchmarks (``ops.bench``) and CI's tools (``ops.ci``).
"""
