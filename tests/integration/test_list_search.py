"""The list's search and filters against real Postgres: title, claimant, payload key and
value, state, queue and dead letters, alone and combined, always inside the caller's own
todos (REQ-10); keyset paging under both sorts; and each row's newest attempt."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from board.errors import Invalid
from tests.conftest import make_agent, make_user

T0 = datetime(2026, 11, 30, 14, 0, tzinfo=timezone.utc)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def titles(listing: dict) -> list[str]:
    return [t["title"] for t in listing["todos"]]


async def dead_letter(store, agent, title, *, claimant=None, summary=None, now=None, **kw):
    todo = await store.todo_add(agent, queue=kw.pop("queue", agent.queues[0]), title=title, max_attempts=1, now=now,
                                **kw)
    await store.todo_claim(agent, todo["id"], claimant=claimant, now=now)
    await store.todo_fail(agent, todo["id"], summary=summary, now=now)
    return todo


@pytest.fixture
async def two_humans(store):
    """Ada's todos in two queues over two endpoints, and Bob's, which match every search too."""
    ada, bob = await make_user(store, "ada"), await make_user(store, "bob")
    builds = await make_agent(store, user=ada, agent_id="builder", queues=("builds",))
    docs = await make_agent(store, user=ada, agent_id="writer", queues=("docs",))
    bobs = await make_agent(store, user=bob, agent_id="bobs", queues=("builds",))
    for agent in (builds, bobs):
        await store.todo_add(agent, queue="builds", title="Deploy to STAGING", payload={"env": "staging", "n": 3},
                             now=at(1))
        held = await store.todo_add(agent, queue="builds", title="Fix the flaky build", payload={"env": "prod"},
                                    now=at(2))
        await store.todo_claim(agent, held["id"], claimant="harness/box/Fixer/run-7", now=at(3))
        await dead_letter(store, agent, "Deploy to production", claimant="harness/box/deployer/run-1",
                          summary="tests red", payload={"env": "prod", "n": 3}, now=at(4))
    await store.todo_add(docs, queue="docs", title="Write the deploy guide", payload={"env": "staging"}, now=at(5))
    return ada, bob


async def test_each_filter_finds_only_the_humans_own_matching_todos(store, two_humans):
    ada, bob = two_humans
    cases = [
        ({"title": "deploy"}, ["Write the deploy guide", "Deploy to production", "Deploy to STAGING"]),
        ({"title": "  staging "}, ["Deploy to STAGING"]),  # case ignored, spaces around trimmed
        ({"claimant": "FIXER"}, ["Fix the flaky build"]),
        ({"claimant": "harness/box"}, ["Deploy to production", "Fix the flaky build"]),
        ({"payload_key": "env", "payload_value": "staging"}, ["Write the deploy guide", "Deploy to STAGING"]),
        ({"payload_key": "n", "payload_value": "3"}, ["Deploy to production", "Deploy to STAGING"]),  # as text
        ({"payload_key": "n"}, ["Deploy to production", "Deploy to STAGING"]),  # the key alone: present
        ({"payload_key": "env", "payload_value": "Staging"}, []),  # a value is exact
        ({"state": "claimed"}, ["Fix the flaky build"]),
        ({"queue": "docs"}, ["Write the deploy guide"]),
        ({"dead_letter": True}, ["Deploy to production"]),
    ]
    for filters, expected in cases:
        assert titles(await store.todo_list(ada, **filters)) == expected, filters
        mine = {t["endpoint_id"] for t in (await store.todo_list(ada, **filters))["todos"]}
        bobs = {t["endpoint_id"] for t in (await store.todo_list(bob, **filters))["todos"]}
        assert not mine & bobs, filters  # Bob's matching todos never appear in Ada's list
    assert len((await store.todo_list(bob))["todos"]) == 3


async def test_filters_combine_and_every_one_narrows(store, two_humans):
    ada, bob = two_humans
    every = {"title": "deploy", "claimant": "deployer", "payload_key": "env", "payload_value": "prod",
             "state": "failed", "queue": "builds", "dead_letter": True}
    assert titles(await store.todo_list(ada, **every)) == ["Deploy to production"]
    assert titles(await store.todo_list(ada, **every, sort="updated")) == ["Deploy to production"]
    for name, other in [("title", "flaky"), ("claimant", "fixer"), ("payload_value", "staging"),
                        ("state", "pending"), ("queue", "docs")]:
        assert titles(await store.todo_list(ada, **(every | {name: other}))) == [], name
    bobs = await store.todo_list(bob, **every)
    assert titles(bobs) == ["Deploy to production"]
    assert bobs["todos"][0]["id"] != (await store.todo_list(ada, **every))["todos"][0]["id"]


async def test_the_claimant_filter_reads_the_newest_attempt_only(store):
    ada = await make_user(store)
    agent = await make_agent(store, user=ada, queues=("q",))
    todo = await store.todo_add(agent, queue="q", title="handed on")
    await store.todo_claim(agent, todo["id"], claimant="first-worker")
    await store.todo_release(agent, todo["id"], summary="over to you")
    assert titles(await store.todo_list(ada, claimant="first-worker")) == ["handed on"]  # closed, still newest
    await store.todo_claim(agent, todo["id"], claimant="second-worker")
    assert titles(await store.todo_list(ada, claimant="first-worker")) == []
    assert titles(await store.todo_list(ada, claimant="second")) == ["handed on"]
    never = await store.todo_add(agent, queue="q", title="never claimed")
    assert never["id"] not in [t["id"] for t in (await store.todo_list(ada, claimant="worker"))["todos"]]


async def test_a_rows_newest_attempt_says_why(store):
    ada = await make_user(store)
    agent = await make_agent(store, user=ada, queues=("q",))
    await store.todo_add(agent, queue="q", title="fresh", now=at(1))
    held = await store.todo_add(agent, queue="q", title="held", now=at(2))
    await store.todo_claim(agent, held["id"], claimant="run-9", now=at(2))
    await dead_letter(store, agent, "dead", claimant="run-1", summary="tests red\n\nsee " + "log " * 100, now=at(3))
    rows = {t["title"]: t for t in (await store.todo_list(ada))["todos"]}
    assert rows["fresh"]["last_attempt"] is None
    assert rows["held"]["last_attempt"] == {"seq": 1, "outcome": None, "claimant": "run-9", "summary": None,
                                            "summary_cut": False, "answered_at": None, "asked_at": None,
                                            "question_expires_at": None}
    dead = rows["dead"]["last_attempt"]
    assert dead["outcome"] == "failed" and dead["claimant"] == "run-1" and dead["summary_cut"] is True
    assert dead["summary"].startswith("tests red see log log") and len(dead["summary"]) == 80  # one line, cut
    # An agent's list_todos is unchanged: no attempt read.
    assert "last_attempt" not in (await store.todo_list(agent))["todos"][0]


async def test_a_list_row_says_whether_it_matches_and_is_nothing_for_another_human(store, two_humans):
    ada, bob = two_humans
    dead = (await store.todo_list(ada, dead_letter=True))["todos"][0]
    row = await store.todo_list_row(ada, dead["id"], title="production", dead_letter=True)
    assert row["matches"] is True and row["last_attempt"]["summary"] == "tests red"
    assert (await store.todo_list_row(ada, dead["id"], payload_key="env", payload_value="staging"))["matches"] is False
    assert (await store.todo_list_row(ada, dead["id"], payload_key="missing"))["matches"] is False
    assert await store.todo_list_row(bob, dead["id"]) is None


async def paged(store, caller, **kw) -> list[dict]:
    out, cursor = [], None
    while True:
        page = await store.todo_list(caller, limit=2, cursor=cursor, **kw)
        out += page["todos"]
        cursor = page["next_cursor"]
        if cursor is None:
            return out
        assert len(page["todos"]) == 2


async def test_keyset_pages_follow_each_sort_across_endpoints(store):
    ada, bob = await make_user(store), await make_user(store)
    one = await make_agent(store, user=ada, agent_id="one", queues=("q",))
    two = await make_agent(store, user=ada, agent_id="two", queues=("q",))
    other = await make_agent(store, user=bob, agent_id="other", queues=("q",))
    made = []
    for i in range(7):
        made.append(await store.todo_add(one if i % 2 else two, queue="q", title=f"todo {i}", now=at(i)))
        await store.todo_add(other, queue="q", title=f"bob's {i}", now=at(i))
    # Old todos change later, so the updated order differs from the created one.
    await store.todo_claim(one, made[1]["id"], now=at(20))
    await store.todo_claim(two, made[0]["id"], now=at(30))
    await store.todo_claim(two, made[4]["id"], now=at(25))

    by_created = await paged(store, ada)
    assert [t["title"] for t in by_created] == [f"todo {i}" for i in range(6, -1, -1)]
    by_updated = await paged(store, ada, sort="updated")
    assert [t["title"] for t in by_updated] == ["todo 0", "todo 4", "todo 1", "todo 6", "todo 5", "todo 3", "todo 2"]
    assert [t["updated_at"] for t in by_updated] == sorted((t["updated_at"] for t in by_updated), reverse=True)
    pending = await paged(store, ada, sort="updated", state="pending", title="todo")
    assert [t["title"] for t in pending] == ["todo 6", "todo 5", "todo 3", "todo 2"]
    assert [t["title"] for t in await paged(store, bob, sort="updated")] == [f"bob's {i}" for i in range(6, -1, -1)]

    # The cursor carries its sort: it pages only the sort it was made for.
    created_cursor = (await store.todo_list(ada, limit=2))["next_cursor"]
    updated_cursor = (await store.todo_list(ada, limit=2, sort="updated"))["next_cursor"]
    for cursor, sort in ((created_cursor, "updated"), (updated_cursor, "created")):
        with pytest.raises(Invalid) as e:
            await store.todo_list(ada, limit=2, cursor=cursor, sort=sort)
        assert e.value.argument == "cursor"


async def test_same_time_todos_page_by_id_without_loss_or_repeat(store):
    ada = await make_user(store)
    agents = [await make_agent(store, user=ada, agent_id=f"a{i}", queues=("q",)) for i in range(3)]
    ids = {(await store.todo_add(agents[i % 3], queue="q", title=f"t{i}", now=at(0)))["id"] for i in range(9)}
    for sort in ("created", "updated"):
        seen = [t["id"] for t in await paged(store, ada, sort=sort)]
        assert sorted(seen) == sorted(ids) and len(seen) == len(set(seen)), sort
        assert seen == sorted(seen, reverse=True), sort  # ties broken by id, newest-first order


@pytest.mark.parametrize("filters,argument", [
    ({"payload_value": "x"}, "payload_value"),  # a value needs its key
    ({"title": "x" * 501}, "title"),
    ({"claimant": "c" * 129}, "claimant"),
    ({"payload_key": 5}, "payload_key"),
    ({"title": "a\x00b"}, "title"),
    ({"state": "bogus"}, "state"),
    ({"sort": "titel"}, "sort"),
    ({"cursor": "not-a-cursor"}, "cursor"),
])
async def test_a_filter_that_cannot_be_used_is_invalid_naming_it(store, filters, argument):
    ada = await make_user(store)
    with pytest.raises(Invalid) as e:
        await store.todo_list(ada, **filters)
    assert e.value.argument == argument


async def test_a_rows_open_question_says_when_it_was_asked_and_expires_until_answered(store):
    """What the list row needs to say a todo waits for a person (liveness.waiting_for_person)."""
    ada = await make_user(store)
    agent = await make_agent(store, user=ada, queues=("q",))
    todo = await store.todo_add(agent, queue="q", title="asks", now=at(1))
    await store.todo_claim(agent, todo["id"], now=at(1))
    await store.todo_interrupt(agent, todo["id"], question="ship it?", expires_in_seconds=600, now=at(2))
    last = (await store.todo_list(ada))["todos"][0]["last_attempt"]
    assert (last["asked_at"], last["question_expires_at"], last["answered_at"]) == (
        at(2), at(2) + timedelta(seconds=600), None)
    row = await store.todo_list_row(ada, todo["id"])  # the live list's row says the same
    assert row["last_attempt"]["asked_at"] == at(2)
    await store.todo_answer(ada, todo["id"], text="yes", now=at(3))
    last = (await store.todo_list(ada))["todos"][0]["last_attempt"]
    assert last["answered_at"] == at(3)
