"""Input shaping (SPEC-0034 REQ-5): every argument a caller gives is checked or cut here
before any statement runs, so a transition never starts on input it would refuse."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import unicodedata
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any
from urllib.parse import SplitResult, urlsplit

from board.errors import Invalid, NotFound
from board.store.vocabulary import (AGENT_ID_MAX_CHARS, ARTIFACT_MAX_BYTES, BOARD_SORTS, CHOICE_MAX_BYTES,
                                    CLAIMANT_MAX_BYTES, DELAY_SECONDS_MAX, KEY_MAX_BYTES, LIST_SORTS,
                                    NOTE_MAX_BYTES, PRIORITY_DEFAULT, PRIORITY_MAX, PRIORITY_MIN,
                                    PUSH_AUTH_CREDENTIALS_MAX_CHARS, PUSH_AUTH_SCHEME_MAX_CHARS,
                                    PUSH_CONFIG_ID_MAX_CHARS, PUSH_TOKEN_MAX_CHARS, PUSH_URL_MAX_CHARS,
                                    QUESTION_CHOICES_MAX,
                                    QUESTION_EXPIRES_MAX_SECONDS, RESULT_MAX_BYTES, SEARCH_MAX_CHARS, STATES,
                                    USAGE_COST_MAX, USAGE_MODEL_MAX_BYTES, USAGE_TOKENS_MAX, USERNAME_MAX_CHARS)

CAIRN_ARTIFACT = re.compile(r"mcp://cairn/[A-Za-z0-9_-]{1,64}")
AGENT_ID_PATTERN = re.compile(rf"[A-Za-z0-9_.:/-]{{1,{AGENT_ID_MAX_CHARS}}}")
USERNAME_PATTERN = re.compile(rf"[A-Za-z0-9_.@-]{{1,{USERNAME_MAX_CHARS}}}")
# RFC 3339's date-time: a full date, a time and an offset (Z or +hh:mm), nothing looser.
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")



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


def clean_note(text: Any, limit: int) -> tuple[str, bool]:
    """A note's text: control characters other than newline and tab removed, surrounding
    whitespace stripped, cut to limit UTF-8 bytes on a character boundary (truncated: it was
    cut). Empty after cleaning (nothing but control characters or spaces) is invalid."""
    if not isinstance(text, str):
        raise Invalid("text must be a string", argument="text")
    kept = "".join(ch for ch in text if ch in "\n\t" or unicodedata.category(ch) != "Cc").strip()
    storable(kept, "text")  # control characters (NUL among them) are gone; a lone surrogate is not
    if not kept:
        raise Invalid("text must not be empty (after control characters are removed)", argument="text")
    screen_secrets(kept, "text")
    return cut_utf8(kept, limit)


def clean_question(question: Any, choices: Any, expires_in_seconds: Any) -> dict:
    """An interrupt's question: its text cleaned and cut like a note (question, truncated);
    choices, distinct non-empty strings of at most CHOICE_MAX_BYTES, at most
    QUESTION_CHOICES_MAX of them; expires_in_seconds, a whole number from 1 to
    QUESTION_EXPIRES_MAX_SECONDS. Choices and an expiry need a question."""
    if question is None:
        for name, value in (("choices", choices), ("expires_in_seconds", expires_in_seconds)):
            if value is not None:
                raise Invalid(f"{name} needs a question", argument=name)
        return {"question": None, "question_truncated": False, "choices": None, "expires_in": None}
    if not isinstance(question, str):
        raise Invalid("question must be a string", argument="question")
    try:
        text, truncated = clean_note(question, NOTE_MAX_BYTES)
    except Invalid as e:
        raise Invalid(e.message.replace("text", "question", 1), argument="question") from None
    kept = None
    if choices is not None:
        if not isinstance(choices, list) or not 1 <= len(choices) <= QUESTION_CHOICES_MAX:
            raise Invalid(f"choices must be a list of 1 to {QUESTION_CHOICES_MAX} strings", argument="choices")
        kept = []
        for choice in choices:
            if not isinstance(choice, str):
                raise Invalid("choices must be strings", argument="choices")
            choice = clean_choice(choice)
            if choice in kept:
                raise Invalid(f"choices must differ; {choice!r} is given twice", argument="choices")
            kept.append(choice)
    expires_in = None
    if expires_in_seconds is not None:
        if (isinstance(expires_in_seconds, bool) or not isinstance(expires_in_seconds, (int, float))
                or not 1 <= expires_in_seconds <= QUESTION_EXPIRES_MAX_SECONDS):
            raise Invalid(f"expires_in_seconds must be a number from 1 to {QUESTION_EXPIRES_MAX_SECONDS}",
                          argument="expires_in_seconds")
        expires_in = float(expires_in_seconds)
    return {"question": text, "question_truncated": truncated, "choices": kept, "expires_in": expires_in}


def clean_choice(choice: str) -> str:
    """One choice: control characters removed, surrounding whitespace stripped, 1 to
    CHOICE_MAX_BYTES bytes (a longer one is refused, not cut: it is matched exactly)."""
    kept = "".join(ch for ch in choice if unicodedata.category(ch) != "Cc").strip()
    storable(kept, "choices")
    if not kept or len(kept.encode("utf-8")) > CHOICE_MAX_BYTES:
        raise Invalid(f"choices must each be 1 to {CHOICE_MAX_BYTES} bytes of text", argument="choices")
    return kept


# What is plainly a credential, in what is shown to whoever works on a todo (titles, payloads,
# routing, notes, questions, answers, summaries, results, artifacts): refused rather than
# stored. Only shapes with a fixed prefix, frame or name, so ordinary prose, ids and hashes
# pass; not general DLP. Every shape is searched once from the start of a run it can begin
# (a literal, a lookbehind or a bounded prefix), so screening stays linear in the text.
_MASK = re.compile(r"[*\u2022\u00b7.#xX-]+")  # ***, ••••, xxxx, ----
# What stands in for a value rather than being one: a variable ($PW, ${DB_PASSWORD}), a
# template or format slot (<password>, {password}, {{ pw }}, %(pw)s, %s, [REDACTED]).
_SLOT = re.compile(r"\$\{?\w+\}?|<[^<>]*>|\{\{?[^{}]*\}?\}|%(?:\(\w+\))?s|\[[^\[\]]*\]")
_PLACEHOLDER_WORDS = re.compile(r"(?i)(?:(?:your|my|the|some|db|new|old)[_-]?)?"
                                r"(?:password|passwd|passphrase|pass|pwd|pw|secret|redacted|changeme|example)")
# A value of words, not a password: letters in one case or CamelCase (rotated, NONE, changeme,
# SecretStr), joined by _, - or a space (DB_PASSWORD, see-vault, "in the vault"). A password
# has a digit, a symbol or mixed case.
_WORDS = re.compile(r"(?:[a-z]+|[A-Z]+|(?:[A-Z][a-z]+)+)(?:[_ -](?:[a-z]+|[A-Z]+|(?:[A-Z][a-z]+)+))*")
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")  # settings.DB_PASSWORD, process.env.PW
_ASSIGNED_VALUE = re.compile(r"[^\s\x00\"'`,;&]{0,256}")
ASSIGNED_MIN_CHARS = 4  # password: str, pw=%s, pwd: 12 are not passwords worth the false alarms


def _url_password_real(password: str) -> bool:
    """A URL's password (user:PASSWORD@host) unless empty or a stand-in: masked, a slot, a
    placeholder word (user:password@, :secret@, :changeme@)."""
    return bool(password) and not (_MASK.fullmatch(password) or _SLOT.fullmatch(password)
                                   or _PLACEHOLDER_WORDS.fullmatch(password))


def _assigned_real(text: str, after: int) -> bool:
    """Whether what follows a `password=` / `passwd:` at `after` is a password, not a stand-in
    for one: shorter than ASSIGNED_MIN_CHARS, words (rotated, see vault, NONE, changeme),
    masked, a reference ($PW, ${PW}, %(pw)s, <redacted>, [REDACTED], /run/secrets/db, @file)
    or code (getpass(), os.environ["PW"], settings.DB_PASSWORD) are innocent."""
    if after < len(text) and text[after] in "\"'`":
        end = text.find(text[after], after + 1, after + 258)
        value = text[after + 1:end] if end > 0 else _ASSIGNED_VALUE.match(text, after + 1).group()
    else:
        value = _ASSIGNED_VALUE.match(text, after).group().rstrip(".,:;!?")
    return not (len(value) < ASSIGNED_MIN_CHARS or _WORDS.fullmatch(value) or _MASK.fullmatch(value)
                or value[0] in "$%{<[(@:!/~" or "(" in value or "[" in value or _DOTTED_NAME.fullmatch(value))


def _jwt_header(text: str, found: re.Match) -> bool:
    """A JWT's first segment is base64url of a JSON object naming its algorithm."""
    header = found.group()
    try:
        decoded = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    except (ValueError, RecursionError):  # not base64, not UTF-8, not JSON, or nested past the parser
        return False
    return isinstance(decoded, dict) and isinstance(decoded.get("alg"), str)


_SECRET_SHAPES = (
    # (what it is, literals one of which it must contain, its shape, and for a shape that
    # only finds candidates, what confirms one). The literals are a substring test first:
    # most text holds none, and the shapes are then never searched.
    ("a private key", ("PRIVATE KEY",), re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"), None),
    ("a Switchboard token", ("sb",), re.compile(r"\bsb[arc]?_[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])"), None),
    ("an AWS access key", ("AKIA", "ASIA"), re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), None),
    ("an AWS secret access key", ("ecret", "ECRET"),
     re.compile(r"(?i)(?:aws_?secret_?(?:access_?)?key|secret_?access_?key)[\"']?[ \t]*(?::=|=>|[:=])[ \t]*[\"']?"
                r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"), None),
    ("a GitHub token", ("gh", "github_pat_"),
     re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"), None),
    ("a GitLab token", ("glpat-",), re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"), None),
    ("a Slack token", ("xox",), re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), None),
    ("an API key", ("sk-",), re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{32,}"), None),
    ("a Google API key", ("AIza",), re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), None),
    ("a Stripe secret key", ("_live_",), re.compile(r"\b[rs]k_live_[0-9A-Za-z]{24,}"), None),
    ("an Authorization header", ("uthorization", "UTHORIZATION"),
     re.compile(r"(?i)\bauthorization\s*:\s*(?:bearer|basic|token)\s+\S{8,}"), None),
    ("a bearer token", ("Bearer",), re.compile(r"\bBearer\s+[A-Za-z0-9._~+/-]{20,}=*"), None),
    # header.payload.signature, base64url; the match is the header, confirmed as JSON.
    ("a JWT", ("eyJ",),
     re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}(?=\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{16,})"), _jwt_header),
    ("a URL with a password", ("://",),
     re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s\x00/?#@:]*:(?P<password>[^\s\x00/?#@]*)@"
                r"[^\s\x00/?#@]"), lambda text, found: _url_password_real(found.group("password"))),
    ("a password", ("assw", "ASSW", "assphrase", "ASSPHRASE"),
     re.compile(r"(?i)(?:password|passwd|passphrase)[\"']?[ \t]*(?::=|=>|[:=])[ \t]*"),
     lambda text, found: _assigned_real(text, found.end())),
)


def secret_in(value: str) -> str | None:
    """What credential the text plainly holds (\"a JWT\"), or None."""
    for what, literals, shape, confirm in _SECRET_SHAPES:
        if not any(literal in value for literal in literals):
            continue
        if confirm is None:
            if shape.search(value):
                return what
        elif any(confirm(value, found) for found in shape.finditer(value)):
            return what
    return None


def screen_secrets(value: str | None, argument: str) -> None:
    """Refuse text that plainly holds a credential as invalid, naming the argument and what it
    holds, never the text."""
    what = secret_in(value) if value else None
    if what is not None:
        raise Invalid(f"{argument} looks like it holds a credential ({what}); it is shown to whoever works on "
                      "this todo, so it must not contain secrets", argument=argument)


def screen_json(value: Any, argument: str) -> None:
    """screen_secrets over a JSON value: every key and string, and each object member whose
    value is a string or a number also as "key: value" (so {"password": "..."} reads as the
    assignment it is). The pieces are joined by NUL, which storable() keeps out of the value
    and no shape matches, so no shape spans two of them. Linear in the value's size."""
    pieces, pending = [], [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            pieces.append(item)
        elif isinstance(item, dict):
            for key, member in item.items():
                if isinstance(member, (str, int, float)) and not isinstance(member, bool):
                    pieces.append(f"{key}: {member}")
                else:
                    pieces.append(str(key))
                    pending.append(member)
        elif isinstance(item, (list, tuple)):
            pending.extend(item)
    screen_secrets("\x00".join(pieces), argument)


def answer_fence(asked: Any) -> tuple[bool, datetime | None]:
    """An answer's fence on the question it was given for: (fenced, when that question was
    asked). None: no fence (any question waiting takes it); "": given while no question was
    waiting; else the question's asked_at to the microsecond with its offset, as the todo
    detail view's question key says it."""
    if asked is None:
        return False, None
    if not isinstance(asked, str):
        raise Invalid("asked must be a string", argument="asked")
    if not asked:
        return True, None
    try:
        at = datetime.fromisoformat(asked)
    except ValueError:
        at = None
    if at is None or at.tzinfo is None:
        raise Invalid("asked must be when the question was asked, as the Board drew it", argument="asked")
    return True, at


def clean_usage(usage: Any) -> dict:
    """A closing verb's usage report as the attempt's columns (each None when not given):
    input_tokens and output_tokens integers from 0 to USAGE_TOKENS_MAX, cost_usd a number from
    0 to USAGE_COST_MAX (kept to 6 decimals), model a label cut to USAGE_MODEL_MAX_BYTES bytes
    on a UTF-8 boundary, control characters removed. Anything else is invalid naming usage and the key."""
    out = {"input_tokens": None, "output_tokens": None, "cost_usd": None, "model": None}
    if usage is None:
        return out
    if not isinstance(usage, dict):
        raise Invalid("usage must be an object with input_tokens, output_tokens, cost_usd and model", argument="usage")
    for key, value in usage.items():
        if key not in out:
            raise Invalid(f"usage takes no key {str(key)[:64]!r} (only input_tokens, output_tokens, cost_usd, model)",
                          argument="usage")
        if value is None:
            continue
        if key in ("input_tokens", "output_tokens"):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= USAGE_TOKENS_MAX:
                raise Invalid(f"usage.{key} must be an integer from 0 to {USAGE_TOKENS_MAX}", argument="usage")
            out[key] = value
        elif key == "cost_usd":
            if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                    or not 0 <= value <= USAGE_COST_MAX):
                raise Invalid(f"usage.cost_usd must be a number from 0 to {USAGE_COST_MAX}", argument="usage")
            out[key] = Decimal(repr(value)).quantize(Decimal("0.000001"))
        else:
            if not isinstance(value, str):
                raise Invalid("usage.model must be a string", argument="usage")
            stripped = "".join(ch for ch in value if unicodedata.category(ch) != "Cc")
            storable(stripped, "usage")  # control characters (NUL among them) are removed; a lone surrogate is not
            model = cut_utf8(stripped, USAGE_MODEL_MAX_BYTES)[0]
            out[key] = model or None
    return out


def clean_artifact(artifact: Any) -> str | None:
    if artifact is None:
        return None
    if not isinstance(artifact, str):
        raise Invalid("artifact must be a string", argument="artifact")
    storable(artifact, "artifact")
    if len(artifact.encode("utf-8")) > ARTIFACT_MAX_BYTES:
        raise Invalid(f"artifact must be at most {ARTIFACT_MAX_BYTES} bytes", argument="artifact")
    if CAIRN_ARTIFACT.fullmatch(artifact) or is_https_url(artifact):
        screen_secrets(artifact, "artifact")
        return artifact
    raise Invalid(
        "artifact must be mcp://cairn/<id> (letters, digits, _ or -, at most 64) or an absolute https URL",
        argument="artifact",
    )


def is_https_url(value: str) -> bool:
    return _web_url(value, ("https",)) is not None


def _web_url(value: str, schemes: tuple[str, ...]) -> SplitResult | None:
    """The parts of an absolute URL of one of the schemes, with a host, no spaces or control
    characters and a well-formed port; None for anything else."""
    if any(ch.isspace() or unicodedata.category(ch) == "Cc" for ch in value):
        return None
    try:
        parts = urlsplit(value)
        parts.port  # raises on a malformed port
    except ValueError:
        return None
    if parts.scheme in schemes and parts.hostname and value.lower().startswith(f"{parts.scheme}://"):
        return parts
    return None


def clean_push_config(config_id: Any, url: Any, token: Any, auth_scheme: Any, auth_credentials: Any) -> dict:
    """An A2A push notification config's fields, checked; each error names the field as the
    A2A client wrote it. The URL is http(s) with a host, carrying no credential (those go in
    token or authentication, which are never shown back); empty optional fields are None."""
    fields = {"id": (config_id, PUSH_CONFIG_ID_MAX_CHARS), "url": (url, PUSH_URL_MAX_CHARS),
              "token": (token, PUSH_TOKEN_MAX_CHARS),
              "authentication.scheme": (auth_scheme, PUSH_AUTH_SCHEME_MAX_CHARS),
              "authentication.credentials": (auth_credentials, PUSH_AUTH_CREDENTIALS_MAX_CHARS)}
    out: dict[str, str | None] = {}
    for argument, (value, limit) in fields.items():
        if value is not None and not isinstance(value, str):
            raise Invalid(f"{argument} must be a string", argument=argument)
        if value and len(value) > limit:
            raise Invalid(f"{argument} must be at most {limit} characters", argument=argument)
        if value:
            storable(value, argument)
        out[argument] = value or None
    if not out["url"]:
        raise Invalid("url is required: where to POST the task's status updates", argument="url")
    parts = _web_url(out["url"], ("http", "https"))
    if parts is None or parts.username is not None:
        raise Invalid("url must be an absolute http:// or https:// URL with a host, no spaces and no user or "
                      "password in it", argument="url")
    found = secret_in(out["url"])
    if found is not None:
        raise Invalid(f"url looks like it holds a credential ({found}); pass it as token or authentication, "
                      "which are sent as headers and never shown back", argument="url")
    if out["authentication.credentials"] and not out["authentication.scheme"]:
        raise Invalid("authentication.scheme is required with credentials (e.g. Bearer)",
                      argument="authentication.scheme")
    if out["authentication.scheme"] and not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+", out["authentication.scheme"]):
        raise Invalid("authentication.scheme must be one HTTP auth scheme token (e.g. Bearer)",
                      argument="authentication.scheme")
    for argument in ("token", "authentication.credentials"):
        if out[argument] and any(unicodedata.category(ch) == "Cc" for ch in out[argument]):
            raise Invalid(f"{argument} must not contain control characters (it is sent as a header)",
                          argument=argument)
    return out


def json_value(value: Any, argument: str) -> Any:
    storable(value, argument)
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        raise Invalid(f"{argument} must be JSON", argument=argument) from None
    if len(text.encode("utf-8")) > RESULT_MAX_BYTES:
        raise Invalid(f"{argument} must be at most {RESULT_MAX_BYTES} bytes of JSON", argument=argument)
    screen_json(value, argument)  # after the size check: bounded by RESULT_MAX_BYTES
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


def priority_value(value: Any, argument: str = "priority") -> int:
    """A priority, 0 (the most urgent) to 4; None is the default, 2."""
    if value is None:
        return PRIORITY_DEFAULT
    return positive_int(value, argument, PRIORITY_MIN, PRIORITY_MAX)


def delay_value(value: Any, argument: str = "delay_seconds") -> float:
    """Seconds to wait, 0 to 31 days (None: 0)."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= DELAY_SECONDS_MAX:
        raise Invalid(f"{argument} must be a number of seconds from 0 to {DELAY_SECONDS_MAX} (31 days)",
                      argument=argument)
    return float(value)


def start_time(run_at: Any, delay_seconds: Any, now: datetime | None, prefix: str = "") -> datetime | None:
    """When a todo being added may first be claimed: run_at (RFC 3339 with an offset) or
    delay_seconds from now, not both; None: at once."""
    if run_at is not None and delay_seconds is not None:
        raise Invalid(f"{prefix}run_at and {prefix}delay_seconds cannot both be given; pick one",
                      argument=f"{prefix}run_at")
    if delay_seconds is not None:
        delay = delay_value(delay_seconds, f"{prefix}delay_seconds")
        return (now or datetime.now(timezone.utc)) + timedelta(seconds=delay) if delay > 0 else None
    if run_at is None:
        return None
    rule = f"{prefix}run_at must be an RFC 3339 time with an offset, e.g. 2026-12-05T09:00:00Z"
    if not isinstance(run_at, str) or not _RFC3339.fullmatch(run_at.strip()):
        raise Invalid(rule, argument=f"{prefix}run_at")
    try:
        when = datetime.fromisoformat(run_at.strip().replace("z", "Z").replace("t", "T"))
    except ValueError:
        raise Invalid(rule, argument=f"{prefix}run_at") from None
    if when.tzinfo is None:
        raise Invalid(rule, argument=f"{prefix}run_at")
    return when


def clean_key(value: Any, argument: str = "key") -> str | None:
    """A key, checked as a title is: a string, storable, no secret in it, at most
    KEY_MAX_BYTES bytes in UTF-8 once stripped (an empty one is refused, not taken as none)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid(f"{argument} must be a string of 1 to {KEY_MAX_BYTES} bytes", argument=argument)
    storable(value, argument)
    key = value.strip()
    if not 1 <= len(key.encode("utf-8")) <= KEY_MAX_BYTES:
        raise Invalid(f"{argument} must be a string of 1 to {KEY_MAX_BYTES} bytes", argument=argument)
    screen_secrets(key, argument)
    return key


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


# -- the list's filters and cursor -------------------------------------------------------


def search_text(value: Any, argument: str, *, strip: bool = True) -> str | None:
    """A search text: a string, stripped (an empty one is no filter), storable, bounded."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid(f"{argument} must be a string", argument=argument)
    storable(value, argument)
    value = value.strip() if strip else value
    if len(value) > SEARCH_MAX_CHARS[argument]:
        raise Invalid(f"{argument} must be at most {SEARCH_MAX_CHARS[argument]} characters", argument=argument)
    return value or None


def list_filters(*, state: Any = None, queue: Any = None, dead_letter: Any = False, title: Any = None,
                 claimant: Any = None, payload_key: Any = None, payload_value: Any = None, priority: Any = None,
                 key: Any = None, scheduled: Any = None, waiting: Any = None) -> dict:
    """The list's filters as statement parameters (None: no filter), or Invalid naming the
    first one that cannot be used. scheduled (the Board's): true, pending todos waiting for
    their run_at; false, pending todos that may be claimed now."""
    if scheduled is not None and not isinstance(scheduled, bool):
        raise Invalid("scheduled must be true or false", argument="scheduled")
    if waiting is not None and not isinstance(waiting, bool):
        raise Invalid("waiting must be true or false", argument="waiting")
    if state is not None and state not in STATES:
        raise Invalid(f"state must be one of {', '.join(STATES)}", argument="state")
    if queue is not None and not isinstance(queue, str):
        raise Invalid("queue must be a string", argument="queue")
    storable(queue, "queue")
    payload = search_text(payload_key, "payload_key", strip=False)
    value = search_text(payload_value, "payload_value", strip=False)
    if value is not None and payload is None:
        raise Invalid("payload_value needs a payload_key to compare with", argument="payload_value")
    return {"state": state, "queue": queue, "dead_letter": bool(dead_letter), "title": search_text(title, "title"),
            "claimant": search_text(claimant, "claimant"), "payload_key": payload, "payload_value": value,
            "priority": None if priority is None else positive_int(priority, "priority", PRIORITY_MIN, PRIORITY_MAX),
            "key": clean_key(key), "scheduled": scheduled, "waiting": waiting}


def list_cursor(sort: str, key: datetime | str, todo_id: str) -> str:
    """The opaque keyset cursor of a list page: the sort it was made for and the last row's
    key (its time for the created and updated sorts, its sort key for the Board's others)."""
    key = key.isoformat() if isinstance(key, datetime) else key
    return base64.urlsafe_b64encode(json.dumps([sort, key, todo_id]).encode()).decode()


def read_list_cursor(cursor: Any, sort: str) -> tuple[datetime | str, str]:
    """The key a cursor carries, for the sort it must have been made for; Invalid otherwise."""
    try:
        parts = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if len(parts) == 2:  # a cursor from before the sort was carried: created time
            parts = ["created", *parts]
        made_for, key, after_id = parts
        if made_for not in BOARD_SORTS or not isinstance(key, str) or text_problem(key):
            raise ValueError(made_for)
        key = datetime.fromisoformat(key) if made_for in LIST_SORTS else key
        if not isinstance(after_id, str) or text_problem(after_id):
            raise ValueError(after_id)
    except Exception:
        raise Invalid("cursor is not one this server returned", argument="cursor") from None
    if made_for != sort:
        raise Invalid(f"cursor was made for the {made_for} sort, not {sort}", argument="cursor")
    return key, after_id


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
