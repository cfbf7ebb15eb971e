"""A closing reply lost on the way back: an agent retries its complete, fail or release with
the same lease token, and is answered with the closed result again, marked replayed, with
nothing changed. Every other late close stays a conflict (REQ-6, REQ-19)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from board.errors import Conflict
from tests.conftest import make_agent, make_user, sql_rows

CLOSES = {"complete": ("done", "completed"), "fail": ("failed", "failed"), "release": ("pending", "released")}


async def tables(db_url, todo_id) -> tuple[list[dict], list[dict]]:
    todos = await sql_rows(db_url, "SELECT * FROM todos WHERE id = %s", (todo_id,))
    attempts = await sql_rows(db_url, "SELECT * FROM attempts WHERE todo_id = %s ORDER BY seq", (todo_id,))
    return todos, attempts


async def fenced_claim(store, agent) -> tuple[str, str]:
    todo = await store.todo_add(agent, queue="q", title="fenced", max_attempts=5)
    claim = await store.todo_claim(agent, todo["id"], require_fence=True)
    return todo["id"], claim["lease_token"]


async def close(store, agent, verb, todo_id, token):
    return await getattr(store, f"todo_{verb}")(agent, todo_id, lease_token=token, summary=f"{verb} went through")


@pytest.mark.parametrize("verb", list(CLOSES))
async def test_a_close_retried_with_its_token_returns_the_closed_result_again(store, agent, db_url, verb):
    todo_id, token = await fenced_claim(store, agent)
    first = await close(store, agent, verb, todo_id, token)
    after_first = await tables(db_url, todo_id)
    again = await close(store, agent, verb, todo_id, token)
    assert again["replayed"] is True and "replayed" not in first
    assert again["closed_attempt"] == first["closed_attempt"]
    assert (again["id"], again["state"]) == (todo_id, CLOSES[verb][0])
    assert again["closed_attempt"]["outcome"] == CLOSES[verb][1]
    assert await tables(db_url, todo_id) == after_first, "a replay must change nothing"


@pytest.mark.parametrize("verb", list(CLOSES))
async def test_a_different_closing_verb_with_the_spent_token_is_a_conflict(store, agent, db_url, verb):
    todo_id, token = await fenced_claim(store, agent)
    await close(store, agent, verb, todo_id, token)
    before = await tables(db_url, todo_id)
    for other in CLOSES:
        if other != verb:
            with pytest.raises(Conflict):
                await close(store, agent, other, todo_id, token)
    assert await tables(db_url, todo_id) == before


async def test_a_release_replayed_after_the_todo_was_claimed_again_leaves_the_new_attempt_alone(store, agent, db_url):
    todo_id, old_token = await fenced_claim(store, agent)
    released = await store.todo_release(agent, todo_id, lease_token=old_token)
    second = await store.todo_claim(agent, todo_id, require_fence=True)
    before = await tables(db_url, todo_id)
    again = await store.todo_release(agent, todo_id, lease_token=old_token)
    assert again["replayed"] is True
    assert again["closed_attempt"] == released["closed_attempt"] and again["closed_attempt"]["seq"] == 1
    assert again["state"] == "claimed", "the todo is shown as it is now: held by the second attempt"
    assert await tables(db_url, todo_id) == before
    # The new attempt's token still works, and the old one completes nothing.
    with pytest.raises(Conflict):
        await store.todo_complete(agent, todo_id, lease_token=old_token)
    assert (await store.todo_complete(agent, todo_id, lease_token=second["lease_token"]))["state"] == "done"


async def test_a_release_made_by_the_owning_human_is_not_replayed_to_the_agent(store, db_url):
    user = await make_user(store)
    agent = await make_agent(store, user=user)
    todo_id, token = await fenced_claim(store, agent)
    await store.todo_release(user, todo_id)  # the human exempt from the fence (REQ-6)
    before = await tables(db_url, todo_id)
    with pytest.raises(Conflict):
        await store.todo_release(agent, todo_id, lease_token=token)
    assert await tables(db_url, todo_id) == before


async def test_another_agent_id_of_the_endpoint_with_the_spent_token_gets_a_conflict(store, db_url):
    agent = await make_agent(store, agent_id="claimer")
    todo_id, token = await fenced_claim(store, agent)
    await store.todo_complete(agent, todo_id, lease_token=token)
    with pytest.raises(Conflict):
        await store.todo_complete(replace(agent, agent_id="someone-else"), todo_id, lease_token=token)


async def test_an_unfenced_close_repeated_is_still_a_conflict(store, agent):
    todo = await store.todo_add(agent, queue="q", title="unfenced")
    await store.todo_claim(agent, todo["id"])
    await store.todo_complete(agent, todo["id"])
    with pytest.raises(Conflict, match="the todo is done"):
        await store.todo_complete(agent, todo["id"])


async def test_a_wrong_token_after_the_close_is_a_conflict(store, agent):
    todo_id, token = await fenced_claim(store, agent)
    await store.todo_complete(agent, todo_id, lease_token=token)
    with pytest.raises(Conflict):
        await store.todo_complete(agent, todo_id, lease_token=token[:-2] + "xx")
