"""Notes on the open attempt, against Postgres: written by the holder (fenced as heartbeat
is, owner-checked, scoped through the todo), cleaned and cut, pruned past the per-attempt
cap and counted, returned where the next worker looks (prior_attempts, get_todo), gone with
their attempt, and activity for the derived liveness without extending the lease."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from board.errors import Conflict, Invalid, NotFound
from board.store.store import Store
from tests.conftest import make_agent, make_user, sql_rows


async def notes_in_db(db_url, todo_id) -> list[dict]:
    return await sql_rows(db_url, "SELECT seq, n, author_kind::text AS author_kind, text, truncated "
                                  "FROM attempt_notes WHERE todo_id = %s ORDER BY seq, n", (todo_id,))


async def attempt_row(db_url, todo_id, seq) -> dict:
    [row] = await sql_rows(db_url, "SELECT * FROM attempts WHERE todo_id = %s AND seq = %s", (todo_id, seq))
    return row


async def held(store, agent, **claim):
    todo = await store.todo_add(agent, queue="q", title="noted")
    out = await store.todo_claim(agent, todo["id"], **claim)
    return todo["id"], out


async def test_the_holder_notes_on_its_open_attempt_and_get_todo_returns_them_newest_first(store, agent, db_url):
    tid, _ = await held(store, agent)
    first = await store.todo_note(agent, tid, text="picked the bisect approach")
    second = await store.todo_note(agent, tid, text="dead end: the flake is not in the parser")
    assert (first["attempt_seq"], first["notes_count"], second["notes_count"], second["notes_pruned"]) == (1, 1, 2, 0)
    assert second["note"]["author_kind"] == "endpoint" and second["note"]["truncated"] is False
    [open_attempt] = (await store.todo_get(agent, tid))["attempts"]
    assert [n["text"] for n in open_attempt["notes"]] == ["dead end: the flake is not in the parser",
                                                          "picked the bisect approach"]
    assert (open_attempt["notes_count"], open_attempt["notes_pruned"]) == (2, 0)
    assert open_attempt["notes"][0]["at"] == second["note"]["at"] == open_attempt["last_note_at"]
    assert set(open_attempt["notes"][0]) == {"at", "text", "truncated", "author_kind", "kind"}
    assert open_attempt["notes"][0]["kind"] == "working"
    assert [(n["seq"], n["n"]) for n in await notes_in_db(db_url, tid)] == [(1, 1), (1, 2)]


async def test_a_note_does_not_extend_the_lease_but_is_activity_for_liveness(store, agent, db_url):
    t0 = datetime.now(timezone.utc) - timedelta(seconds=40)
    tid, claim = await held(store, agent, lease_seconds=60, now=t0)
    quiet = (await store.todo_get(agent, tid))["attempts"][0]
    assert quiet["liveness"] == "quiet" and quiet["last_activity_at"] == t0
    await store.todo_note(agent, tid, text="still working: half the suite passes")
    after = (await store.todo_get(agent, tid))["attempts"][0]
    assert after["liveness"] == "live" and after["last_activity_at"] == after["last_note_at"] > t0
    assert after["lease_expires_at"] == quiet["lease_expires_at"] == claim["todo"]["lease_expires_at"]
    assert after["last_heartbeat_at"] is None
    [todo] = await sql_rows(db_url, "SELECT lease_expires_at, updated_at FROM todos WHERE id = %s", (tid,))
    assert todo["lease_expires_at"] == claim["todo"]["lease_expires_at"]


async def test_a_stale_workers_note_is_refused_with_the_body_a_stale_heartbeat_gets(store, agent, db_url):
    t0 = datetime.now(timezone.utc) - timedelta(minutes=2)
    todo = await store.todo_add(agent, queue="q", title="taken over")
    stale = await store.todo_claim(agent, todo["id"], require_fence=True, lease_seconds=10, now=t0)
    await store.todo_claim(agent, todo["id"], require_fence=True, lease_seconds=3600)  # takes over
    for token in (stale["lease_token"], "not-the-token", None):
        kwargs = {} if token is None else {"lease_token": token}
        with pytest.raises(Conflict) as beat:
            await store.todo_heartbeat(agent, todo["id"], **kwargs)
        with pytest.raises(Conflict) as note:
            await store.todo_note(agent, todo["id"], text="I am still here", **kwargs)
        assert note.value.wire() == beat.value.wire(), token
    assert await notes_in_db(db_url, todo["id"]) == []
    assert (await attempt_row(db_url, todo["id"], 2))["notes_count"] is None


async def test_another_agent_id_of_the_same_endpoint_cannot_note(store, db_url):
    agent = await make_agent(store, agent_id="claimer")
    tid, _ = await held(store, agent)
    with pytest.raises(Conflict):
        await store.todo_note(replace(agent, agent_id="someone-else"), tid, text="not mine")
    assert await notes_in_db(db_url, tid) == []


async def test_a_foreign_or_unknown_todo_is_not_found_exactly_as_a_random_id(store, agent, db_url):
    tid, _ = await held(store, agent)
    other = await make_agent(store, agent_id="other")
    stranger = await make_user(store)
    bodies = []
    for caller, todo_id in ((other, tid), (other, "never-minted-0000"), (stranger, tid),
                            (stranger, "never-minted-0000")):
        with pytest.raises(NotFound) as e:
            await store.todo_note(caller, todo_id, text="hello")
        bodies.append(e.value.wire())
    assert bodies[0] == bodies[1] and bodies[2] == bodies[3]
    assert await notes_in_db(db_url, tid) == []


@pytest.mark.parametrize("state", ["pending", "done", "dead letter"])
async def test_a_note_with_no_open_attempt_is_a_conflict(store, agent, state):
    todo = await store.todo_add(agent, queue="q", title="nothing open", max_attempts=1)
    if state != "pending":
        await store.todo_claim(agent, todo["id"])
        close = store.todo_complete if state == "done" else store.todo_fail
        await close(agent, todo["id"])
    with pytest.raises(Conflict) as e:
        await store.todo_note(agent, todo["id"], text="too late")
    assert "no open attempt" in e.value.message


@pytest.mark.parametrize("text", ["", "   \n\t ", "\x01\x02\x1b\x7f", "\r\r", 42, None])
async def test_an_empty_or_non_text_note_is_invalid_naming_text(store, agent, db_url, text):
    tid, _ = await held(store, agent)
    with pytest.raises(Invalid) as e:
        await store.todo_note(agent, tid, text=text)
    assert e.value.argument == "text"
    assert await notes_in_db(db_url, tid) == []


async def test_control_characters_are_removed_but_newlines_and_tabs_kept(store, agent, db_url):
    tid, _ = await held(store, agent)
    out = await store.todo_note(agent, tid, text="  step 1\tok\nstep 2\x1b[31m red\x00\r\x07  ")
    assert out["note"]["text"] == "step 1\tok\nstep 2[31m red"
    assert [n["text"] for n in await notes_in_db(db_url, tid)] == ["step 1\tok\nstep 2[31m red"]


async def test_a_long_note_is_cut_to_2048_bytes_on_a_utf8_boundary_and_flagged(store, agent, db_url):
    tid, _ = await held(store, agent)
    out = await store.todo_note(agent, tid, text="a" + "é" * 2000)  # 4001 bytes; a 2-byte char straddles 2048
    text = out["note"]["text"]
    assert out["note"]["truncated"] is True and text == "a" + "é" * 1023 and len(text.encode()) == 2047
    exact = await store.todo_note(agent, tid, text="b" * 2048)
    assert exact["note"]["truncated"] is False
    rows = await notes_in_db(db_url, tid)
    assert [(r["text"], r["truncated"]) for r in rows] == [(text, True), ("b" * 2048, False)]


async def test_notes_past_the_cap_prune_the_oldest_and_are_counted(pool, settings, db_url):
    store = Store(pool, settings.with_(attempt_notes_max=3))
    agent = await make_agent(store)
    tid, _ = await held(store, agent)
    for i in range(1, 6):
        out = await store.todo_note(agent, tid, text=f"note {i}")
    assert (out["notes_count"], out["notes_pruned"]) == (5, 2)
    assert [(r["n"], r["text"]) for r in await notes_in_db(db_url, tid)] == [(3, "note 3"), (4, "note 4"),
                                                                               (5, "note 5")]
    row = await attempt_row(db_url, tid, 1)
    assert (row["notes_count"], row["notes_pruned"]) == (5, 2)
    [attempt] = (await store.todo_get(agent, tid))["attempts"]
    assert [n["text"] for n in attempt["notes"]] == ["note 5", "note 4", "note 3"]
    assert (attempt["notes_count"], attempt["notes_pruned"]) == (5, 2)


async def test_get_todo_returns_notes_limit_notes_and_refuses_a_limit_outside_0_to_50(store, agent):
    tid, _ = await held(store, agent)
    for i in range(1, 8):
        await store.todo_note(agent, tid, text=f"note {i}")
    got = lambda **kw: store.todo_get(agent, tid, **kw)  # noqa: E731
    assert [n["text"] for n in (await got())["attempts"][0]["notes"]] == [f"note {i}" for i in (7, 6, 5, 4, 3)]
    assert (await got(notes_limit=0))["attempts"][0]["notes"] == []
    assert len((await got(notes_limit=50))["attempts"][0]["notes"]) == 7
    for bad in (-1, 51, "5", True, 2.5):
        with pytest.raises(Invalid) as e:
            await got(notes_limit=bad)
        assert e.value.argument == "notes_limit"


async def test_the_next_claimer_reads_the_three_newest_notes_of_each_prior_attempt(store, agent):
    """Both claim paths: after a release (the fast path, attempt_prior) and a takeover of a
    lapsed lease (the full path, whose closed attempt comes from the statement itself)."""
    t0 = datetime.now(timezone.utc) - timedelta(minutes=10)
    tid, _ = await held(store, agent, lease_seconds=60, now=t0)
    for i in range(1, 5):
        await store.todo_note(agent, tid, text=f"first {i}", now=t0 + timedelta(seconds=i))
    await store.todo_release(agent, tid, summary="shutting down", now=t0 + timedelta(seconds=10))
    second = await store.todo_claim(agent, tid, lease_seconds=60, now=t0 + timedelta(seconds=20))
    [prior] = second["prior_attempts"]
    assert [n["text"] for n in prior["notes"]] == ["first 4", "first 3", "first 2"]
    assert (prior["notes_count"], prior["outcome"]) == (4, "released")
    await store.todo_note(agent, tid, text="second worker was here", now=t0 + timedelta(seconds=30))
    third = await store.todo_claim(agent, tid, now=t0 + timedelta(minutes=5))  # takes the lapsed lease over
    assert [p["outcome"] for p in third["prior_attempts"]] == ["lease_expired", "released"]
    assert [n["text"] for n in third["prior_attempts"][0]["notes"]] == ["second worker was here"]
    assert third["prior_attempts"][0]["died"] is True and third["prior_attempts"][0]["notes_count"] == 1
    assert [n["text"] for n in third["prior_attempts"][1]["notes"]] == ["first 4", "first 3", "first 2"]


async def test_the_owner_notes_on_an_agents_open_attempt_as_owner(store, db_url):
    ada = await make_user(store, "ada")
    agent = await make_agent(store, user=ada)
    tid, _ = await held(store, agent, require_fence=True)  # the owner is exempt from the fence
    out = await store.todo_note(ada, tid, text="the CI box is being replaced; expect one red run")
    assert out["note"]["author_kind"] == "owner"
    [attempt] = (await store.todo_get(agent, tid))["attempts"]
    assert [(n["author_kind"], n["text"]) for n in attempt["notes"]] == [
        ("owner", "the CI box is being replaced; expect one red run")]
    assert [r["author_kind"] for r in await notes_in_db(db_url, tid)] == ["owner"]


async def test_notes_go_with_their_attempt_when_the_per_todo_cap_prunes_it(pool, settings, db_url):
    store = Store(pool, settings.with_(attempt_history_max_per_todo=5))
    agent = await make_agent(store)
    todo = await store.todo_add(agent, queue="q", title="capped", max_attempts=100)
    for seq in range(1, 6):
        await store.todo_claim(agent, todo["id"])
        await store.todo_note(agent, todo["id"], text=f"attempt {seq}")
        await store.todo_release(agent, todo["id"])
    assert [r["seq"] for r in await notes_in_db(db_url, todo["id"])] == [1, 2, 3, 4, 5]
    await store.todo_claim(agent, todo["id"])  # attempt 6: attempt 1 is pruned
    assert [r["seq"] for r in await notes_in_db(db_url, todo["id"])] == [2, 3, 4, 5]
    assert (await store.todo_get(agent, todo["id"]))["attempts_pruned"] == 1


async def test_notes_go_with_their_todo_when_retention_deletes_it(store, agent, db_url):
    old = datetime.now(timezone.utc) - timedelta(days=60)
    tid, _ = await held(store, agent, now=old)
    await store.todo_note(agent, tid, text="done soon", now=old)
    await store.todo_complete(agent, tid, now=old)
    kept, _ = await held(store, agent)
    await store.todo_note(agent, kept, text="still here")
    assert await store.sweep_retention() == 1
    assert await notes_in_db(db_url, tid) == []
    assert [r["text"] for r in await notes_in_db(db_url, kept)] == ["still here"]


async def test_an_endpoint_granted_heartbeat_may_note_and_one_granted_neither_may_not(store):
    from board.errors import Forbidden

    beats = await make_agent(store, scope=("claim", "heartbeat", "add_todo"))
    tid, _ = await held(store, beats)
    assert (await store.todo_note(beats, tid, text="allowed by heartbeat"))["notes_count"] == 1
    only_note = await make_agent(store, scope=("claim", "note", "add_todo"))
    tid2, _ = await held(store, only_note)
    assert (await store.todo_note(only_note, tid2, text="granted on its own"))["notes_count"] == 1
    neither = await make_agent(store, scope=("claim", "add_todo", "complete"))
    tid3, _ = await held(store, neither)
    with pytest.raises(Forbidden):
        await store.todo_note(neither, tid3, text="not granted")
