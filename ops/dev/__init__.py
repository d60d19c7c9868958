"""``mcpq dev``: Redis, the web and the workers on one machine, supervised."""
