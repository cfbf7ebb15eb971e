"""The Activity page (/activity): the record of what people did in the space the Board
shows (store.audit_list), newest first, filtered by person, action, queue and time through
a GET form (bookmarkable), a page at a time after a keyset cursor (the last row's time and
id). A filter that does not read comes back on the page with its message, status 400."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from urllib.parse import urlencode

from litestar import Request, Response, get

from board.errors import Invalid
from board.store.inputs import USERNAME_PATTERN
from board.store.vocabulary import QUEUE_PATTERN, QUEUE_RULE, USERNAME_MAX_CHARS
from board.view.records import DID_WORDS, action_words, who
from board.web.context import page, query_text, require_human, runtime

PAGE_ROWS = 50
# The actions a person can filter by, in the words the rows say them.
ACTIONS = tuple(sorted(DID_WORDS))
FIELDS = ("person", "action", "queue", "since", "until")
# A time typed into the form: a date, or a date and time (UTC unless it names its offset).
TIME_EXAMPLE = "2026-12-05 or 2026-12-05T12:03"


def _time(value: str, name: str) -> datetime:
    try:
        at = datetime.fromisoformat(value.strip())
    except ValueError:
        raise Invalid(f"The {name} filter must be a date or a date and time, like {TIME_EXAMPLE}.",
                      argument=name) from None
    return at if at.tzinfo else at.replace(tzinfo=timezone.utc)


def _cursor(value: str) -> tuple[datetime, int]:
    at, _, row = value.rpartition("_")
    try:
        when = datetime.fromisoformat(at)
        if when.tzinfo is None or not row.isdigit() or len(row) > 18:
            raise ValueError
    except ValueError:
        raise Invalid("The cursor parameter is not one this page made; go back to the first page.",
                      argument="cursor") from None
    return when, int(row)


@dataclass(frozen=True)
class ActivityFilters:
    values: dict  # as typed, to show again
    person: str | None = None
    action: str | None = None
    queue: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    cursor: tuple[datetime, int] | None = None

    @classmethod
    def of(cls, params) -> "ActivityFilters":
        """The filters as the page's URL carries them, each checked: Invalid names the first
        that does not read."""
        values = {name: (query_text(params, name) or "").strip() for name in (*FIELDS, "cursor")}
        got: dict = {}
        if values["person"]:
            if not USERNAME_PATTERN.fullmatch(values["person"]):
                raise Invalid(f"The person filter must be a username: 1-{USERNAME_MAX_CHARS} of letters, digits, "
                              "_ . @ -.", argument="person")
            got["person"] = values["person"]
        if values["action"]:
            if values["action"] not in ACTIONS:
                raise Invalid("The action filter must be one of the actions the list offers.", argument="action")
            got["action"] = values["action"]
        if values["queue"]:
            if not QUEUE_PATTERN.fullmatch(values["queue"]):
                raise Invalid(f"The queue filter must be a queue name: {QUEUE_RULE}.", argument="queue")
            got["queue"] = values["queue"]
        for name in ("since", "until"):
            if values[name]:
                got[name] = _time(values[name], name)
        if "since" in got and "until" in got and got["since"] >= got["until"]:
            raise Invalid("The since time must be before the until time.", argument="since")
        if values["cursor"]:
            got["cursor"] = _cursor(values["cursor"])
        return cls(values={k: values[k] for k in FIELDS}, **got)

    def query(self, cursor: tuple[datetime, int] | None = None) -> str:
        pairs = [(k, v) for k, v in self.values.items() if v]
        if cursor is not None:
            pairs.append(("cursor", f"{cursor[0].isoformat()}_{cursor[1]}"))
        return "?" + urlencode(pairs) if pairs else ""


@get("/activity", name="activity")
async def activity_page(request: Request) -> Response:
    human, session = await require_human(request)
    try:
        filters = ActivityFilters.of(request.query_params)
    except Invalid as e:
        values = {k: str(request.query_params.get(k) or "")[:200] for k in FIELDS}
        return page(request, "activity.html", session=session, human=human, title="Activity", active="activity",
                    status=400, rows=[], older=None, values=values, error=e.message, error_field=e.argument,
                    actions=ACTIONS, action_words=action_words, who=who, first_page=True)
    rows = await runtime(request).store.audit_list(
        human, actor=filters.person, action=filters.action, queue=filters.queue, since=filters.since,
        until=filters.until, limit=PAGE_ROWS + 1, cursor=filters.cursor)
    older = None
    if len(rows) > PAGE_ROWS:
        rows = rows[:PAGE_ROWS]
        older = "/activity" + filters.query((rows[-1]["at"], rows[-1]["id"]))
    return page(request, "activity.html", session=session, human=human, title="Activity", active="activity",
                rows=rows, older=older, values=filters.values, error=None, error_field=None, actions=ACTIONS,
                action_words=action_words, who=who, first_page=filters.cursor is None,
                newest="/activity" + filters.query())


def handlers() -> list:
    return [activity_page]
