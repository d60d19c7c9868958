"""Built-in tools: the conformance fixtures and a few demos."""
