"""CI's own tools (the dependency audit, the lock script). Not installed."""
