"""The todo detail view (SPEC-0034 REQ-13): `todo_detail(todo, now)` turns one todo_get read
into the words and values every surface shows, so the drawer, the A2UI resource and the MCP
App cannot drift. Everything in it is JSON (strings, numbers, booleans, lists, objects).

Only what the store returned is used, and the store never returns claimer_session or
lease_token_hash; the view names its keys one by one, so nothing else leaks through either.
A part that is shown or not (the died marker, an https artifact's link, the truncated mark,
the open attempt's liveness) is a list of zero or one entries, so a renderer with a fixed
component tree (A2UI) draws it from the data alone.
"""

from __future__ import annotations

from datetime import datetime, timezone
from board.store import liveness as liveness_rules
from board.store.inputs import is_https_url
from board.store.vocabulary import DIED_OUTCOMES, INTERRUPT_STATES, SUMMARY_MAX_BYTES

# The died marker's accessible name, the same on every surface; it is words, never a colour.
DIED_LABEL = "died: no report"
TRUNCATED_MARK = f"Truncated: the summary was cut to {SUMMARY_MAX_BYTES} bytes when it was stored."
SUMMARY_START_CHARS = 80  # the list statements read this many (board/store/sql/reads.sql)

# How an attempt ended, as a person says it (no enum names).
OUTCOME_WORDS = {"completed": "completed", "failed": "failed", "released": "was handed back",
                 "lease_expired": "died (its lease ran out with no report)",
                 "reaped": "died (its lease ran out with no report)", "canceled": "ended when the todo was canceled",
                 "revoked": "ended when its credential was revoked"}
# What became of the todo when the attempt ended.
DISPOSITION_WORDS = {"done": "the todo is done", "retry_scheduled": "the todo waits for a retry",
                     "dead_lettered": "the todo became a dead letter", "requeued": "the todo went back to the queue",
                     "canceled": "the todo was canceled"}


# Who wrote a note, by its author kind (an answer names the human who gave it).
NOTE_AUTHORS = {"endpoint": "agent", "owner": "owner", "system": "Switchboard"}
# What a note of each kind says it is, after its author ("agent asked"); a working note is
# the plain note it always was and says nothing more.
NOTE_KIND_WORDS = {"working": "", "question": "asked", "answer": "answered", "expired": "noted the question expired"}
# What the drawer's question section is headed, by the state the todo waits in.
WAITING_HEADINGS = {"input_required": "The agent needs input", "auth_required": "The agent needs authorization"}


def state_label(state: str) -> str:
    return state.replace("_", " ")


def utc(value: datetime | str | None) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):  # a time inside the store's JSON (an attempt's question) stays text
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def fmt_when(value: datetime | None) -> str:
    value = utc(value)
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else ""


def fmt_iso(value: datetime | None) -> str:
    value = utc(value)
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z") if value else ""


def summary_start(text: str | None, cut: bool = False, limit: int = SUMMARY_START_CHARS) -> str:
    """The start of a summary on one line: whitespace runs made one space, cut to about limit
    characters (on a character boundary, at a space when one is near) with an ellipsis.
    cut: the text given is already the start of a longer one."""
    if not text:
        return ""
    line = " ".join(text.split())
    if len(line) <= limit and not cut:
        return line
    line = line[:limit]
    space = line.rfind(" ")
    return (line[:space] if space > limit * 3 // 4 else line).rstrip() + "\u2026"


def duration_words(seconds: float) -> str:
    """A span as a person says it: "12 seconds", "4 minutes", "2 hours", "3 days"."""
    seconds = max(0, int(seconds))
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= size:
            n = round(seconds / size)
            return f"{n} {unit}{'' if n == 1 else 's'}"
    return f"{seconds} second{'' if seconds == 1 else 's'}"


def attempt_sentence(attempt: dict, now: datetime | None = None) -> str:
    """The one sentence an attempt opens with, as a person would say it:
    "Attempt 3, failed after 4 minutes, by fixer/run-7: tests still red"."""
    seq, outcome = attempt["seq"], attempt.get("outcome")
    claimed, ended = attempt.get("claimed_at"), attempt.get("ended_at")
    who = attempt.get("claimant") or ("the owner, on the Board" if attempt.get("claimer_kind") == "owner" else "")
    if outcome is None:
        open_for = duration_words(((now or datetime.now(timezone.utc)) - claimed).total_seconds()) if claimed else ""
        text = f"Attempt {seq}, open" + (f" for {open_for}" if open_for else "")
    else:
        took = duration_words((ended - claimed).total_seconds()) if claimed and ended else ""
        words = OUTCOME_WORDS.get(outcome, state_label(outcome))
        text = f"Attempt {seq}, {words}" + (f" after {took}" if took else "")
    if who:
        text += f", by {who}"
    summary = summary_start(attempt.get("summary"))
    return f"{text}: {summary}" if summary else text


def usage_text(usage: dict | None) -> str:
    """Usage as one line: tokens in and out, cost, model; the parts reported only."""
    if not usage:
        return ""
    parts = []
    if usage.get("input_tokens") is not None:
        parts.append(f"{usage['input_tokens']:,} input tokens")
    if usage.get("output_tokens") is not None:
        parts.append(f"{usage['output_tokens']:,} output tokens")
    if usage.get("cost_usd") is not None:
        whole, cents = f"{usage['cost_usd']:,.6f}".split(".")
        parts.append(f"${whole}.{cents.rstrip('0').ljust(2, '0')}")  # at least cents: $2.50, $0.0123
    if usage.get("model"):
        parts.append(f"model {usage['model']}")
    return ", ".join(parts)


def fmt_relative(value: datetime | None, now: datetime) -> str:
    """How long ago (or how soon) a time is, in words: "3 min ago", "in 40 s". The page's
    script keeps these current with the same wording (static/board.js, relative())."""
    value = utc(value)
    if value is None:
        return ""
    seconds = (value - now).total_seconds()
    span = abs(seconds)
    if span < 10:
        return "just now"
    if span < 90:
        words = f"{int(span)} s"
    elif span < 90 * 60:
        words = f"{int(span / 60 + 0.5)} min"  # rounded half up, as the script's Math.round
    elif span < 36 * 3600:
        words = f"{int(span / 3600 + 0.5)} h"
    else:
        words = f"{int(span / 86400 + 0.5)} days"
    return f"in {words}" if seconds > 0 else f"{words} ago"


def waiting_words(waiting: dict, now: datetime) -> str:
    """An open attempt waiting for a person (liveness.waiting_for_person's), in the words the
    drawer, the list row and the Agents page say it: "waiting for a person, asked 3 min ago,
    expires in 27 min" (templates/_waiting.html draws the same words with their times)."""
    words = "waiting for a person, " + (
        f"asked {fmt_relative(waiting['asked_at'], now)}" if waiting.get("asked_at") else "no question asked")
    left = fmt_relative(waiting.get("expires_at"), now)
    if left:
        words += f", {'expires' if left.startswith('in ') else 'expired'} {left}"
    return words


def _when(value: datetime | None) -> dict:
    """A time as its machine form and its words ({"at": "", "text": ""} when there is none)."""
    return {"at": fmt_iso(value), "text": fmt_when(value)}


def answer_line(answer: dict) -> str:
    """One answer as one short line, said the same in the drawer, its news log and every other
    surface: "ada answered: deploy now"; a choice with other words, "ada answered yes: after 5"."""
    who = answer.get("who") or "the owner"
    text, choice = answer.get("text") or "", answer.get("choice")
    if choice and text and text != choice:
        return f"{who} answered {choice}: {summary_start(text)}"
    return f"{who} answered: {summary_start(text or choice or '')}"


def question_detail(question: dict, now: datetime) -> dict:
    """An attempt's question (attempt_public's "question"), as every surface shows it: what
    was asked, the choices, the expiry in words, the answers so far, and whether it expired
    unanswered; `lines` says all of it in order, one plain sentence each."""
    asked, expires, expired = (utc(question.get(k)) for k in ("asked_at", "expires_at", "expired_at"))
    choices = [str(c) for c in question.get("choices") or []]
    answers = [{"who": a.get("who") or "the owner", "text": a.get("text") or "", "choice": a.get("choice"),
                "at": _when(utc(a.get("at"))), "line": answer_line(a)} for a in question.get("answers") or []]
    current = bool(question.get("current"))
    # How long is left, while it still matters (no answer yet); past it, the sweep releases the todo.
    left = (expires - now).total_seconds() if expires and not expired and not answers else None
    expiry_words = f"in {duration_words(left)}" if left is not None and left > 0 else ""
    if expired:
        status = f"Expired unanswered at {fmt_when(expired)}; the todo was released for the next claimer."
    elif answers:
        status = "Answered." if len(answers) == 1 else f"Answered {len(answers)} times."
    elif current:
        status = "Waiting for an answer."
    else:
        status = "Not answered."
    lines = [f"The agent asked at {fmt_when(asked)}: {question.get('text') or ''}"]
    if choices:
        lines.append("Choices offered: " + ", ".join(choices) + ".")
    if expires and not expired:
        lines.append(f"Expires at {fmt_when(expires)}" + (f", {expiry_words}." if expiry_words else "."))
        if left is not None and left <= 0:
            lines.append("Its time ran out: the todo is about to be released for the next claimer.")
    lines += [f"{a['line']} (at {a['at']['text']})" for a in answers]
    lines.append(status)
    return {"text": question.get("text") or "", "truncated": bool(question.get("truncated")),
            "asked_at": _when(asked), "choices": choices, "expires_at": _when(expires), "expiry_words": expiry_words,
            "expiry_passed": left is not None and left <= 0,
            "answers": answers, "expired": expired is not None, "expired_at": _when(expired),
            "expired_mark": [{"text": status}] if expired else [], "current": current, "status_text": status,
            "lines": [{"text": line} for line in lines],
            # Which question an answer is given for (the store's answer fence): when it was asked,
            # to the microsecond.
            "key": asked.isoformat() if asked else ""}


def note_detail(note: dict, n: int, seq: int) -> dict:
    """One note: who wrote it and what kind it is in words, and the one line that announces it."""
    kind = note.get("kind") or "working"
    author = note.get("who") if kind == "answer" and note.get("who") else NOTE_AUTHORS.get(
        note.get("author_kind"), "owner")
    start = summary_start(note.get("text"))
    if kind == "question":
        announce = f"The agent asks: {start}"
    elif kind == "answer":
        announce = answer_line({"who": author, "text": note.get("text"), "choice": note.get("choice")})
    elif kind == "expired":
        announce = f"Attempt {seq}: {start}"
    else:
        announce = f"Note on attempt {seq}: {start}"
    kind_words = NOTE_KIND_WORDS.get(kind, kind)
    at = _when(utc(note.get("at")))
    return {"n": n, "author": author, "kind": kind, "kind_words": kind_words,
            "byline": f"{author}{' ' + kind_words if kind_words else ''}, {at['text']}",
            "at": at, "text": note.get("text") or "", "truncated": bool(note.get("truncated")),
            "start": start, "announce": announce}


def attempt_detail(attempt: dict, now: datetime) -> dict:
    """One attempt, as every surface shows it."""
    outcome, disposition = attempt.get("outcome"), attempt.get("disposition")
    is_open = attempt.get("ended_at") is None
    died = outcome in DIED_OUTCOMES
    summary = attempt.get("summary")
    artifact = attempt.get("artifact")
    link = bool(artifact) and is_https_url(artifact)
    if is_open:
        summary_text = "none yet: the attempt is open"
    elif summary is not None:
        summary_text = summary
    else:
        summary_text = "none: the holder never reported" if died else "none"
    notes = attempt.get("notes") or []
    notes_count, notes_pruned = attempt.get("notes_count") or 0, attempt.get("notes_pruned") or 0
    notes_heading = ""
    if notes_count:
        notes_heading = f"Notes ({notes_count}" + (f", the {notes_pruned} oldest pruned" if notes_pruned else "") + (
            f"; the newest {len(notes)} shown" if len(notes) < notes_count - notes_pruned else "") + ")"
    claimed, ended, beat = (_when(attempt.get(k)) for k in ("claimed_at", "ended_at", "last_heartbeat_at"))
    out = {
        "seq": attempt["seq"],
        "attempt": attempt["attempt"],
        "sentence": attempt_sentence(attempt, now),
        "open": is_open,
        "died": died,
        "died_marker": [{"label": DIED_LABEL}] if died else [],
        "outcome": outcome,
        "outcome_words": OUTCOME_WORDS.get(outcome, state_label(outcome)) if outcome else "open",
        "disposition": disposition,
        "disposition_words": DISPOSITION_WORDS.get(disposition, state_label(disposition)) if disposition else "",
        "claimant": attempt.get("claimant"),
        "claimer_kind": attempt.get("claimer_kind"),
        "worker": attempt.get("claimant") or "none given",
        "claimer_words": "the owner, on the Board" if attempt.get("claimer_kind") == "owner" else "an agent endpoint",
        "claimed_at": claimed,
        "ended_at": ended,
        "last_heartbeat_at": beat,
        "summary": summary,
        "summary_truncated": bool(attempt.get("summary_truncated")),
        "summary_text": summary_text,
        "truncated_mark": [{"text": TRUNCATED_MARK}] if attempt.get("summary_truncated") else [],
        "artifact": artifact,
        "artifact_is_link": link,
        "artifact_link": [{"url": artifact}] if link else [],
        "artifact_text": "" if link else (artifact or ("none yet" if is_open else "none")),
        "artifact_words": artifact or ("none yet" if is_open else "none"),
        "usage_text": usage_text(attempt.get("usage")),
        "counted_text": f"{attempt['attempt']} of the todo's allowed attempts",
        "notes_heading": notes_heading,
        "notes": [note_detail(note, notes_count - i, attempt["seq"]) for i, note in enumerate(notes)],
        # What the attempt's latest interrupt asked, answered or let expire (zero or one).
        "question": [question_detail(attempt["question"], now)] if attempt.get("question") else [],
    }
    # The facts as label and value, in the drawer's order, for renderers that lay out pairs.
    facts = [("Outcome", out["outcome_words"])]
    if not is_open:
        facts.append(("Afterwards", out["disposition_words"]))
    facts += [("Worker", out["worker"]), ("Claimed by", out["claimer_words"]), ("Started", claimed["text"]),
              ("Ended", ended["text"] or "not yet"), ("Last heartbeat", beat["text"] or "none")]
    if out["usage_text"]:
        facts.append(("Usage", out["usage_text"]))
    facts.append(("Counted as attempt", out["counted_text"]))
    out["facts"] = [{"label": k, "value": v} for k, v in facts]
    return out


def todo_detail(todo: dict, now: datetime | None = None) -> dict:
    """The todo detail: title, queue, state, attempt n of max, dead letter, the open
    attempt's liveness, the attempts newest first, the chain and the usage totals, from one
    Store.todo_get result (an agent's read or the owning human's)."""
    now = utc(now) or datetime.now(timezone.utc)
    attempts = todo.get("attempts") or []
    shown, total, pruned = len(attempts), todo.get("attempts_total") or 0, todo.get("attempts_pruned") or 0
    count = f"{total} attempt{'' if total == 1 else 's'} in all, newest first"
    if pruned:
        count += f"; the {pruned} oldest were pruned"
    if shown < total - pruned:
        count += f"; showing the newest {shown}"
    current = []
    if attempts and attempts[0].get("ended_at") is None and attempts[0].get("liveness"):
        a = attempts[0]
        derived = liveness_rules.derive(a, now)  # only its words: the level is the store's, with its settings
        # Waiting for its owner (the store says so on the owner's read), it is not judged by its lease.
        waiting = a.get("waiting")
        explanation = waiting_words(waiting, now) if waiting else derived.explanation if derived else ""
        current.append({"seq": a["seq"], "level": a["liveness"],
                        "explanation": explanation,
                        "waiting": [{k: fmt_iso(v) for k, v in waiting.items()}] if waiting else [],
                        "text": f"Current attempt {a['seq']}: " + (explanation if waiting else a["liveness"] + (
                            f", {explanation}" if explanation else "")),
                        "last_heartbeat_at": _when(a.get("last_heartbeat_at")),
                        "lease_until": _when(a.get("lease_expires_at"))})
    chain = todo.get("chain") or []
    state = todo["state"]
    # While the todo waits for a person (interrupted, its attempt open): what it waits for,
    # first in the drawer; the question, when the interrupt asked one.
    waiting = []
    if state in INTERRUPT_STATES and attempts and attempts[0].get("ended_at") is None:
        asked = attempts[0].get("question")
        question = [question_detail(asked, now)] if asked and asked.get("current") else []
        waiting.append({"heading": "The agent asks" if question else WAITING_HEADINGS[state], "question": question})
    out = {
        "id": str(todo["id"]),
        "title": todo["title"],
        "queue": todo["queue"],
        "state": state,
        "state_text": state_label(state),
        "dead_letter": bool(todo.get("dead_letter")),
        "status_text": state_label(state) + (", dead letter" if todo.get("dead_letter") else ""),
        "attempt": todo["attempt"],
        "max_attempts": todo["max_attempts"],
        "attempt_text": f"{todo['attempt']} of {todo['max_attempts']}",
        "current": current,
        "waiting": waiting,
        "attempts_total": total,
        "attempts_count_text": count + ".",
        "attempts": [attempt_detail(a, now) for a in attempts],
        "chain": [{"id": str(link["id"]), "title": link["title"], "current": str(link["id"]) == str(todo["id"]),
                   "state_text": ("dead letter" if link.get("dead_letter") else state_label(link["state"])) + (
                       f", last attempt {state_label(link['last_outcome'])}" if link.get("last_outcome") else "") + (
                       " (this todo)" if str(link["id"]) == str(todo["id"]) else ""),
                   "summary": summary_start(link.get("last_summary"), bool(link.get("last_summary_cut")))}
                  for link in chain] if len(chain) > 1 else [],
        "chain_truncated": bool(todo.get("chain_truncated")),
        "usage_text": usage_text(todo.get("usage")),
    }
    facts = [("State", out["status_text"]), ("Queue", out["queue"]), ("Attempt", out["attempt_text"])]
    if out["usage_text"]:
        facts.append(("Usage in all", out["usage_text"]))
    out["facts"] = [{"label": k, "value": v} for k, v in facts]
    return out

