"""The OTLP/HTTP receiver the tests use: ``mcpq.ops.harness.otlp_receiver`` (the benchmarks use it
too, and ``ops`` imports nothing from ``tests``); and the scan of what it got for secrets."""

from mcpq.ops.harness.otlp_receiver import KINDS, OtlpReceiver, ReceivedSpan

__all__ = ["KINDS", "OtlpReceiver", "ReceivedSpan", "scan", "traced_env"]


def traced_env(receiver: OtlpReceiver) -> dict[str, str]:
    """A test stack's tracing: on, exported to ``receiver`` every 100 ms; and its questions
    parking their runs after 1 s."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "MCPQ_INPUT_HOLD_S": "1",
    }


def scan(spans: list[ReceivedSpan], *secrets: str) -> list[str]:
    """Every place one of ``secrets`` shows up in what was exported: a span's name, an
    attribute's value, an event's name or attributes."""
    found = []
    for span in spans:
        texts = [span.name, *map(str, span.attributes.values())]
        texts += [f"{name} {attributes}" for name, attributes in span.events]
        found += [f"{span.name}: {t}" for t in texts if any(s in t for s in secrets)]
    return found
