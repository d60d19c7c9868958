"""Multi-host tests: mcpq on several hosts (network namespaces on a bridge), see ``netns``."""
