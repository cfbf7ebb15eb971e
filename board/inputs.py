"""Input shaping (SPEC-0034 REQ-5): every argument a caller gives is checked or cut here
before any statement runs, so a transition never starts on input it would refuse."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from typing import Any
from urllib.parse import urlsplit

from board.errors import Invalid
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


def no_nul(value: str, argument: str) -> None:
    if "\x00" in value:
        raise Invalid(f"{argument} must not contain NUL characters", argument=argument)


def clean_claimant(claimant: Any) -> str | None:
    if claimant is None:
        return None
    if not isinstance(claimant, str):
        raise Invalid("claimant must be a string", argument="claimant")
    stripped = "".join(ch for ch in claimant if unicodedata.category(ch) != "Cc")
    return cut_utf8(stripped, CLAIMANT_MAX_BYTES)[0]


def clean_artifact(artifact: Any) -> str | None:
    if artifact is None:
        return None
    if not isinstance(artifact, str):
        raise Invalid("artifact must be a string", argument="artifact")
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
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        raise Invalid(f"{argument} must be JSON", argument=argument) from None
    if "\\u0000" in text:
        raise Invalid(f"{argument} must not contain NUL characters", argument=argument)
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


def checked_todo_id(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise Invalid("id must be a non-empty string", argument="id")
    return value


def hash_token(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()
