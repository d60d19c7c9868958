"""``python -m mcpq``: the ``mcpq`` command, where its script is not installed (a buildpack's
app directory: ``heroku run python -m mcpq keys create``)."""

import sys

from mcpq.ops.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
