"""What the server publishes about an argument's bounds is what it enforces and what the
database holds: for every bounded tool argument, the bound in the input schema of tools/list
(read through the MCP SDK's client) is accepted by the tool and the value just past it is
refused as invalid naming the argument; where Postgres holds the same bound (a domain, a CHECK
or the todos trigger), it accepts the bound and refuses the value past it too. A text the
store cuts rather than refuses (a summary, a note, a claimant, a model label) is cut to what
its column holds.

The Board's add form draws and enforces the same title and max_attempts bounds.

The bounds are written once, in board/store/vocabulary.py; these tests hold the surfaces that
read them to the same numbers, whichever one drifts."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

import psycopg
import pytest

from tests.acceptance.mcp_helpers import call, connect, error_body, mcp_server, vend  # noqa: F401 (mcp_server is a fixture)
from tests.acceptance.test_board_auth import client_for, make_human, sign_in
from tests.acceptance.test_board_forms import control, field_error
from tests.conftest import sql_rows

ARTIFACT_PREFIX = "https://example.com/"


@dataclass(frozen=True)
class Domain:
    """A Postgres domain: a value of it is accepted when the cast succeeds."""

    name: str
    text: bool = False  # a length is probed with that many ASCII characters

    async def accepts(self, url: str, value: int, todo_id: str) -> bool:
        sql = f"SELECT repeat('a', %s)::{self.name}" if self.text else f"SELECT %s::numeric::{self.name}"
        return await _runs(url, sql, (value,))


@dataclass(frozen=True)
class TodoColumn:
    """A column of todos that the todos_fields_valid trigger checks: the test's own todo is
    updated to the value in a transaction that is rolled back."""

    column: str
    text: bool = False

    async def accepts(self, url: str, value: int, todo_id: str) -> bool:
        new = "repeat('t', %s)" if self.text else "%s"
        return await _runs(url, f"UPDATE todos SET {self.column} = {new} WHERE id = %s", (value, todo_id))


@dataclass(frozen=True)
class ArrayLengthCheck:
    """A table CHECK bounding a jsonb array's length, read from pg_constraint."""

    constraint: str

    async def accepts(self, url: str, value: int, todo_id: str) -> bool:
        rows = await sql_rows(url, "SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = %s",
                              (self.constraint,))
        assert len(rows) == 1, f"no constraint {self.constraint}"
        lo, hi = (int(n) for n in re.search(r">= (\d+)\) AND \(jsonb_array_length\(\w+\) <= (\d+)",
                                            rows[0]["def"]).groups())
        return lo <= value <= hi


async def _runs(url: str, sql: str, params: tuple) -> bool:
    """Whether the statement runs without a check violation (rolled back either way)."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        try:
            await conn.execute(sql, params)
        except psycopg.errors.CheckViolation:
            return False
        finally:
            await conn.rollback()
    return True


@dataclass(frozen=True)
class Bound:
    tool: str
    where: tuple[str, ...]  # the argument, then a property of it or its "items"
    keyword: str            # the JSON Schema keyword that publishes the bound
    arguments: Callable[[Any, str], dict]  # the call's arguments with the argument at a value, for the todo
    argument: str           # what an invalid error names
    database: Domain | TodoColumn | ArrayLengthCheck | None = None

    @property
    def id(self) -> str:
        return f"{self.tool}.{'.'.join(self.where)}.{self.keyword}"


def _title(n, todo):
    return {"queue": "q", "title": "t" * n}


def _max_attempts(n, todo):
    return {"queue": "q", "title": "t", "max_attempts": n}


def _order(name, value=lambda n: n):
    return lambda n, todo: {"queue": "q", "title": "t", name: value(n)}


def _item(name, value=lambda n: n):
    return lambda n, todo: {"todos": [{"queue": "q", "title": "t", name: value(n)}]}


def _key(n):  # not the database probe's letter: the tool's todo holds its key while the probe runs
    return "k" * n


def _after(n, todo):  # the test's todo named n times: each repeat counts toward the bound, once toward waiting
    return [todo] * n


def _adds(n, todo):
    return {"todos": [{"queue": "q", "title": f"t{i}"} for i in range(n)]}


def _completes(n, todo):
    return {"todos": [{"id": f"never-minted-{i}"} for i in range(n)]}


def _artifact(n, todo):
    return {"id": todo, "artifact": ARTIFACT_PREFIX + "a" * (n - len(ARTIFACT_PREFIX))}


def _usage(key):
    return lambda n, todo: {"id": todo, "usage": {key: n}}


def _choices(n, todo):
    return {"id": todo, "question": "which one?", "choices": [f"c{i}" for i in range(n)]}


def _choice(n, todo):
    return {"id": todo, "question": "which one?", "choices": ["c" * n]}


def _expires(n, todo):
    return {"id": todo, "question": "which one?", "expires_in_seconds": n}


def _limit(name, **more):
    return lambda n, todo: {**({"id": todo} if more.get("with_id") else {}), name: n}


TITLE, MAX_ATTEMPTS = TodoColumn("title", text=True), TodoColumn("max_attempts")
PRIORITY, KEY = TodoColumn("priority"), TodoColumn("key", text=True)
TOKENS, COST = Domain("attempt_tokens"), Domain("attempt_cost_usd")
CHOICE = Domain("attempt_choice", text=True)
CHOICES = ArrayLengthCheck("attempt_notes_choices_check")

BOUNDS = [
    Bound("add_todo", ("title",), "maxLength", _title, "title", TITLE),
    Bound("add_todo", ("title",), "minLength", _title, "title", TITLE),
    Bound("add_todo", ("max_attempts",), "maximum", _max_attempts, "max_attempts", MAX_ATTEMPTS),
    Bound("add_todo", ("max_attempts",), "minimum", _max_attempts, "max_attempts", MAX_ATTEMPTS),
    Bound("add_todo", ("priority",), "maximum", _order("priority"), "priority", PRIORITY),
    Bound("add_todo", ("priority",), "minimum", _order("priority"), "priority", PRIORITY),
    Bound("add_todo", ("delay_seconds",), "maximum", _order("delay_seconds"), "delay_seconds"),
    Bound("add_todo", ("delay_seconds",), "minimum", _order("delay_seconds"), "delay_seconds"),
    Bound("add_todo", ("key",), "maxLength", _order("key", _key), "key", KEY),
    Bound("add_todo", ("key",), "minLength", _order("key", _key), "key", KEY),
    Bound("add_todos", ("todos", "items", "priority"), "maximum", _item("priority"), "todos[0].priority"),
    Bound("add_todos", ("todos", "items", "delay_seconds"), "minimum", _item("delay_seconds"),
          "todos[0].delay_seconds"),
    Bound("add_todos", ("todos", "items", "key"), "maxLength", _item("key", _key), "todos[0].key"),
    Bound("add_todo", ("after",), "maxItems", lambda n, todo: _order("after")(_after(n, todo), todo), "after"),
    Bound("add_todos", ("todos", "items", "after"), "maxItems", lambda n, todo: _item("after")(_after(n, todo), todo),
          "todos[0].after"),
    Bound("add_todos", ("todos",), "maxItems", _adds, "todos"),
    Bound("add_todos", ("todos",), "minItems", _adds, "todos"),
    Bound("list_todos", ("limit",), "maximum", _limit("limit"), "limit"),
    Bound("list_todos", ("limit",), "minimum", _limit("limit"), "limit"),
    Bound("list_todos", ("priority",), "maximum", _limit("priority"), "priority"),
    Bound("list_todos", ("priority",), "minimum", _limit("priority"), "priority"),
    Bound("list_todos", ("key",), "maxLength", lambda n, todo: {"key": _key(n)}, "key"),
    Bound("list_todos", ("key",), "minLength", lambda n, todo: {"key": _key(n)}, "key"),
    Bound("get_todo", ("attempts_limit",), "maximum", _limit("attempts_limit", with_id=True), "attempts_limit"),
    Bound("get_todo", ("attempts_limit",), "minimum", _limit("attempts_limit", with_id=True), "attempts_limit"),
    Bound("get_todo", ("notes_limit",), "maximum", _limit("notes_limit", with_id=True), "notes_limit"),
    Bound("get_todo", ("notes_limit",), "minimum", _limit("notes_limit", with_id=True), "notes_limit"),
    Bound("claim_next", ("limit",), "maximum", _limit("limit"), "limit"),
    Bound("claim_next", ("limit",), "minimum", _limit("limit"), "limit"),
    Bound("claim_next", ("lease_seconds",), "minimum", _limit("lease_seconds"), "lease_seconds"),
    Bound("complete", ("artifact",), "maxLength", _artifact, "artifact", Domain("attempt_artifact", text=True)),
    Bound("release", ("artifact",), "maxLength", _artifact, "artifact", Domain("attempt_artifact", text=True)),
    Bound("release", ("delay_seconds",), "maximum", _limit("delay_seconds", with_id=True), "delay_seconds"),
    Bound("release", ("delay_seconds",), "minimum", _limit("delay_seconds", with_id=True), "delay_seconds"),
    Bound("complete", ("usage", "input_tokens"), "maximum", _usage("input_tokens"), "usage", TOKENS),
    Bound("complete", ("usage", "input_tokens"), "minimum", _usage("input_tokens"), "usage", TOKENS),
    Bound("fail", ("usage", "output_tokens"), "maximum", _usage("output_tokens"), "usage", TOKENS),
    Bound("complete", ("usage", "cost_usd"), "maximum", _usage("cost_usd"), "usage", COST),
    Bound("complete", ("usage", "cost_usd"), "minimum", _usage("cost_usd"), "usage", COST),
    Bound("complete_todos", ("todos",), "maxItems", _completes, "todos"),
    Bound("complete_todos", ("todos",), "minItems", _completes, "todos"),
    Bound("interrupt", ("choices",), "maxItems", _choices, "choices", CHOICES),
    Bound("interrupt", ("choices",), "minItems", _choices, "choices", CHOICES),
    Bound("interrupt", ("choices", "items"), "maxLength", _choice, "choices", CHOICE),
    Bound("interrupt", ("choices", "items"), "minLength", _choice, "choices", CHOICE),
    Bound("interrupt", ("expires_in_seconds",), "maximum", _expires, "expires_in_seconds"),
    Bound("interrupt", ("expires_in_seconds",), "minimum", _expires, "expires_in_seconds"),
]


def published(schema: dict, where: tuple[str, ...], keyword: str):
    node = schema["properties"][where[0]]
    for step in where[1:]:
        node = node["items"] if step == "items" else node["properties"][step]
    return node[keyword]


async def refused(client, tool: str, arguments: dict, argument: str) -> bool:
    """Whether the call fails as invalid naming the argument; any other outcome (a success,
    not_found or conflict for the test's todo) means the argument's check let it through."""
    result = await client.call_tool(tool, arguments)
    if not result.is_error:
        return False
    error = error_body(result)["error"]
    return error["code"] == "invalid" and error.get("argument") == argument


@pytest.mark.parametrize("bound", BOUNDS, ids=[b.id for b in BOUNDS])
async def test_a_published_bound_is_the_one_the_tool_and_the_database_enforce(mcp_server, bound):
    ep = await vend(mcp_server.store)
    async with connect(mcp_server, ep.token) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        at = published(tools[bound.tool].input_schema, bound.where, bound.keyword)
        past = at + 1 if bound.keyword.startswith("max") else at - 1
        todo = (await call(client, "add_todo", {"queue": "q", "title": "bounded"}))["id"]
        assert not await refused(client, bound.tool, bound.arguments(at, todo), bound.argument), (
            f"{bound.id} publishes {at}, but the tool refuses it")
        assert await refused(client, bound.tool, bound.arguments(past, todo), bound.argument), (
            f"{bound.id} publishes {at}, but the tool takes {past}")
    if bound.database is not None:
        url = mcp_server.settings.database_url
        assert await bound.database.accepts(url, at, todo), f"{bound.id}: the database refuses {at}"
        assert not await bound.database.accepts(url, past, todo), f"{bound.id}: the database takes {past}"


async def test_text_the_store_cuts_is_cut_to_what_its_column_holds(mcp_server):
    """A claimant, a note, a summary and a model label too long are cut, not refused: each is
    stored at the most its domain takes."""
    ep = await vend(mcp_server.store)
    async with connect(mcp_server, ep.token) as client:
        todo = (await call(client, "add_todo", {"queue": "q", "title": "cut"}))["id"]
        await call(client, "claim_next", {"claimant": "c" * 5000})
        note = (await call(client, "note", {"id": todo, "text": "n" * 5000}))["note"]
        await call(client, "complete", {"id": todo, "summary": "s" * 5000, "usage": {"model": "m" * 5000}})
        attempt = (await call(client, "get_todo", {"id": todo}))["attempts"][0]
    stored = {"attempt_claimant": attempt["claimant"], "attempt_note_text": note["text"],
              "attempt_summary": attempt["summary"], "attempt_model": attempt["usage"]["model"]}
    assert note["truncated"] and attempt["summary_truncated"]
    url = mcp_server.settings.database_url
    for domain, text in stored.items():
        cut = len(text.encode("utf-8"))
        assert await Domain(domain, text=True).accepts(url, cut, todo), f"{domain} refuses what the store kept"
        assert not await Domain(domain, text=True).accepts(url, cut + 1, todo), (
            f"the store cuts to {cut} bytes, but {domain} holds more")


async def test_the_add_forms_title_and_max_attempts_bounds_are_the_ones_the_tool_publishes(live_server):
    """The Board's add form draws the title's maxlength and max_attempts' range the tools
    publish, and takes a todo at those bounds and refuses one past them, next to the field."""
    store = live_server.store
    ada = await make_human(store, "ada")
    ep = await vend(store, user_id=ada.user_id, agent_id="fixer", queues=("q",))
    async with connect(live_server, ep.token) as client:
        schema = {t.name: t for t in (await client.list_tools()).tools}["add_todo"].input_schema
    title_max = published(schema, ("title",), "maxLength")
    attempts_max = published(schema, ("max_attempts",), "maximum")
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        form = (await c.get("/todos/new")).text
        assert f'maxlength="{title_max}"' in control(form, "add-title")
        assert f"a dead letter: 1 to {attempts_max}." in form

        async def add(title: str, max_attempts: int):
            return await c.post("/todos/new", data={"csrf_token": token, "target": f"{ep.endpoint_id}:q",
                                                    "title": title, "payload": "", "routing": "",
                                                    "max_attempts": str(max_attempts)})

        assert (await add("t" * title_max, attempts_max)).status_code == 303
        refused = await add("t" * (title_max + 1), attempts_max + 1)
        assert refused.status_code == 400
        assert field_error(refused.text, "add-title") == f"The title must be at most {title_max} characters."
        assert field_error(refused.text, "add-max_attempts") == (
            f"Max attempts must be a whole number from 1 to {attempts_max}.")
    [todo] = (await store.todo_list(ada))["todos"]
    assert (len(todo["title"]), todo["max_attempts"]) == (title_max, attempts_max)
