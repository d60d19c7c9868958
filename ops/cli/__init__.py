"""The ``mcpq`` command line: its entry point and every subcommand but ``mcpq dev``."""
