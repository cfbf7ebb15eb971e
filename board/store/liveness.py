"""Liveness of an open attempt, derived at read time and never stored: the one function the
Board's drawer and MCP's get_todo both use (through Store.todo_get).

Activity is the latest of the claim, the last heartbeat and the last note. Only the claim
and heartbeats set the lease; a note is activity without extending it. The levels:
- live: activity heard within `quiet_fraction` of the lease last set;
- quiet: nothing heard for longer than that, the lease still running;
- overdue: the lease has ended, less than `lapsed_seconds` ago (a late heartbeat still
  extends it until the reaper or a takeover closes the attempt);
- lapsed: the lease ended `lapsed_seconds` or more ago; the holder is taken for gone.

An interrupted todo whose question (or bare interrupt) has no answer yet is none of these on the
Board: its holder needs no heartbeat and is never reaped while it waits, so its lease says
nothing. It is waiting for a person (`waiting_for_person`), whatever its lease.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from board.store.vocabulary import INTERRUPT_STATES

LEVELS = ("live", "quiet", "overdue", "lapsed")
# The Board's level for an open attempt waiting for a person (MCP's get_todo keeps LEVELS).
WAITING = "waiting"


@dataclass(frozen=True)
class Liveness:
    level: str  # one of LEVELS
    explanation: str  # the Board's words: "last heartbeat 20 s ago; lease ends in 40 s"
    last_activity_at: datetime


def _utc(value: datetime | str | None) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):  # a time read from JSON
        value = datetime.fromisoformat(value)
    return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)


def span(seconds: float) -> str:
    seconds = abs(seconds)
    if seconds < 90:
        return f"{int(seconds)} s"
    if seconds < 90 * 60:
        return f"{int(seconds // 60)} min"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def derive(attempt: dict, now: datetime, *, quiet_fraction: float = 0.5,
           lapsed_seconds: float = 30.0) -> Liveness | None:
    """The liveness of an attempt (None when it has ended), as of now."""
    if attempt.get("ended_at") is not None:
        return None
    now = _utc(now)
    lease = _utc(attempt["lease_expires_at"])
    claimed, beat, noted = (_utc(attempt.get(k)) for k in ("claimed_at", "last_heartbeat_at", "last_note_at"))
    leased_at = beat or claimed  # when the lease was last set
    last = max(t for t in (claimed, beat, noted) if t is not None)
    since = (now - last).total_seconds()
    if noted is not None and noted == last:
        heard = "last note"
    elif beat is not None:
        heard = "last heartbeat"
    else:
        heard = "claimed, no heartbeat yet,"
    if lease <= now:
        over = (now - lease).total_seconds()
        level = "lapsed" if over >= lapsed_seconds else "overdue"
        return Liveness(level, f"lease lapsed {span(over)} ago; {heard} {span(since)} ago", last)
    granted = max((lease - leased_at).total_seconds(), 1.0)
    level = "quiet" if since > granted * quiet_fraction else "live"
    return Liveness(level, f"{heard} {span(since)} ago; lease ends in {span((lease - now).total_seconds())}", last)


def waiting_for_person(state: str, attempt: dict) -> dict | None:
    """While an interrupted todo waits for its owner's answer (its attempt open, no answer to
    the current interrupt yet): when the question was asked and when it expires (each None
    when the interrupt asked nothing or gave no expiry). None otherwise, an answered interrupt
    included: its holder has a lease to resume in, and lapses like any other.

    The attempt gives answered_at, asked_at and question_expires_at, of the current interrupt."""
    if state not in INTERRUPT_STATES or attempt.get("answered_at") is not None:
        return None
    return {"asked_at": _utc(attempt.get("asked_at")), "expires_at": _utc(attempt.get("question_expires_at"))}
