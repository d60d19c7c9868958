"""Every client-supplied value in a log line is escaped and capped, in both formats, once in the
formatters: one record is always exactly one line (a traceback follows, indented, in text mode)."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from mcpq.shared.logs import MAX_FIELD_CHARS, JsonFormatter, TextFormatter, escape, safe

NASTY = "a\rb\nc\x1bd\x85e\u2028f\u2029g\x00h\x7fi\tj"
FORMATTERS = [JsonFormatter(), TextFormatter()]


def record(msg: str, *args: object, exc: bool = False, **extra: object) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise AttributeError("boom\n12:00:00 INFO    mcpq.web: forged")
        except AttributeError:
            exc_info = sys.exc_info()
    rec = logging.LogRecord("mcpq.web", logging.INFO, __file__, 1, msg, args, exc_info)
    rec.__dict__.update(extra)
    return rec


def test_escape_writes_every_control_and_separator_as_an_escape() -> None:
    assert escape(NASTY) == "a\\rb\\nc\\x1bd\\x85e\\u2028f\\u2029g\\x00h\\x7fi\\tj"
    assert escape("plain ünïcode ✓") == "plain ünïcode ✓"


def test_safe_caps_and_marks_the_cut_and_leaves_non_strings_alone() -> None:
    assert safe("m" * 10_000) == "m" * MAX_FIELD_CHARS + "...[9800 more chars]"
    assert safe("m" * MAX_FIELD_CHARS) == "m" * MAX_FIELD_CHARS
    assert safe(42) == 42 and safe(1.5) == 1.5 and safe(None) is None


@pytest.mark.parametrize("formatter", FORMATTERS, ids=["json", "text"])
def test_extra_fields_and_message_arguments_cannot_add_a_line(formatter: logging.Formatter) -> None:
    line = formatter.format(
        record("unknown tool %s", NASTY, method=NASTY, tool="t" * 5000, http_status=400)
    )
    assert len(line.splitlines()) == 1, line
    assert "\n" not in line and "\r" not in line and "\u2028" not in line and "\x85" not in line
    assert "...[4800 more chars]" in line
    assert len(line) < 2000


def test_json_lines_stay_json_with_the_values_escaped() -> None:
    entry = json.loads(JsonFormatter().format(record("m %s", "x\ny", method="a\u2028b", n=3)))
    assert entry["msg"] == "m x\\ny"
    assert entry["method"] == "a\\u2028b"
    assert entry["n"] == 3


def test_a_json_traceback_stays_on_its_line() -> None:
    line = JsonFormatter().format(record("failed", exc=True, method="m"))
    assert len(line.splitlines()) == 1
    assert "forged" in json.loads(line)["exc"]


def test_a_text_traceback_follows_indented_so_no_line_passes_for_a_record() -> None:
    text = TextFormatter().format(record("failed", exc=True, method="m"))
    first, *trace = text.split("\n")
    assert first.endswith("failed  method=m")
    assert trace[0] == "    Traceback (most recent call last):"
    assert all(line.startswith("    ") for line in trace), trace
    assert trace[-2:] == ["    AttributeError: boom", "    12:00:00 INFO    mcpq.web: forged"]


def test_mapping_arguments_are_made_safe_too() -> None:
    rec = logging.LogRecord(
        "mcpq.web", logging.INFO, __file__, 1, "%(who)s", ({"who": "x\ny"},), None
    )
    assert TextFormatter().format(rec).endswith("x\\ny")
