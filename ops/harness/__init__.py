"""The test and benchmark harness (stacks of real processes, clients, clusters). Not
installed: the wheel leaves it out (``pyproject.toml``); it runs from a checkout."""
