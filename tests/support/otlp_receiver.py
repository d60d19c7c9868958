"""The OTLP/HTTP receiver the tests use: ``mcpq.ops.harness.otlp_receiver`` (the benchmarks use it
too, and ``ops`` imports nothing from ``tests``)."""

from mcpq.ops.harness.otlp_receiver import KINDS, OtlpReceiver, ReceivedSpan

__all__ = ["KINDS", "OtlpReceiver", "ReceivedSpan"]
