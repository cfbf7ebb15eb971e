"""Teams (sql/teams.sql, migration 0018): a team is a space several people share, each with a
role (vocabulary.ROLES); and the record of every person's action, written by base.acts in
the transaction of the change.

A person acts in one space at a time as a Human: human_in builds it for a space they may
use, human_for_todo for the space of a todo they may see (a todo's pages work whichever
space the Board shows). Anything else is None, which the surfaces answer exactly as an id
never minted (REQ-10)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

import psycopg

from board.errors import Conflict, Invalid, NotFound
from board.store.base import Acting, StoreBase, _translate, acting, acts
from board.store.inputs import USERNAME_PATTERN, checked_todo_id
from board.store.queries import Query, execute, query
from board.store.vocabulary import ROLES, USERNAME_MAX_CHARS, Human

AUDIT_LIST_MAX = 500


def _name(value: Any, argument: str) -> str:
    if not isinstance(value, str) or not USERNAME_PATTERN.fullmatch(value):
        raise Invalid(f"{argument} must be 1-{USERNAME_MAX_CHARS} of letters, digits, _ . @ -", argument=argument)
    return value


def _role(value: Any) -> str:
    if value not in ROLES:
        raise Invalid(f"role must be one of {', '.join(ROLES)}", argument="role")
    return value


def _human(person: Human, row: dict | None, via: str | None = None) -> Human | None:
    if row is None:
        return None
    team = row["kind"] == "team"
    return Human(row["id"], person.username, actor_id=person.actor, role=row["role"], via=via or person.via,
                 space_name=row["name"] if team else None)


class Teams(StoreBase):

    # -- spaces ------------------------------------------------------------------------

    async def spaces_of(self, person: Human) -> list[dict]:
        """The spaces the person may use, with their role in each: their own first."""
        return await self._fetch(query("spaces_of_person"), {"person": person.actor}, op="spaces")

    async def human_in(self, person: Human, space_id: Any) -> Human | None:
        """The person acting in a space they may use (their own, or a team of theirs), or None."""
        if isinstance(space_id, bool) or not isinstance(space_id, int):
            return None
        row = await self._fetch(query("space_of_person"), {"person": person.actor, "space": space_id},
                                op="spaces", one=True)
        return _human(person, row)

    async def human_for_todo(self, person: Human, todo_id: Any) -> Human | None:
        """The person acting in the space of a todo they may see, or None (also for an id no
        todo can have)."""
        try:
            todo_id = checked_todo_id(todo_id, op="get")
        except (Invalid, NotFound):
            return None
        row = await self._fetch(query("todo_space_of_person"), {"person": person.actor, "id": todo_id},
                                op="get", todo_id=todo_id, one=True)
        return _human(person, row)

    async def team_space(self, name: Any, *, via: str = "cli") -> Human:
        """The command line acting in a team's space as its admin, as no one in particular."""
        row = await self._fetch(query("team_by_name"), {"name": _name(name, "team")}, op="team", one=True)
        if row is None:
            raise NotFound(f"no team named {name}", argument="team", op="team")
        return Human(row["id"], "", role="admin", via=via, space_name=row["name"])

    # -- teams and members -------------------------------------------------------------

    async def team_create(self, name: Any, *, owner: Any, via: str = "cli", actor: Human | None = None) -> dict:
        """A new team with `owner` (a person's username) as its first admin, recorded."""
        name, owner = _name(name, "name"), _name(owner, "owner")
        space = Human(0, actor.username if actor else "", actor_id=actor.actor if actor else None,
                      role="admin", via=via, space_name=name)
        record = Acting(space, "team_create", detail={"owner": owner})

        def recorded(row):  # the record is the new team's: its space id comes from the row
            record.human = replace(space, user_id=row["id"])
            return True

        record.took = lambda row: row is not None and recorded(row)
        try:
            row = await self._in_transaction("team_create", [(query("team_create"), {"name": name, "owner": owner})],
                                             record)
        except Conflict:
            raise Conflict(f"the name {name} is taken (a person or a team has it)", argument="name",
                           op="team_create") from None
        if row is None:
            raise NotFound(f"no person named {owner}", argument="owner", op="team_create")
        return {"id": row["id"], "name": row["name"]}

    @acts("member_set", "admin", todo=None, detail=("username", "role"),
          took=lambda row: row is not None and row["role"] is not None)
    async def team_member_set(self, space: Human, username: Any, role: Any) -> dict:
        """Adds a person to the team in `space` with a role, or changes their role. The team
        always keeps an admin: demoting its last one is a conflict."""
        username, role = _name(username, "username"), _role(role)
        if space.space_name is None:
            raise Invalid("a personal space has no members; make a team", argument="team", op="member_set")
        row = await self._locked(space, query("team_member_set"), {"username": username, "role": role}, "member_set")
        if row["person_id"] is None:
            raise NotFound(f"no person named {username}", argument="username", op="member_set")
        if row["role"] is None:
            raise Conflict(f"{username} is the last admin of {space.space_name}; make another admin first",
                           argument="role", op="member_set")
        return {"username": username, "role": row["role"], "was": row["was"]}

    @acts("member_remove", "admin", todo=None, detail=("username",),
          took=lambda row: row is not None and row["removed"] is not None)
    async def team_member_remove(self, space: Human, username: Any) -> dict:
        """Removes a person from the team: their streams of it end in every process, and
        their next request finds it gone. Its last admin stays."""
        username = _name(username, "username")
        if space.space_name is None:
            raise Invalid("a personal space has no members", argument="team", op="member_remove")
        row = await self._locked(space, query("team_member_remove"), {"username": username}, "member_remove")
        if row["person_id"] is None or row["was"] is None:
            raise NotFound(f"{username} is not a member of {space.space_name}", argument="username",
                           op="member_remove")
        if row["removed"] is None:
            raise Conflict(f"{username} is the last admin of {space.space_name}; make another admin first",
                           argument="username", op="member_remove")
        for observer in self.control_observers:
            observer({"kind": "member_removed", "team": space.user_id, "user": row["person_id"]})
        return {"username": username, "was": row["was"]}

    async def _locked(self, space: Human, statement: Query, params: dict, op: str) -> dict:
        """A member change after the team's row is locked (changes of one team take turns, so
        the last-admin test reads the change before it), with its record."""
        params = params | {"team_id": space.user_id}
        return await self._in_transaction(op, [(query("team_lock"), params), (statement, params)], acting())

    async def _in_transaction(self, op: str, statements: list[tuple[Query, dict]], record: Acting | None):
        """Statements in one transaction, with the record of the last one's result: its row."""
        try:
            async with self._connection() as conn:
                async with conn.transaction():
                    for statement, params in statements:
                        cur = await execute(conn, statement, params)
                        row = await cur.fetchone()
                    wrote = record is not None and await self._record(conn, record, row)
                if record is not None:
                    record.written = wrote
        except (psycopg.Error, UnicodeEncodeError) as err:
            raise _translate(err, op, None) from None
        return row

    async def team_members(self, space: Human) -> list[dict]:
        """The members of the team in `space` (any member may read them)."""
        if space.space_name is None:
            return []
        return await self._fetch(query("team_members"), {"team_id": space.user_id}, op="members")

    async def teams_all(self) -> list[dict]:
        """Every team with its members (the command line)."""
        return await self._fetch(query("teams_all"), {}, op="teams")

    # -- the record of actions ---------------------------------------------------------

    async def audit_list(self, space: Human, *, actor: Any = None, action: Any = None, queue: Any = None,
                         since: datetime | None = None, until: datetime | None = None, limit: int = 100,
                         cursor: tuple[datetime, int] | None = None) -> list[dict]:
        """The space's records newest first, filtered (each filter exact), after a cursor (the
        last row's (at, id))."""
        for value, argument in ((actor, "person"), (action, "action"), (queue, "queue")):
            if value is not None and (not isinstance(value, str) or len(value) > 200):
                raise Invalid(f"{argument} must be a string of at most 200 characters", argument=argument)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= AUDIT_LIST_MAX:
            raise Invalid(f"limit must be from 1 to {AUDIT_LIST_MAX}", argument="limit")
        after_at, after_id = cursor if cursor else (None, None)
        return await self._fetch(query("audit_list"), {
            "space_id": space.user_id, "actor": actor, "action": action, "queue": queue, "since": since,
            "until": until, "after_at": after_at, "after_id": after_id, "limit": limit}, op="audit")

    async def audit_of_todo(self, space: Human, todo_id: str) -> list[dict]:
        """A todo's records in the space (the space a person sees it in: human_for_todo)."""
        return await self._fetch(query("audit_of_todo"), {"space_id": space.user_id, "id": todo_id}, op="audit")

    async def sweep_audit(self, *, now: datetime | None = None, batch: int = 1000) -> int:
        """Retention of the record: records older than SWITCHBOARD_AUDIT_RETENTION_DAYS, a batch."""
        rows = await self._fetch(query("audit_prune"), {
            "now": now, "batch": batch, "retention_seconds": self.settings.audit_retention_days * 86400},
            op="retention")
        return len(rows)
