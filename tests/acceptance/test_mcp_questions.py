"""An agent asks, a human answers, over MCP through the Python SDK's own client in both
protocol generations: interrupt with a question and choices, get_todo shows it, a second
interrupt is a conflict, bad questions are invalid naming the argument; the owner's answer on
the Board (its form over HTTP) rings the waiting session at once (the latency is measured and
printed, bounded only generously), resume returns the answer; an agent that died waiting is
reaped and the next claimer reads the question and the answer; an expired question releases
the todo and the next claimer reads the expired note."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from dataclasses import dataclass, field
from datetime import datetime

import jsonschema
import mcp_types as types
import pytest

from board.config import Settings
from board.store.store import Human
from tests.acceptance.mcp_helpers import (GENERATIONS, call, call_error, connect, doorbell, vend, wait_until)
from tests.acceptance.test_board_auth import client_for, make_human, sign_in
from tests.conftest import LOAD_SLACK_SECONDS, create_database, drop_database, run_server, sql_rows

TODOS = "switchboard://todos"
QUESTION = "Deploy build 412 to production now?"
CHOICES = ["yes", "not yet", "roll back"]
# The issue asks for the ring within a second of the answer's commit; measured and printed,
# asserted only with this much room on a shared two-core machine.
RING_BOUND = 1.0 + LOAD_SLACK_SECONDS + 3.0

_names = itertools.count(1)


def uri(todo_id: str) -> str:
    return f"{TODOS}/{todo_id}"


def same_answers(a: list[dict], b: list[dict]) -> bool:
    """Answers alike, their times compared as instants (a JSON read from Postgres drops a
    trailing zero of the microseconds that Python's isoformat keeps)."""
    def instants(answers):
        return [{**x, "at": datetime.fromisoformat(x["at"])} for x in answers]
    return instants(a) == instants(b)


def _server(pg_admin_url, **changes):
    @contextlib.asynccontextmanager
    async def running():
        name, url = create_database(pg_admin_url)
        settings = Settings(database_url=url, secret_key="test-secret-key-0123456789", reaper_interval_seconds=0.2,
                            retry_interval_seconds=0.2, retention_interval_seconds=0, doorbell_heartbeat_seconds=0,
                            **changes)
        try:
            async with run_server(settings) as server:
                yield server
        finally:
            drop_database(pg_admin_url, name)
    return running()


@pytest.fixture(scope="module")
async def questions_server(pg_admin_url, template_url):
    """The reaper and the question sweep every 0.2 s; the server's lease (what an answer gives
    the holder to resume in) is the default minute. Each test makes its own human."""
    async with _server(pg_admin_url) as server:
        yield server


@pytest.fixture(scope="module")
async def short_lease_server(pg_admin_url, template_url):
    """An answer gives the holder 1 s to resume in: a holder that never does is reaped."""
    async with _server(pg_admin_url, lease_seconds=1.0) as server:
        yield server


@dataclass
class Bell:
    """The doorbell rings one session heard: (URI, monotonic time) in arrival order."""

    heard: list[tuple[str, float]] = field(default_factory=list)

    def add(self, ring_uri: str) -> None:
        self.heard.append((ring_uri, time.monotonic()))

    def count(self, ring_uri: str) -> int:
        return sum(1 for u, _ in self.heard if u == ring_uri)

    async def next_ring(self, ring_uri: str, seen: int, timeout: float) -> float:
        """When the (seen+1)th ring for the URI arrived."""
        await wait_until(lambda: self.count(ring_uri) > seen, timeout=timeout)
        return [t for u, t in self.heard if u == ring_uri][seen]


@contextlib.asynccontextmanager
async def waiting_session(server, ep, generation: str, watch: str):
    """An agent's session that can be rung: 2025-11-25, its GET stream open (it hears every
    todo of its queues); 2026-07-28, a subscriptions/listen stream for the URI `watch`."""
    bell = Bell()

    async def heard(message) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            bell.add(str(message.params.uri))

    if generation == "legacy":
        before = doorbell(server).live_doorways(ep.endpoint_id)
        async with connect(server, ep.token, "legacy", inbox=_Handler(heard)) as client:
            await wait_until(lambda: doorbell(server).live_doorways(ep.endpoint_id) > before)
            yield client, bell
        return
    async with connect(server, ep.token, "modern") as client:
        async with client.listen(resource_subscriptions=[watch]) as sub:
            assert sub.honored.resource_subscriptions == [watch]

            async def collect():
                async for event in sub:
                    bell.add(event.uri)
            task = asyncio.create_task(collect())
            try:
                yield client, bell
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task


@dataclass
class _Handler:
    """What mcp_helpers.connect takes as an inbox: an object with an async handler."""

    handler: object


async def checked(client, tool: str, args: dict) -> dict:
    """call(), with the result validated against the tool's declared output schema (the
    Python SDK's client does not check it; the TypeScript SDK's does, in
    test_ts_sdk_questions.py, date-time formats included)."""
    result = await call(client, tool, args)
    [schema] = [t.output_schema for t in (await client.list_tools()).tools if t.name == tool]
    jsonschema.Draft202012Validator(schema).validate(result)
    return result


async def owner_and_endpoint(server):
    name = f"owner{next(_names)}"
    human = await make_human(server.store, name)
    ep = await vend(server.store, user_id=human.user_id)
    return name, ep


async def held_todo(server, ep, title: str = "ship it") -> str:
    async with connect(server, ep.token) as client:
        todo = await call(client, "add_todo", {"queue": "q", "title": title})
        # A lease the reaper cannot end during the test: only an answer's lease may.
        await call(client, "claim", {"id": todo["id"], "lease_seconds": 600})
    return todo["id"]


async def answer_on_the_board(server, username: str, todo_id: str, **form) -> tuple[float, float]:
    """The owner signs in and posts the drawer's answer form; returns the monotonic times just
    before the post and when its reply came (the answer committed in between)."""
    async with client_for(server) as board:
        token = await sign_in(board, username)
        began = time.monotonic()
        r = await board.post(f"/todos/{todo_id}/answer", data={"csrf_token": token, **form})
        returned = time.monotonic()
    assert r.status_code == 303, r.text
    return began, returned


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_the_owners_answer_on_the_board_rings_the_waiting_session_and_resume_returns_it(questions_server,
                                                                                           generation):
    server = questions_server
    username, ep = await owner_and_endpoint(server)
    todo_id = await held_todo(server, ep)
    async with waiting_session(server, ep, generation, uri(todo_id)) as (agent, bell):
        asked = await checked(agent, "interrupt", {"id": todo_id, "question": QUESTION + "\x07", "choices": CHOICES,
                                                "expires_in_seconds": 3600})
        assert asked["state"] == "input_required" and asked["id"] == todo_id
        assert asked["question"]["text"] == QUESTION and asked["question"]["choices"] == CHOICES
        assert asked["question"]["truncated"] is False and asked["question"]["expires_at"]

        got = await checked(agent, "get_todo", {"id": todo_id})
        [attempt] = got["attempts"]
        note = attempt["notes"][0]
        assert (note["kind"], note["author_kind"], note["text"], note["choices"]) == (
            "question", "endpoint", QUESTION, CHOICES)
        assert datetime.fromisoformat(note["expires_at"]) == datetime.fromisoformat(asked["question"]["expires_at"])
        assert attempt["question"]["current"] is True and attempt["question"]["answers"] == []

        again = await call_error(agent, "interrupt", {"id": todo_id, "question": "and now?"})
        assert again["code"] == "conflict"

        seen = bell.count(uri(todo_id))
        began, returned = await answer_on_the_board(server, username, todo_id, choice="not yet", text="")
        rung = await bell.next_ring(uri(todo_id), seen, timeout=RING_BOUND + 5)
        print(f"\n[{generation}] answer posted -> ring heard: {rung - began:.3f} s from the post, "
              f"{rung - returned:+.3f} s from its reply (the commit is in between)")
        assert rung - began < RING_BOUND

        resumed = await checked(agent, "resume", {"id": todo_id})
        assert resumed["state"] == "claimed"
        [answer] = resumed["answers"]
        assert (answer["text"], answer["choice"], answer["who"]) == ("not yet", "not yet", username)
        assert answer["at"]

        after = await checked(agent, "get_todo", {"id": todo_id})
        notes = after["attempts"][0]["notes"]
        assert [(n["kind"], n["author_kind"]) for n in notes] == [("answer", "owner"), ("question", "endpoint")]
        assert (notes[0]["choice"], notes[0]["who"]) == ("not yet", username)
        assert same_answers(after["attempts"][0]["question"]["answers"], [answer])


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_a_text_answer_rings_at_once_even_inside_the_doorbell_gate(questions_server, generation):
    """The add rang the todo a moment ago, so its ready-ring gate (a minute) is closed: the
    answer (here through the store, as the Board's form calls it) rings regardless."""
    server = questions_server
    username, ep = await owner_and_endpoint(server)
    async with waiting_session(server, ep, generation, TODOS) as (agent, bell):
        todo = await call(agent, "add_todo", {"queue": "q", "title": "needs a code"})
        todo_id = todo["id"]
        await bell.next_ring(uri(todo_id), 0, timeout=10)
        assert todo_id in doorbell(server).gate  # a second ready ring would be held back now
        await call(agent, "claim", {"id": todo_id, "lease_seconds": 600})
        await call(agent, "interrupt", {"id": todo_id, "state": "auth_required", "question": "Paste the one-time code"})
        owner = await human_named(server, username)
        began = time.monotonic()
        await server.store.todo_answer(owner, todo_id, text="493 112")
        returned = time.monotonic()
        rung = await bell.next_ring(uri(todo_id), 1, timeout=RING_BOUND + 5)
        print(f"\n[{generation}] store answer -> ring heard: {rung - began:.3f} s from the call, "
              f"{rung - returned:+.3f} s from its return (the commit is in between)")
        assert rung - began < RING_BOUND
        resumed = await call(agent, "resume", {"id": todo_id})
    assert [(a["text"], a["choice"], a["who"]) for a in resumed["answers"]] == [("493 112", None, username)]


async def human_named(server, username: str) -> Human:
    rows = await sql_rows(server.settings.database_url, "SELECT id FROM users WHERE username = %s", (username,))
    return Human(rows[0]["id"], username)


async def wait_for_state(server, todo_id: str, state: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = await sql_rows(server.settings.database_url, "SELECT state::text AS state FROM todos WHERE id = %s",
                              (todo_id,))
        if rows[0]["state"] == state:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{todo_id} is still {rows[0]['state']}, not {state}, after {timeout} s")


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_an_agent_that_died_waiting_is_reaped_and_the_next_claimer_reads_question_and_answer(
        short_lease_server, generation):
    """The holder asks, is answered, and never resumes: the answer's lease (the server's, 1 s
    here) lapses, the real reaper takes the todo back, and the next claim_next carries the
    question and the answer in prior_attempts."""
    server = short_lease_server
    username, ep = await owner_and_endpoint(server)
    todo_id = await held_todo(server, ep, "choose a fix")
    async with connect(server, ep.token, generation) as first:
        await call(first, "interrupt", {"id": todo_id, "question": "Patch or revert?", "choices": ["patch", "revert"]})
    # The first agent is gone. The owner answers on the Board; nobody resumes.
    await answer_on_the_board(server, username, todo_id, choice="revert")
    await wait_for_state(server, todo_id, "pending")
    async with connect(server, ep.token, generation) as second:
        claim = await checked(second, "claim_next", {"claimant": "run-2", "lease_seconds": 600})
    assert claim["todo"]["id"] == todo_id and claim["attempt_seq"] == 2
    [prior] = claim["prior_attempts"]
    assert (prior["outcome"], prior["died"]) == ("reaped", True)
    question = prior["question"]
    assert (question["text"], question["choices"], question["current"], question["expired_at"]) == (
        "Patch or revert?", ["patch", "revert"], False, None)
    assert [(a["text"], a["choice"], a["who"]) for a in question["answers"]] == [("revert", "revert", username)]
    assert [(n["kind"], n["text"]) for n in prior["notes"]] == [("answer", "revert"), ("question", "Patch or revert?")]


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_an_expired_question_releases_the_todo_and_the_next_claimer_reads_why(questions_server, generation):
    server = questions_server
    _, ep = await owner_and_endpoint(server)
    todo_id = await held_todo(server, ep, "wait for approval")
    async with connect(server, ep.token, generation) as first:
        asked = await call(first, "interrupt", {"id": todo_id, "question": "Approve the migration?",
                                                "expires_in_seconds": 1})
        assert asked["question"]["expires_at"] and asked["question"]["choices"] is None
        await wait_for_state(server, todo_id, "pending")  # the question sweep runs every 0.2 s
        late = await call_error(first, "resume", {"id": todo_id})
        assert late["code"] == "conflict"
    async with connect(server, ep.token, generation) as second:
        claim = await checked(second, "claim_next", {"lease_seconds": 600})
    assert claim["todo"]["id"] == todo_id and claim["attempt_seq"] == 2
    [prior] = claim["prior_attempts"]
    assert (prior["outcome"], prior["disposition"], prior["died"]) == ("released", "requeued", False)
    expired, question = prior["notes"][:2]
    assert (expired["kind"], expired["author_kind"]) == ("expired", "system")
    assert "expired unanswered" in expired["text"]
    assert (question["kind"], question["text"]) == ("question", "Approve the migration?")
    assert prior["question"]["expired_at"] and prior["question"]["answers"] == []


@pytest.mark.parametrize("generation", GENERATIONS)
@pytest.mark.parametrize("bad, argument", [
    ({"question": " \x07 "}, "question"),
    ({"question": "?", "choices": [str(i) for i in range(11)]}, "choices"),
    ({"question": "?", "choices": ["yes", "yes"]}, "choices"),
    ({"question": "?", "choices": []}, "choices"),
    ({"choices": ["yes"]}, "choices"),
    ({"question": "?", "expires_in_seconds": 0}, "expires_in_seconds"),
    ({"question": "?", "expires_in_seconds": "soon"}, "expires_in_seconds"),
])
async def test_a_bad_question_is_invalid_naming_the_argument_and_the_todo_stays_claimed(questions_server, generation,
                                                                                       bad, argument):
    server = questions_server
    _, ep = await owner_and_endpoint(server)
    todo_id = await held_todo(server, ep)
    async with connect(server, ep.token, generation) as agent:
        error = await call_error(agent, "interrupt", {"id": todo_id, **bad})
        assert (error["code"], error["argument"]) == ("invalid", argument), error
        assert argument in error["message"]
        got = await call(agent, "get_todo", {"id": todo_id})
    assert got["state"] == "claimed" and got["attempts"][0]["notes"] == []
