"""The claim's order through MCP, as agents call it: add_todo and add_todos with priority,
run_at, delay_seconds and key, their results (deduplicated) and every read that shows the
todo; claim_next's order (the most urgent first, the oldest within a priority; scheduled todos
passed over); release's snooze; and each bad value refused as `invalid` naming the argument,
with nothing added or changed.

Each scenario runs through the Python SDK's client in both protocol generations and through
the TypeScript SDK's client, which validates every result against the tool's output schema
(so a field the schema requires and a result leaves out, or a type that does not match, makes
it throw)."""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta, timezone
from typing import AsyncIterator

import pytest

from tests.acceptance.mcp_helpers import GENERATIONS, call, call_error, connect, error_body, mcp_server, vend  # noqa: F401
from tests.acceptance.third_party import ok, tool_error, ts_client
from tests.conftest import LOAD_SLACK_SECONDS

CLIENTS = (*GENERATIONS, "typescript")
HOUR = 3600


class Caller:
    """One agent's calls through one client: results that must succeed, errors that must not."""

    def __init__(self, client, kind: str):
        self.client, self.kind = client, kind

    async def ok(self, tool: str, args: dict | None = None) -> dict:
        if self.kind == "typescript":
            return ok(await self.client.call_tool(tool, args or {}))
        return await call(self.client, tool, args)

    async def error(self, tool: str, args: dict) -> dict:
        if self.kind == "typescript":
            return tool_error(await self.client.call_tool(tool, args))
        return await call_error(self.client, tool, args)

    async def error_text(self, tool: str, args: dict) -> str:
        """An error's body exactly as sent (its one text content), to compare byte for byte."""
        if self.kind == "typescript":
            result = await self.client.call_tool(tool, args)
            tool_error(result)
            return result["content"][0]["text"]
        result = await self.client.call_tool(tool, args)
        error_body(result)
        return result.content[0].text


@contextlib.asynccontextmanager
async def agent(server, token: str, kind: str) -> AsyncIterator[Caller]:
    if kind == "typescript":
        async with ts_client(server, token) as client:
            yield Caller(client, kind)
    else:
        async with connect(server, token, kind) as client:
            yield Caller(client, kind)


def when(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def order(todo: dict) -> tuple:
    return todo["priority"], when(todo["run_at"]), todo["key"]


@pytest.mark.parametrize("kind", CLIENTS)
async def test_priority_run_at_and_key_come_back_from_the_add_and_every_read(mcp_server, kind):
    """Each argument as given is what add_todo returns and what get_todo, list_todos (with
    its priority and key filters) and claim_next show; a todo given none has the defaults."""
    ep = await vend(mcp_server.store)
    async with agent(mcp_server, ep.token, kind) as a:
        later = await a.ok("add_todo", {"queue": "q", "title": "later", "priority": 0, "key": "nightly-42",
                                        "run_at": "2099-01-01T09:00:00+01:00"})
        assert order(later) == (0, datetime(2099, 1, 1, 8, tzinfo=timezone.utc), "nightly-42")
        assert (later["state"], later["deduplicated"]) == ("pending", False)
        started = datetime.now(timezone.utc)
        delayed = await a.ok("add_todo", {"queue": "q", "title": "in an hour", "delay_seconds": HOUR})
        assert started + timedelta(seconds=HOUR) <= when(delayed["run_at"]) <= (
            datetime.now(timezone.utc) + timedelta(seconds=HOUR + LOAD_SLACK_SECONDS))
        plain = await a.ok("add_todo", {"queue": "q", "title": "plain"})
        assert order(plain) == (2, None, None) and plain["deduplicated"] is False
        past = await a.ok("add_todo", {"queue": "q", "title": "overdue", "priority": 1, "key": "k-1",
                                       "run_at": "2000-01-01T00:00:00Z"})

        got = await a.ok("get_todo", {"id": later["id"]})
        assert order(got) == order(later)
        assert {t["id"] for t in (await a.ok("list_todos", {"priority": 0}))["todos"]} == {later["id"]}
        assert [t["id"] for t in (await a.ok("list_todos", {"key": "nightly-42"}))["todos"]] == [later["id"]]
        listed = {t["id"]: order(t) for t in (await a.ok("list_todos", {}))["todos"]}
        assert listed == {t["id"]: order(t) for t in (later, delayed, plain, past)}

        # A run_at already past is claimable at once; the P1 goes before the P2; the
        # scheduled ones are passed over.
        first = (await a.ok("claim_next", {}))["todo"]
        assert (first["id"], order(first)) == (past["id"], (1, datetime(2000, 1, 1, tzinfo=timezone.utc), "k-1"))
        second = (await a.ok("claim_next", {}))["todo"]
        assert (second["id"], order(second)) == (plain["id"], (2, None, None))
        assert await a.ok("claim_next", {}) == {"todo": None}


@pytest.mark.parametrize("kind", CLIENTS)
async def test_a_second_add_with_a_live_key_returns_that_todo_deduplicated(mcp_server, kind):
    """While a todo with the key is live, adding the key again in that queue adds nothing and
    returns it unchanged, deduplicated; another queue has keys of its own; once the todo is
    done, the key adds anew."""
    ep = await vend(mcp_server.store, queues=("q", "r"))
    async with agent(mcp_server, ep.token, kind) as a:
        first = await a.ok("add_todo", {"queue": "q", "title": "deploy", "key": "deploy-main", "priority": 1})
        again = await a.ok("add_todo", {"queue": "q", "title": "deploy again", "key": "deploy-main", "priority": 0})
        assert first["deduplicated"] is False and again["deduplicated"] is True
        assert {k: v for k, v in again.items() if k != "deduplicated"} == {
            k: v for k, v in first.items() if k != "deduplicated"}
        elsewhere = await a.ok("add_todo", {"queue": "r", "title": "deploy", "key": "deploy-main"})
        assert elsewhere["id"] != first["id"] and elsewhere["deduplicated"] is False
        assert len((await a.ok("list_todos", {"queue": "q"}))["todos"]) == 1

        await a.ok("claim", {"id": first["id"]})
        held = await a.ok("add_todo", {"queue": "q", "title": "deploy", "key": "deploy-main"})
        assert (held["id"], held["state"], held["deduplicated"]) == (first["id"], "claimed", True)
        await a.ok("complete", {"id": first["id"]})
        fresh = await a.ok("add_todo", {"queue": "q", "title": "deploy", "key": "deploy-main"})
        assert fresh["id"] != first["id"] and fresh["deduplicated"] is False
        assert [t["id"] for t in (await a.ok("list_todos", {"key": "deploy-main", "queue": "q"}))["todos"]] == [
            fresh["id"], first["id"]]


@pytest.mark.parametrize("kind", CLIENTS)
async def test_add_todos_deduplicates_within_the_batch_and_against_a_live_todo(mcp_server, kind):
    ep = await vend(mcp_server.store)
    async with agent(mcp_server, ep.token, kind) as a:
        live = await a.ok("add_todo", {"queue": "q", "title": "live", "key": "a"})
        added = (await a.ok("add_todos", {"todos": [
            {"queue": "q", "title": "a again", "key": "a"},
            {"queue": "q", "title": "b", "key": "b", "priority": 0, "delay_seconds": HOUR},
            {"queue": "q", "title": "b again", "key": "b"},
            {"queue": "q", "title": "no key", "priority": 4, "run_at": "2099-06-01T00:00:00Z"},
        ]}))["todos"]
        assert [(t["title"], t["deduplicated"]) for t in added] == [
            ("live", True), ("b", False), ("b", True), ("no key", False)]
        assert added[0]["id"] == live["id"] and added[2]["id"] == added[1]["id"]
        assert order(added[1])[::2] == (0, "b") and added[1]["run_at"] is not None
        assert order(added[3]) == (4, datetime(2099, 6, 1, tzinfo=timezone.utc), None)
        assert len((await a.ok("list_todos", {}))["todos"]) == 3


@pytest.mark.parametrize("kind", CLIENTS)
async def test_claim_next_takes_a_p0_before_an_older_p2(mcp_server, kind):
    ep = await vend(mcp_server.store)
    async with agent(mcp_server, ep.token, kind) as a:
        old = await a.ok("add_todo", {"queue": "q", "title": "old P2"})
        urgent = await a.ok("add_todo", {"queue": "q", "title": "urgent", "priority": 0})
        newer = await a.ok("add_todo", {"queue": "q", "title": "newer P2", "priority": 2})
        claimed = [(await a.ok("claim_next", {}))["todo"]["id"] for _ in range(3)]
        assert claimed == [urgent["id"], old["id"], newer["id"]]


@pytest.mark.parametrize("kind", CLIENTS)
async def test_a_release_with_delay_seconds_is_not_claimable_until_it_falls_due(mcp_server, kind):
    """The snoozed todo is pending with run_at set: claim_next passes it over and claim is a
    conflict saying when it starts; once it has fallen due, claim_next takes it. A release
    with delay_seconds 0 is claimable at once, its run_at left as it was."""
    ep = await vend(mcp_server.store)
    async with agent(mcp_server, ep.token, kind) as a:
        todo = await a.ok("add_todo", {"queue": "q", "title": "snooze me"})
        await a.ok("claim_next", {})
        started = datetime.now(timezone.utc)
        released = await a.ok("release", {"id": todo["id"], "delay_seconds": HOUR, "summary": "not yet"})
        assert (released["state"], released["closed_attempt"]["outcome"]) == ("pending", "released")
        run_at = when(released["run_at"])
        assert started + timedelta(seconds=HOUR) <= run_at <= (
            datetime.now(timezone.utc) + timedelta(seconds=HOUR + LOAD_SLACK_SECONDS))
        assert when((await a.ok("get_todo", {"id": todo["id"]}))["run_at"]) == run_at
        assert await a.ok("claim_next", {}) == {"todo": None}
        refused = await a.error("claim", {"id": todo["id"]})
        assert refused["code"] == "conflict" and "scheduled" in refused["message"], refused

        await mcp_server.store.sweep_due(now=run_at + timedelta(seconds=1))  # the due timer, an hour on
        claim = await a.ok("claim_next", {})
        assert claim["todo"]["id"] == todo["id"] and claim["prior_attempts"][0]["summary"] == "not yet"
        at_once = await a.ok("release", {"id": todo["id"], "delay_seconds": 0})
        assert at_once["state"] == "pending" and when(at_once["run_at"]) == run_at  # the run_at it had
        assert (await a.ok("claim_next", {}))["todo"]["id"] == todo["id"]


# (tool, arguments, the argument the error names); "held" stands for the id of a held todo.
BAD = [
    ("add_todo", {"priority": 7}, "priority"),
    ("add_todo", {"priority": -1}, "priority"),
    ("add_todo", {"priority": 1.5}, "priority"),
    ("add_todo", {"priority": "P0"}, "priority"),
    ("add_todo", {"run_at": "2026-12-05T09:00:00"}, "run_at"),
    ("add_todo", {"run_at": "2026-12-05"}, "run_at"),
    ("add_todo", {"run_at": "tomorrow at nine"}, "run_at"),
    ("add_todo", {"run_at": "2026-12-05T09:00:00Z", "delay_seconds": 60}, "run_at"),
    ("add_todo", {"delay_seconds": -1}, "delay_seconds"),
    ("add_todo", {"delay_seconds": 31 * 86400 + 1}, "delay_seconds"),
    ("add_todo", {"delay_seconds": "60"}, "delay_seconds"),
    ("add_todo", {"key": "k" * 300}, "key"),
    ("add_todo", {"key": "é" * 101}, "key"),  # 101 characters, 202 bytes
    ("add_todo", {"key": "   "}, "key"),
    ("add_todo", {"key": 42}, "key"),
    ("add_todos", {"priority": 7}, "todos[1].priority"),
    ("add_todos", {"run_at": "2026-12-05T09:00:00"}, "todos[1].run_at"),
    ("add_todos", {"run_at": "2026-12-05T09:00:00Z", "delay_seconds": 60}, "todos[1].run_at"),
    ("add_todos", {"delay_seconds": -1}, "todos[1].delay_seconds"),
    ("add_todos", {"key": "k" * 300}, "todos[1].key"),
    ("release", {"delay_seconds": -1}, "delay_seconds"),
    ("release", {"delay_seconds": 31 * 86400 + 1}, "delay_seconds"),
    ("list_todos", {"priority": 7}, "priority"),
    ("list_todos", {"key": "k" * 300}, "key"),
]


def bad_call(tool: str, bad: dict, held: str) -> dict:
    if tool == "add_todo":
        return {"queue": "q", "title": "bad", **bad}
    if tool == "add_todos":
        return {"todos": [{"queue": "q", "title": "fine"}, {"queue": "q", "title": "bad", **bad}]}
    if tool == "release":
        return {"id": held, **bad}
    return bad


@pytest.mark.parametrize("kind", CLIENTS)
async def test_a_bad_priority_run_at_delay_or_key_is_invalid_naming_it_and_changes_nothing(mcp_server, kind):
    ep = await vend(mcp_server.store)
    async with agent(mcp_server, ep.token, kind) as a:
        held = (await a.ok("add_todo", {"queue": "q", "title": "held"}))["id"]
        await a.ok("claim", {"id": held})
        wrong = []
        for tool, bad, argument in BAD:
            error = await a.error(tool, bad_call(tool, bad, held))
            if (error["code"], error.get("argument")) != ("invalid", argument):
                wrong.append((tool, bad, error))
        continued = await a.error("add_todo", {"queue": "q", "title": "t", "key": "k", "continues": held})
        assert (continued["code"], continued["argument"]) == ("invalid", "key")
        [todo] = (await a.ok("list_todos", {}))["todos"]
    assert wrong == []
    assert (todo["id"], todo["state"], todo["attempt"]) == (held, "claimed", 1)
