"""Logging for `switchboard serve` and the CLI: one handler on the root logger, so every
logger (ours, uvicorn's, the MCP SDK's, any library's) writes through one formatter, and no
log line can be forged by what a caller sends.

- text (the default): `time LEVEL logger message`, exactly one record a line. Every
  character Python does not count as printable (control characters, \\n, \\r, ESC, bidi
  overrides and the other format characters, line separators, lone surrogates) in the
  message, the logger name and the exception text is shown as an escape (\\n, \\x1b,
  \\u202e), so nothing can start a new line or drive a terminal. A traceback follows its
  message on the same line, its line breaks shown as \\n.
- json (SWITCHBOARD_LOG_FORMAT=json): one JSON object a line: time (UTC), level, logger,
  message, the record's extra fields (tool, endpoint_id, todo_id, code, ...) and exception;
  strings escaped the same way (an exception keeps its line breaks, which JSON encodes).

The access log (uvicorn's, logger uvicorn.access) never shows a credential a client put in
a query string: the value of every parameter whose name looks like one (access_token,
token, code, refresh_token, client_secret, password, api_key, signature, ...) is written
`[redacted]` (redact_query, applied by RedactQuery).

A log call that puts an untrusted value (an id, a tool name, a claimant, a username, a
path) into its message passes it through field(): capped at FIELD_MAX characters with an
ellipsis, and quoted when it holds a space, a quote or '=' so it cannot pose as another
key=value. As a backstop for every logger, a message is capped at MESSAGE_MAX characters,
an exception text at EXCEPTION_MAX and an extra string field at FIELD_MAX.
"""

from __future__ import annotations

import json
import logging
import re
from urllib.parse import unquote
from datetime import datetime, timezone

FORMATS = ("text", "json")
FIELD_MAX = 128
MESSAGE_MAX = 4096
EXCEPTION_MAX = 16384
ELLIPSIS = "\u2026"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"

_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# What every LogRecord has; anything else on a record came in through `extra`. uvicorn's
# color_message is its message again with terminal colours: left out.
_RECORD_ATTRS = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message", "asctime", "color_message"}


REDACTED = "[redacted]"
# A query parameter's name that looks like it carries a credential.
_CREDENTIAL_NAME = re.compile(
    r"token|secret|passw|pwd|code|key|assertion|credential|signature|session|auth|jwt|^sig$", re.IGNORECASE)


def redact_query(target: str) -> str:
    """A request target (path and query) with the value of each credential-like query
    parameter replaced by [redacted]; everything else as it was."""
    path, mark, query = target.partition("?")
    if not mark:
        return target
    pairs = []
    for pair in query.split("&"):
        name, eq, _ = pair.partition("=")
        if _CREDENTIAL_NAME.search(unquote(name.replace("+", " "))):
            pair = f"{name}={REDACTED}"
        pairs.append(pair)
    return f"{path}?{'&'.join(pairs)}"


class RedactQuery(logging.Filter):
    """On the access log's records: every argument holding a request target redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact_query(a) if isinstance(a, str) and "?" in a else a for a in record.args)
        return True


class WithoutCallerValues(logging.Filter):
    """On the records of a library that quotes what a caller sent when it refuses it (the A2A
    SDK's request errors and their tracebacks: a message's text, a title): every argument
    but a number left out, and the traceback of a refusal dropped (one of a bug is kept)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(a if isinstance(a, (int, float)) else "(left out)" for a in record.args)
        if not str(record.msg).startswith("Unhandled"):
            record.exc_info = record.exc_text = None
        return True


# The loggers WithoutCallerValues is put on: the A2A SDK's JSON-RPC dispatchers (1.0 and 0.3)
# and its version check.
CALLER_QUOTING_LOGGERS = ("a2a.server.routes.jsonrpc_dispatcher", "a2a.compat.v0_3.jsonrpc_adapter",
                          "a2a.utils.version_validator")


def _escape_char(ch: str) -> str:
    if ch in _SHORT:
        return _SHORT[ch]
    n = ord(ch)
    if n < 0x100:
        return f"\\x{n:02x}"
    if n < 0x10000:
        return f"\\u{n:04x}"
    return f"\\U{n:08x}"


def escape(text: str, keep: str = "") -> str:
    """text with every character that is not printable (str.isprintable) escaped, except
    those in keep. Backslashes stay as they are."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in keep else _escape_char(ch) for ch in text)


def cap(text: str, limit: int = FIELD_MAX) -> str:
    return text if len(text) <= limit else text[:limit] + ELLIPSIS


def field(value: object, limit: int = FIELD_MAX) -> str:
    """An untrusted value for a key=value log line: capped, and quoted (with \\ and " escaped)
    when empty or holding whitespace, a quote or '='. The formatter escapes the rest."""
    text = cap(str(value), limit)
    if text and not any(ch.isspace() or ch in "\"=" for ch in text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class TextFormatter(logging.Formatter):
    """One record, one line, every field escaped."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = cap(record.message, MESSAGE_MAX)
        return super().formatMessage(record)

    def formatException(self, ei) -> str:
        return cap(super().formatException(ei), EXCEPTION_MAX)

    def format(self, record: logging.LogRecord) -> str:
        # The parent joins message, traceback and stack with "\n"; escaped, they stay on one line.
        return escape(super().format(record))


def _plain(value: object) -> object:
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    return escape(cap(str(value)))


class JsonFormatter(logging.Formatter):
    """One JSON object a line."""

    def formatException(self, ei) -> str:
        return cap(super().formatException(ei), EXCEPTION_MAX)

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": escape(record.name),
            "message": escape(cap(record.getMessage(), MESSAGE_MAX)),
        }
        for key, value in record.__dict__.items():
            if key not in _RECORD_ATTRS and not key.startswith("_"):
                out.setdefault(key, _plain(value))
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            out["exception"] = escape(record.exc_text, keep="\n")
        if record.stack_info:
            out["stack"] = escape(cap(self.formatStack(record.stack_info), EXCEPTION_MAX), keep="\n")
        return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


def formatter(log_format: str = "text") -> logging.Formatter:
    return JsonFormatter() if log_format == "json" else TextFormatter()


def configure(log_format: str = "text", level: int = logging.INFO) -> None:
    """Send every logger's records to stderr through the one formatter (replacing any
    handler set up before). uvicorn is started with log_config=None so it adds none."""
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(log_format))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactQuery) for f in access.filters):
        access.addFilter(RedactQuery())
    # The A2A SDK warns on every card it serves without skills; the public card lists none by
    # design (docs/a2a.md), so each fetch of it would log two warnings.
    logging.getLogger("a2a.utils.proto_utils").setLevel(logging.ERROR)
    for name in CALLER_QUOTING_LOGGERS:
        quoting = logging.getLogger(name)
        if not any(isinstance(f, WithoutCallerValues) for f in quoting.filters):
            quoting.addFilter(WithoutCallerValues())
