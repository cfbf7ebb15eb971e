"""REQ-6, every fence path: each holder verb (heartbeat, note, complete, fail, release) and
the interrupts (interrupt, resume) on a fenced attempt, with no token, a wrong token, the token
of a stale attempt of the same todo, and the right token. Every refusal is conflict and
changes nothing, in the todo or in any attempt; the right token does what the verb says."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from board.errors import Conflict
from tests.conftest import make_agent, sql_rows

VERBS = ("heartbeat", "note", "complete", "fail", "release", "interrupt", "resume")
CASES = ("no_token", "wrong_token", "stale_token", "right_token")
# What the right token leads to: the todo's state and the open attempt's outcome (None: still open).
AFTER = {"heartbeat": ("claimed", None), "note": ("claimed", None), "complete": ("done", "completed"), "fail": ("failed", "failed"),
         "release": ("pending", "released"), "interrupt": ("input_required", None), "resume": ("claimed", None)}


async def snapshot(db_url, todo_id) -> tuple[list[dict], list[dict], list[dict]]:
    todos = await sql_rows(db_url, "SELECT * FROM todos WHERE id = %s", (todo_id,))
    attempts = await sql_rows(db_url, "SELECT * FROM attempts WHERE todo_id = %s ORDER BY seq", (todo_id,))
    notes = await sql_rows(db_url, "SELECT * FROM attempt_notes WHERE todo_id = %s ORDER BY seq, n", (todo_id,))
    return todos, attempts, notes


async def fenced_attempt(store, agent, verb: str) -> tuple[str, str, str]:
    """A todo whose attempt 2 is open and fenced (attempt 1's lease lapsed and was taken
    over, so its token is stale); interrupted first when the verb is resume. Returns the
    todo id, attempt 2's token and attempt 1's."""
    t0 = datetime.now(timezone.utc) - timedelta(minutes=2)
    todo = await store.todo_add(agent, queue="q", title="fenced", max_attempts=5)
    first = await store.todo_claim(agent, todo["id"], require_fence=True, lease_seconds=10, now=t0)
    second = await store.todo_claim(agent, todo["id"], require_fence=True, lease_seconds=3600,
                                    now=t0 + timedelta(seconds=30))
    assert (first["attempt_seq"], second["attempt_seq"]) == (1, 2)
    if verb == "resume":
        await store.todo_interrupt(agent, todo["id"], lease_token=second["lease_token"])
    return todo["id"], second["lease_token"], first["lease_token"]


async def call(store, agent, verb: str, todo_id: str, token: str | None):
    kwargs = {"lease_token": token} if token is not None else {}
    if verb == "note":  # a note leaves the todo as it is: answer with the todo read afterwards
        await store.todo_note(agent, todo_id, text=f"note with {token!r}", **kwargs)
        return await store.todo_get(agent, todo_id)
    if verb in ("complete", "fail", "release"):
        kwargs["summary"] = f"{verb} with {token!r}"
    return await getattr(store, f"todo_{verb}")(agent, todo_id, **kwargs)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("verb", VERBS)
async def test_fenced_attempt(store, agent, db_url, verb, case):
    todo_id, right, stale = await fenced_attempt(store, agent, verb)
    token = {"no_token": None, "wrong_token": "not-the-token-" + right[:6], "stale_token": stale,
             "right_token": right}[case]
    before = await snapshot(db_url, todo_id)
    if case != "right_token":
        with pytest.raises(Conflict):
            await call(store, agent, verb, todo_id, token)
        assert await snapshot(db_url, todo_id) == before, f"{verb} with {case} changed something"
        return
    out = await call(store, agent, verb, todo_id, token)
    state, outcome = AFTER[verb]
    assert out["state"] == state
    todos, attempts, notes = await snapshot(db_url, todo_id)
    assert todos[0]["state"] == state
    assert [a["outcome"] for a in attempts] == ["lease_expired", outcome]
    assert attempts[0] == before[1][0], "the stale attempt must not change"
    assert [(n["seq"], n["n"]) for n in notes] == ([(2, 1)] if verb == "note" else [])


@pytest.mark.parametrize("verb", VERBS)
async def test_the_right_token_from_the_same_endpoint_under_another_agent_id_is_refused(store, db_url, verb):
    """The owner check holds on its own: same endpoint, same scope, the right token, but the
    caller is not the agent that claimed (owner agent:<agent_id> differs)."""
    agent = await make_agent(store, agent_id="claimer")
    todo_id, right, _ = await fenced_attempt(store, agent, verb)
    impostor = replace(agent, agent_id="someone-else")
    assert impostor.endpoint_id == agent.endpoint_id and impostor.scope == agent.scope
    before = await snapshot(db_url, todo_id)
    with pytest.raises(Conflict):
        await call(store, impostor, verb, todo_id, right)
    assert await snapshot(db_url, todo_id) == before


@pytest.mark.parametrize("verb", VERBS)
async def test_an_unfenced_attempt_refuses_another_agent_id_of_the_same_endpoint(store, db_url, verb):
    """Without a fence the statement's own owner check is all that stands between the
    holder and another agent sharing its endpoint."""
    agent = await make_agent(store, agent_id="claimer")
    todo = await store.todo_add(agent, queue="q", title="unfenced")
    await store.todo_claim(agent, todo["id"])
    if verb == "resume":
        await store.todo_interrupt(agent, todo["id"])
    impostor = replace(agent, agent_id="someone-else")
    before = await snapshot(db_url, todo["id"])
    with pytest.raises(Conflict):
        await call(store, impostor, verb, todo["id"], None)
    assert await snapshot(db_url, todo["id"]) == before
    assert (await call(store, agent, verb, todo["id"], None))["state"] == AFTER[verb][0]
