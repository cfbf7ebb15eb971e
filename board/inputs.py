"""Input shaping (SPEC-0034 REQ-5): every argument a caller gives is checked or cut here
before any statement runs, so a transition never starts on input it would refuse."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from typing import Any
from urllib.parse import urlsplit

from board.errors import Invalid, NotFound
from board.vocabulary import ARTIFACT_MAX_BYTES, CLAIMANT_MAX_BYTES, RESULT_MAX_BYTES

CAIRN_ARTIFACT = re.compile(r"mcp://cairn/[A-Za-z0-9_-]{1,64}")
AGENT_ID_PATTERN = re.compile(r"[A-Za-z0-9_.:/-]{1,128}")
USERNAME_PATTERN = re.compile(r"[A-Za-z0-9_.@-]{1,64}")



def cut_utf8(text: str, limit: int) -> tuple[str, bool]:
    """Cut text to at most limit UTF-8 bytes without splitting a character."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text, False
    return raw[:limit].decode("utf-8", "ignore"), True


# What Postgres text cannot hold (NUL) and UTF-8 cannot encode (a lone surrogate, which JSON
# can carry as "\ud800"; a paired one arrives already joined into one character).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# Todo ids are minted as 36-character UUIDs; the column is text, so any other string up to this
# length might be one (inserted by hand or migrated), and nothing longer is.
TODO_ID_MAX_CHARS = 256


def text_problem(value: Any) -> str | None:
    """What makes a value unstorable as text, anywhere in it (a string, or the keys and values
    of JSON objects and arrays at any depth); None when nothing does."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            found = _UNSTORABLE.search(item)
            if found:
                return "NUL characters" if found.group() == "\x00" else "lone surrogates (unpaired UTF-16 halves)"
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, (list, tuple)):
            pending.extend(item)
    return None


def storable(value: Any, argument: str) -> None:
    """Refuse a value holding a NUL or a lone surrogate as invalid, naming the argument."""
    problem = text_problem(value)
    if problem:
        raise Invalid(f"{argument} must not contain {problem}", argument=argument)


def clean_claimant(claimant: Any) -> str | None:
    if claimant is None:
        return None
    if not isinstance(claimant, str):
        raise Invalid("claimant must be a string", argument="claimant")
    stripped = "".join(ch for ch in claimant if unicodedata.category(ch) != "Cc")
    storable(stripped, "claimant")  # control characters (NUL among them) are removed; a lone surrogate is not
    return cut_utf8(stripped, CLAIMANT_MAX_BYTES)[0]


def clean_artifact(artifact: Any) -> str | None:
    if artifact is None:
        return None
    if not isinstance(artifact, str):
        raise Invalid("artifact must be a string", argument="artifact")
    storable(artifact, "artifact")
    if len(artifact.encode("utf-8")) > ARTIFACT_MAX_BYTES:
        raise Invalid(f"artifact must be at most {ARTIFACT_MAX_BYTES} bytes", argument="artifact")
    if CAIRN_ARTIFACT.fullmatch(artifact) or is_https_url(artifact):
        return artifact
    raise Invalid(
        "artifact must be mcp://cairn/<id> (letters, digits, _ or -, at most 64) or an absolute https URL",
        argument="artifact",
    )


def is_https_url(value: str) -> bool:
    if any(ch.isspace() or unicodedata.category(ch) == "Cc" for ch in value):
        return False
    try:
        parts = urlsplit(value)
        parts.port  # raises on a malformed port
    except ValueError:
        return False
    return parts.scheme == "https" and bool(parts.hostname) and value.lower().startswith("https://")


def json_value(value: Any, argument: str) -> Any:
    storable(value, argument)
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        raise Invalid(f"{argument} must be JSON", argument=argument) from None
    if len(text.encode("utf-8")) > RESULT_MAX_BYTES:
        raise Invalid(f"{argument} must be at most {RESULT_MAX_BYTES} bytes of JSON", argument=argument)
    return value


def json_object(value: Any, argument: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Invalid(f"{argument} must be a JSON object", argument=argument)
    return json_value(value, argument)


def positive_int(value: Any, argument: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise Invalid(f"{argument} must be an integer from {lo} to {hi}", argument=argument)
    return value


def checked_todo_id(value: Any, op: str | None = None) -> str:
    """A todo id to look up. A string that no todo can have (a NUL, a lone surrogate, too
    long) is answered exactly as an unknown id is: NotFound, with the same body."""
    if not isinstance(value, str) or not value:
        raise Invalid("id must be a non-empty string", argument="id", op=op)
    if len(value) > TODO_ID_MAX_CHARS or _UNSTORABLE.search(value):
        raise NotFound(op=op)
    return value


def hash_token(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


# -- form text (the Board's forms post strings) -------------------------------------------

def json_object_text(text: str, argument: str) -> dict:
    """A JSON object typed into a form field; blank means {}. The message says where the
    text stops being JSON, so it can be shown next to the field."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise Invalid(f"{argument} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}",
                      argument=argument) from None
    except RecursionError:
        raise Invalid(f"{argument} is nested too deeply", argument=argument) from None
    if not isinstance(value, dict):
        raise Invalid(f'{argument} must be a JSON object, like {{"key": "value"}}', argument=argument)
    return json_object(value, argument)


def int_text(text: str, argument: str, lo: int, hi: int) -> int:
    """A whole number typed into a form field, from lo to hi."""
    try:
        value = int(text.strip(), 10)
    except ValueError:
        value = None
    if value is None or not lo <= value <= hi:
        raise Invalid(f"{argument} must be a whole number from {lo} to {hi}", argument=argument)
    return value
