"""The log formatters (board/logs.py): whatever a caller or a library puts into a record,
the text format writes one line with every unprintable character escaped, and the JSON
format one parseable object; untrusted values are capped and quoted."""

from __future__ import annotations

import io
import json
import logging

import pytest

from board import logs
from board.config import from_env
from board.errors import Invalid

FORGED = "zz\nERROR - 2026-01-01 00:00:00,000 ERROR switchboard FORGED"
HOSTILE = ["\n", "\r", "\x1b[2J", "\x00", "\x7f", "\u202e", "\u2066", "\u200b", "\u2028", "\u2029", "\ufeff",
           "\ud800", "\x85"]


def emit(formatter: logging.Formatter, msg: str, *args, exc: BaseException | None = None, **extra) -> str:
    """What one record on a library-like logger comes out as."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    logger = logging.getLogger("some.library")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        if exc is None:
            logger.warning(msg, *args, extra=extra or None)
        else:
            try:
                raise exc
            except BaseException:
                logger.exception(msg, *args, extra=extra or None)
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    return out.getvalue()


def test_a_forged_line_in_a_message_argument_stays_on_its_record_line_escaped():
    out = emit(logs.TextFormatter(), "mcp call todo=%s code=%s", FORGED, "ok")
    assert out.count("\n") == 1 and out.endswith("\n")
    assert "todo=zz\\nERROR - 2026-01-01 00:00:00,000 ERROR switchboard FORGED code=ok" in out


@pytest.mark.parametrize("char", HOSTILE, ids=[f"U+{ord(c[0]):04X}" for c in HOSTILE])
def test_no_control_or_format_character_reaches_the_text_log_raw(char):
    out = emit(logs.TextFormatter(), "id=%s", f"a{char}b")
    body = out[:-1]
    assert body.isprintable(), repr(out)
    assert "\\" in body.partition("id=")[2]
    out.encode("utf-8")  # a lone surrogate would make the stream's encoder fail


def test_escapes_read_as_python_would_write_them():
    out = emit(logs.TextFormatter(), "%s", "\n\r\t\x1b\u202e\U000e0001\ud800")
    assert out.rstrip("\n").endswith("\\n\\r\\t\\x1b\\u202e\\U000e0001\\ud800")


def test_plain_text_and_non_latin_letters_are_left_as_they_are():
    out = emit(logs.TextFormatter(), "queue=%s title=%s", "q", "Grüße, 東京 \\ path")
    assert out.endswith("some.library queue=q title=Grüße, 東京 \\ path\n")


def test_a_forged_line_in_exception_text_stays_on_its_record_line():
    out = emit(logs.TextFormatter(), "call failed", exc=RuntimeError(FORGED + "\x1b[31m"))
    assert out.count("\n") == 1
    assert "call failed\\nTraceback (most recent call last):\\n" in out
    assert "RuntimeError: zz\\nERROR - 2026-01-01" in out and "\x1b" not in out


def test_a_message_from_any_logger_is_capped():
    out = emit(logs.TextFormatter(), "%s", "x" * 100_000)
    assert "x" * logs.MESSAGE_MAX + logs.ELLIPSIS in out and len(out) < logs.MESSAGE_MAX + 200


def test_field_caps_a_long_value_with_an_ellipsis():
    assert logs.field("a" * 1000) == "a" * 128 + "\u2026"
    assert logs.field("a" * 128) == "a" * 128


def test_field_quotes_a_value_that_could_pose_as_another_field():
    assert logs.field("x code=ok") == '"x code=ok"'
    assert logs.field('a"b\\c d') == '"a\\"b\\\\c d"'
    assert logs.field("") == '""'
    assert logs.field("todo-1") == "todo-1"


def test_the_json_format_writes_one_object_a_line_with_the_extra_fields():
    out = emit(logs.JsonFormatter(), "mcp call todo=%s", FORGED, tool="get_todo", endpoint_id="e1",
               todo_id=FORGED, code="not_found", duration_ms=1.25, protocol="2026-07-28")
    assert out.count("\n") == 1
    record = json.loads(out)
    assert record["level"] == "WARNING" and record["logger"] == "some.library"
    assert record["time"].endswith("+00:00")
    assert record["message"] == "mcp call todo=zz\\nERROR - 2026-01-01 00:00:00,000 ERROR switchboard FORGED"
    assert record["todo_id"] == record["message"].removeprefix("mcp call todo=")
    assert (record["tool"], record["endpoint_id"], record["code"], record["duration_ms"], record["protocol"]) == (
        "get_todo", "e1", "not_found", 1.25, "2026-07-28")


@pytest.mark.parametrize("char", HOSTILE, ids=[f"U+{ord(c[0]):04X}" for c in HOSTILE])
def test_json_values_carry_no_control_or_format_character(char):
    out = emit(logs.JsonFormatter(), "id=%s", f"a{char}b", todo_id=f"a{char}b")
    out.encode("utf-8")
    record = json.loads(out)
    assert record["message"].isprintable() and record["todo_id"].isprintable()


def test_json_caps_extra_values_and_keeps_the_traceback_as_a_field():
    out = emit(logs.JsonFormatter(), "failed", exc=ValueError("boom\u202e"), todo_id="L" * 1000)
    assert out.count("\n") == 1
    record = json.loads(out)
    assert record["todo_id"] == "L" * 128 + "\u2026"
    assert record["exception"].startswith("Traceback (most recent call last):\n")
    assert record["exception"].endswith("ValueError: boom\\u202e")


def test_log_format_is_text_unless_set_to_json():
    assert from_env({}).log_format == "text"
    assert from_env({"SWITCHBOARD_LOG_FORMAT": "json"}).log_format == "json"
    assert from_env({"SWITCHBOARD_LOG_FORMAT": " JSON "}).log_format == "json"


def test_an_unknown_log_format_is_refused_naming_the_variable():
    with pytest.raises(Invalid) as err:
        from_env({"SWITCHBOARD_LOG_FORMAT": "xml"})
    assert err.value.argument == "SWITCHBOARD_LOG_FORMAT"
    assert "SWITCHBOARD_LOG_FORMAT must be text or json" in err.value.message and "'xml'" in err.value.message
