"""SPEC-0034 scenarios and the SPEC-0003 state machine, against real Postgres."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from board.store import store as st
from board.store import vocabulary
from board.errors import Conflict, Forbidden, Invalid, NotFound
from tests.conftest import make_agent, make_user, sql_rows

T0 = datetime(2026, 11, 30, 14, 0, tzinfo=timezone.utc)


async def attempts_of(db_url, todo_id):
    return await sql_rows(db_url, "SELECT * FROM attempts WHERE todo_id = %s ORDER BY seq", (todo_id,))


async def todo_row(db_url, todo_id):
    rows = await sql_rows(db_url, "SELECT * FROM todos WHERE id = %s", (todo_id,))
    return rows[0] if rows else None


async def add(store, agent, **kw):
    kw.setdefault("queue", agent.queues[0])
    kw.setdefault("title", "fix the build")
    return await store.todo_add(agent, **kw)


# REQ-1 -------------------------------------------------------------------------------

async def test_fields_after_a_claim(store, db_url):
    agent = await make_agent(store, session_id="session-S")
    todo = await add(store, agent)
    res = await store.todo_claim(agent, todo["id"], claimant="harness/box/fixer/run-7")
    rows = await attempts_of(db_url, todo["id"])
    assert len(rows) == 1
    a = rows[0]
    assert a["seq"] == 1 and a["attempt"] == 1
    assert a["claimer_kind"] == "endpoint"
    assert str(a["claimer_endpoint_id"]) == agent.endpoint_id
    assert a["claimer_session"] == "session-S"
    assert a["claimant"] == "harness/box/fixer/run-7"
    assert a["outcome"] is None and a["ended_at"] is None and a["disposition"] is None
    assert a["owner"] == f"agent:{agent.agent_id}"
    assert res["attempt_seq"] == 1 and res["attempts_total"] == 1 and res["prior_attempts"] == []
    assert "lease_token" not in res


# REQ-2 -------------------------------------------------------------------------------

async def test_interrupt_keeps_the_attempt_open(store, agent, db_url):
    todo = await add(store, agent)
    await store.todo_claim(agent, todo["id"])
    t = await store.todo_interrupt(agent, todo["id"], state="input_required")
    assert t["state"] == "input_required"
    t = await store.todo_resume(agent, todo["id"])
    assert t["state"] == "claimed"
    rows = await attempts_of(db_url, todo["id"])
    assert len(rows) == 1 and rows[0]["ended_at"] is None
    done = await store.todo_complete(agent, todo["id"])
    assert done["closed_attempt"]["seq"] == 1


async def test_second_open_attempt_cannot_commit(store, agent, db_url):
    """The deferred exclusion constraint holds even against hand-written SQL."""
    import psycopg
    todo = await add(store, agent)
    await store.todo_claim(agent, todo["id"])
    async with await psycopg.AsyncConnection.connect(db_url) as conn:
        await conn.execute(
            "INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, owner, claimed_at, lease_expires_at)"
            " VALUES (%s, 2, 2, 'owner', 'human:1', now(), now())", (todo["id"],))
        with pytest.raises(psycopg.errors.ExclusionViolation):
            await conn.commit()


# REQ-3 -------------------------------------------------------------------------------

async def test_fail_below_the_cap_schedules_a_retry(store, agent, db_url):
    todo = await add(store, agent, max_attempts=5)
    await store.todo_claim(agent, todo["id"], now=T0)
    await store.todo_fail(agent, todo["id"], now=T0)
    await store.sweep_retry(now=T0 + timedelta(hours=2))
    await store.todo_claim(agent, todo["id"], now=T0 + timedelta(hours=2))
    out = await store.todo_fail(agent, todo["id"], summary="still red", now=T0 + timedelta(hours=2))
    rows = await attempts_of(db_url, todo["id"])
    assert rows[1]["attempt"] == 2
    assert rows[1]["outcome"] == "failed" and rows[1]["disposition"] == "retry_scheduled"
    assert out["state"] == "failed" and out["dead_letter"] is False
    assert out["next_retry_at"] is not None and out["next_retry_at"] > T0 + timedelta(hours=2)


async def test_fail_at_the_cap_dead_letters(store, agent, db_url):
    todo = await add(store, agent, max_attempts=1)
    await store.todo_claim(agent, todo["id"])
    out = await store.todo_fail(agent, todo["id"], result={"error": "boom"})
    assert out["dead_letter"] is True and out["next_retry_at"] is None
    rows = await attempts_of(db_url, todo["id"])
    assert (rows[0]["outcome"], rows[0]["disposition"]) == ("failed", "dead_lettered")


async def test_complete_closes_completed_done(store, agent, db_url):
    todo = await add(store, agent)
    await store.todo_claim(agent, todo["id"])
    out = await store.todo_complete(agent, todo["id"], result={"ok": True}, summary="green",
                                    artifact="https://ci.example.com/run/7")
    assert out["state"] == "done" and out["result"] == {"ok": True}
    a = (await attempts_of(db_url, todo["id"]))[0]
    assert (a["outcome"], a["disposition"], a["summary"], a["artifact"]) == (
        "completed", "done", "green", "https://ci.example.com/run/7")
    assert a["ended_at"] is not None


async def test_takeover_closes_lapsed_attempt_and_opens_the_next_in_one_transaction(store, agent, db_url):
    todo = await add(store, agent)
    await store.todo_claim(agent, todo["id"], lease_seconds=60, now=T0)
    later = T0 + timedelta(minutes=2)  # the lease expired a minute ago
    res = await store.todo_claim_next(agent, now=later)
    assert res["todo"]["id"] == todo["id"] and res["attempt_seq"] == 2
    rows = await attempts_of(db_url, todo["id"])
    assert (rows[0]["outcome"], rows[0]["disposition"]) == ("lease_expired", "requeued")
    assert rows[0]["ended_at"] == later and rows[1]["claimed_at"] == later  # one transaction, one clock
    assert rows[1]["ended_at"] is None
    assert res["prior_attempts"][0]["seq"] == 1 and res["prior_attempts"][0]["died"] is True
    assert res["todo"]["attempt"] == 2


async def test_release_returns_to_pending_with_counter_unchanged(store, agent, db_url):
    todo = await add(store, agent)
    await store.todo_claim(agent, todo["id"])
    out = await store.todo_release(agent, todo["id"], summary="daemon stopping")
    assert out["state"] == "pending" and out["owner"] is None and out["lease_expires_at"] is None
    assert out["attempt"] == 1
    a = (await attempts_of(db_url, todo["id"]))[0]
    assert (a["outcome"], a["disposition"], a["summary"]) == ("released", "requeued", "daemon stopping")


async def test_release_without_the_grant_is_forbidden_and_changes_nothing(store, db_url):
    scope = [v for v in vocabulary.VERBS if v != "release"]
    agent = await make_agent(store, scope=scope)
    todo = await add(store, agent)
    await store.todo_claim(agent, todo["id"])
    with pytest.raises(Forbidden):
        await store.todo_release(agent, todo["id"])
    assert (await todo_row(db_url, todo["id"]))["state"] == "claimed"
    assert (await attempts_of(db_url, todo["id"]))[0]["ended_at"] is None


async def test_cancel_of_a_claimed_todo_closes_canceled(store, agent, db_url):
    todo = await add(store, agent)
    await store.todo_claim(agent, todo["id"])
    out = await store.todo_cancel(agent, todo["id"])
    assert out["state"] == "canceled"
    a = (await attempts_of(db_url, todo["id"]))[0]
    assert (a["outcome"], a["disposition"]) == ("canceled", "canceled")


async def test_cancel_of_an_interrupted_todo_closes_canceled(store, agent, db_url):
    todo = await add(store, agent)
    await store.todo_claim(agent, todo["id"])
    await store.todo_interrupt(agent, todo["id"], state="auth_required")
    await store.todo_cancel(agent, todo["id"])
    a = (await attempts_of(db_url, todo["id"]))[0]
    assert a["outcome"] == "canceled"


async def test_cancel_of_a_pending_todo_writes_no_attempt(store, agent, db_url):
    todo = await add(store, agent)
    out = await store.todo_cancel(agent, todo["id"])
    assert out["state"] == "canceled"
    assert await attempts_of(db_url, todo["id"]) == []


async def test_revocation_dead_letters_held_todos_and_closes_revoked(store, db_url):
    user = await make_user(store)
    agent = await make_agent(store, user=user)
    held = await add(store, agent)
    waiting = await add(store, agent)
    await store.todo_claim(agent, held["id"])
    n = await store.endpoint_revoke(agent.endpoint_id, user_id=user.user_id)
    assert n == 1
    row = await todo_row(db_url, held["id"])
    assert row["state"] == "failed" and row["next_retry_at"] is None and row["owner"] is None
    a = (await attempts_of(db_url, held["id"]))[0]
    assert (a["outcome"], a["disposition"]) == ("revoked", "dead_lettered")
    assert (await todo_row(db_url, waiting["id"]))["state"] == "pending"
    assert await store.endpoint_authenticate("anything") is None
    with pytest.raises(NotFound):
        await store.endpoint_revoke(agent.endpoint_id)


async def test_retry_scheduler_requeues_without_touching_attempts(store, agent, db_url):
    todo = await add(store, agent)
    await store.todo_claim(agent, todo["id"], now=T0)
    out = await store.todo_fail(agent, todo["id"], now=T0)
    assert await store.sweep_retry(now=T0) == 0
    assert await store.sweep_retry(now=out["next_retry_at"]) == 1
    row = await todo_row(db_url, todo["id"])
    assert row["state"] == "pending" and row["next_retry_at"] is None and row["attempt"] == 1
    rows = await attempts_of(db_url, todo["id"])
    assert len(rows) == 1 and rows[0]["outcome"] == "failed"


async def test_backoff_grows_and_is_capped(store, agent):
    settings = store.settings.with_(retry_base_seconds=10, retry_max_seconds=25)
    s = st.Store(store.pool, settings)
    todo = await add(s, agent, max_attempts=10)
    delays = []
    now = T0
    for _ in range(4):
        await s.todo_claim(agent, todo["id"], now=now)
        out = await s.todo_fail(agent, todo["id"], now=now)
        delays.append((out["next_retry_at"] - now).total_seconds())
        now = out["next_retry_at"]
        await s.sweep_retry(now=now)
    assert 5 <= delays[0] <= 10 and 10 <= delays[1] <= 20
    assert all(d <= 25 for d in delays) and delays[3] >= 12.5


# REQ-4 -------------------------------------------------------------------------------

async def test_the_reaper_records_a_death(store, agent, db_url):
    todo = await add(store, agent, max_attempts=3)
    await store.todo_claim(agent, todo["id"], lease_seconds=60, now=T0)
    hb = T0 + timedelta(minutes=1)  # 14:01
    await store.todo_heartbeat(agent, todo["id"], lease_seconds=60, now=hb)
    a = (await attempts_of(db_url, todo["id"]))[0]
    assert a["last_heartbeat_at"] == hb and a["lease_expires_at"] == hb + timedelta(seconds=60)
    assert (await todo_row(db_url, todo["id"]))["lease_expires_at"] == hb + timedelta(seconds=60)
    assert await store.sweep_reap(now=hb + timedelta(seconds=30)) == 0
    assert await store.sweep_reap(now=hb + timedelta(minutes=5)) == 1
    a = (await attempts_of(db_url, todo["id"]))[0]
    assert (a["outcome"], a["disposition"]) == ("reaped", "requeued")
    assert a["last_heartbeat_at"] == hb and a["summary"] is None and a["artifact"] is None
    assert (await todo_row(db_url, todo["id"]))["state"] == "pending"
    nxt = await store.todo_claim_next(agent, now=hb + timedelta(minutes=6))
    prior = nxt["prior_attempts"][0]
    assert prior["outcome"] == "reaped" and prior["died"] is True
    assert prior["last_heartbeat_at"] == hb and prior["summary"] is None


async def test_the_reaper_dead_letters_at_the_cap(store, agent, db_url):
    todo = await add(store, agent, max_attempts=1)
    await store.todo_claim(agent, todo["id"], lease_seconds=5, now=T0)
    assert await store.sweep_reap(now=T0 + timedelta(seconds=10)) == 1
    row = await todo_row(db_url, todo["id"])
    assert row["state"] == "failed" and row["next_retry_at"] is None
    a = (await attempts_of(db_url, todo["id"]))[0]
    assert (a["outcome"], a["disposition"]) == ("reaped", "dead_lettered")


async def test_died_is_derived_on_every_read(store, agent):
    todo = await add(store, agent)
    await store.todo_claim(agent, todo["id"], lease_seconds=5, now=T0)
    await store.sweep_reap(now=T0 + timedelta(seconds=10))
    await store.todo_claim(agent, todo["id"], now=T0 + timedelta(seconds=11))
    await store.todo_fail(agent, todo["id"], summary="red", now=T0 + timedelta(seconds=12))
    got = await store.todo_get(agent, todo["id"])
    assert [(a["seq"], a["died"]) for a in got["attempts"]] == [(2, False), (1, True)]


# REQ-5 -------------------------------------------------------------------------------

async def test_no_summary_from_result_by_default(store, agent, db_url):
    todo = await add(store, agent)
    await store.todo_claim(agent, todo["id"])
    await store.todo_fail(agent, todo["id"], result={"error": "tests red"})
    a = (await attempts_of(db_url, todo["id"]))[0]
    assert a["summary"] is None
    assert (await todo_row(db_url, todo["id"]))["result"] == {"error": "tests red"}


async def test_summary_from_result_when_the_operator_opts_in(store, agent, db_url):
    s = st.Store(store.pool, store.settings.with_(attempt_summary_from_result=True))
    todo = await add(s, agent)
    await s.todo_claim(agent, todo["id"])
    await s.todo_fail(agent, todo["id"], result={"error": "tests red"})
    a = (await attempts_of(db_url, todo["id"]))[0]
    assert a["summary"] == '{"error":"tests red"}'


async def test_a_file_url_as_artifact_is_invalid_and_the_todo_stays_claimed(store, agent, db_url):
    todo = await add(store, agent)
    await store.todo_claim(agent, todo["id"])
    with pytest.raises(Invalid) as err:
        await store.todo_complete(agent, todo["id"], artifact="file:///etc/passwd")
    assert err.value.argument == "artifact"
    assert (await todo_row(db_url, todo["id"]))["state"] == "claimed"
    assert (await attempts_of(db_url, todo["id"]))[0]["ended_at"] is None


@pytest.mark.parametrize("artifact", [
    "http://example.com/x", "https://", "https:///path", "mcp://cairn/", "mcp://cairn/a b",
    "mcp://cairn/" + "a" * 65, "mcp://cairn/abc\n", "javascript:alert(1)", "https://exa mple.com/",
    "https://example.com/" + "a" * 600, "//example.com/x",
])
async def test_artifact_other_than_cairn_or_https_is_invalid(store, agent, artifact):
    todo = await add(store, agent)
    await store.todo_claim(agent, todo["id"])
    with pytest.raises(Invalid) as err:
        await store.todo_release(agent, todo["id"], artifact=artifact)
    assert err.value.argument == "artifact"


async def test_summary_is_cut_to_2048_bytes_on_a_utf8_boundary(store, agent, db_url):
    todo = await add(store, agent)
    await store.todo_claim(agent, todo["id"])
    summary = "é" * 1500  # 3000 bytes, two bytes a character
    await store.todo_fail(agent, todo["id"], summary=summary, artifact="mcp://cairn/Zz9")
    a = (await attempts_of(db_url, todo["id"]))[0]
    assert a["summary"] == "é" * 1024 and a["summary_truncated"] is True
    assert len(a["summary"].encode()) == 2048


async def test_claimant_is_cut_to_128_bytes_and_control_characters_removed(store, agent, db_url):
    todo = await add(store, agent)
    await store.todo_claim(agent, todo["id"], claimant="run\x00-\x1b[31m7\n" + "€" * 60)
    a = (await attempts_of(db_url, todo["id"]))[0]
    assert "\x1b" not in a["claimant"] and "\n" not in a["claimant"] and "\x00" not in a["claimant"]
    assert a["claimant"].startswith("run-[31m7")
    assert len(a["claimant"].encode()) <= 128


async def test_markup_in_inputs_is_stored_as_data(store, agent):
    todo = await add(store, agent)
    await store.todo_claim(agent, todo["id"], claimant="<b>x</b>")
    await store.todo_fail(agent, todo["id"], summary="<script>alert(1)</script>'; DROP TABLE todos;--")
    got = await store.todo_get(agent, todo["id"])
    assert got["attempts"][0]["summary"] == "<script>alert(1)</script>'; DROP TABLE todos;--"
    assert got["attempts"][0]["claimant"] == "<b>x</b>"


# REQ-6 -------------------------------------------------------------------------------

async def test_the_agent_cannot_close_its_supervisors_attempt(store, agent, db_url):
    todo = await add(store, agent)
    res = await store.todo_claim(agent, todo["id"], require_fence=True)
    token = res["lease_token"]
    assert len(token) >= 22  # at least 128 bits, url-safe base64
    with pytest.raises(Conflict):
        await store.todo_complete(agent, todo["id"])
    assert (await todo_row(db_url, todo["id"]))["state"] == "claimed"
    a = (await attempts_of(db_url, todo["id"]))[0]
    import hashlib
    assert bytes(a["lease_token_hash"]) == hashlib.sha256(token.encode()).digest()
    assert token.encode() not in bytes(a["lease_token_hash"])
    out = await store.todo_complete(agent, todo["id"], lease_token=token)
    assert out["state"] == "done"


@pytest.mark.parametrize("verb", ["fail", "release"])
async def test_fail_or_release_without_the_fence_token_changes_nothing(store, agent, db_url, verb):
    # fail and release update the todo and close its attempt in one statement; when the
    # attempt cannot close (fenced, no token), neither may change.
    todo = await add(store, agent)
    await store.todo_claim(agent, todo["id"], require_fence=True)
    with pytest.raises(Conflict):
        await getattr(store, f"todo_{verb}")(agent, todo["id"], summary="not mine to close")
    row = await todo_row(db_url, todo["id"])
    assert (row["state"], row["owner"]) == ("claimed", agent.owner)
    rows = await attempts_of(db_url, todo["id"])
    assert [(a["seq"], a["ended_at"], a["summary"]) for a in rows] == [(1, None, None)]


async def test_a_stale_workers_token_is_conflict_and_leaves_attempt_2_untouched(store, agent, db_url):
    todo = await add(store, agent)
    first = await store.todo_claim(agent, todo["id"], require_fence=True, lease_seconds=10, now=T0)
    second = await store.todo_claim(agent, todo["id"], require_fence=True, now=T0 + timedelta(seconds=30))
    assert second["attempt_seq"] == 2 and second["lease_token"] != first["lease_token"]
    with pytest.raises(Conflict):
        await store.todo_complete(agent, todo["id"], lease_token=first["lease_token"])
    rows = await attempts_of(db_url, todo["id"])
    assert rows[1]["ended_at"] is None and (await todo_row(db_url, todo["id"]))["state"] == "claimed"


async def test_unfenced_client_unchanged(store, agent):
    todo = await add(store, agent)
    res = await store.todo_claim(agent, todo["id"])
    assert "lease_token" not in res
    await store.todo_heartbeat(agent, todo["id"])
    assert (await store.todo_complete(agent, todo["id"]))["state"] == "done"


async def test_fence_mismatch_on_heartbeat_is_conflict(store, agent):
    todo = await add(store, agent)
    await store.todo_claim(agent, todo["id"], require_fence=True)
    with pytest.raises(Conflict) as err:
        await store.todo_heartbeat(agent, todo["id"], lease_token="not-the-token")
    assert err.value.code == "conflict"


async def test_a_token_on_an_unfenced_attempt_is_conflict(store, agent):
    todo = await add(store, agent)
    await store.todo_claim(agent, todo["id"])
    with pytest.raises(Conflict):
        await store.todo_release(agent, todo["id"], lease_token="made-up")


async def test_another_endpoint_of_the_same_human_with_the_right_token_gets_not_found(store):
    # Scope comes before the fence: another endpoint cannot even see the todo. (The owner
    # check within one endpoint is test_fence.py's, under another agent id.)
    user = await make_user(store)
    a1 = await make_agent(store, user=user, agent_id="one")
    a2 = await make_agent(store, user=user, agent_id="two")
    todo = await add(store, a1)
    res = await store.todo_claim(a1, todo["id"], require_fence=True)
    with pytest.raises(NotFound):
        await store.todo_complete(a2, todo["id"], lease_token=res["lease_token"])


async def test_the_owning_human_is_exempt_from_the_fence(store, db_url):
    user = await make_user(store)
    agent = await make_agent(store, user=user)
    todo = await add(store, agent)
    await store.todo_claim(agent, todo["id"], require_fence=True)
    out = await store.todo_release(user, todo["id"], summary="stuck, released from the Board")
    assert out["state"] == "pending"
    a = (await attempts_of(db_url, todo["id"]))[0]
    assert (a["outcome"], a["summary"]) == ("released", "stuck, released from the Board")


async def test_the_board_claim_writes_an_owner_attempt(store, db_url):
    user = await make_user(store)
    agent = await make_agent(store, user=user)
    todo = await add(store, agent)
    res = await store.todo_claim(user, todo["id"])
    assert res["todo"]["owner"] == f"human:{user.user_id}"
    a = (await attempts_of(db_url, todo["id"]))[0]
    assert a["claimer_kind"] == "owner" and a["claimer_endpoint_id"] is None and a["claimer_session"] is None
    failed = await store.todo_fail(user, todo["id"], summary="not reproducible")
    assert failed["state"] == "failed"


# REQ-7 -------------------------------------------------------------------------------

async def test_second_attempt_sees_the_first(store, agent):
    todo = await add(store, agent)
    await store.todo_claim(agent, todo["id"], now=T0)
    out = await store.todo_fail(agent, todo["id"], summary="tests still red", now=T0)
    await store.sweep_retry(now=out["next_retry_at"])
    res = await store.todo_claim(agent, todo["id"], now=out["next_retry_at"])
    assert res["attempt_seq"] == 2
    prior = res["prior_attempts"][0]
    assert prior["summary"] == "tests still red"
    assert set(prior) >= {"seq", "attempt", "claimer_kind", "claimant", "claimed_at", "last_heartbeat_at",
                          "ended_at", "outcome", "disposition", "died", "summary", "summary_truncated", "artifact"}
    assert not {"lease_token_hash", "claimer_session", "claimer_endpoint_id"} & set(prior)
    assert isinstance(prior["claimed_at"], datetime)


async def test_prior_attempts_are_the_five_newest_closed(store, agent):
    todo = await add(store, agent, max_attempts=100)
    for i in range(7):
        await store.todo_claim(agent, todo["id"])
        await store.todo_release(agent, todo["id"], summary=f"r{i + 1}")
    res = await store.todo_claim(agent, todo["id"])
    assert [p["seq"] for p in res["prior_attempts"]] == [7, 6, 5, 4, 3]
    assert res["attempts_total"] == 8


# REQ-8 -------------------------------------------------------------------------------

async def test_reading_a_dead_letter(store, agent):
    todo = await add(store, agent, max_attempts=5)
    now = T0
    for i in range(5):
        await store.todo_claim(agent, todo["id"], now=now)
        out = await store.todo_fail(agent, todo["id"], summary=f"fail {i + 1}", now=now)
        if out["next_retry_at"]:
            now = out["next_retry_at"]
            await store.sweep_retry(now=now)
    got = await store.todo_get(agent, todo["id"])
    assert got["dead_letter"] is True and got["next_retry_at"] is None
    assert [a["seq"] for a in got["attempts"]] == [5, 4, 3, 2, 1]
    assert got["attempts_total"] == 5 and got["attempts_pruned"] == 0
    assert got["attempt_outcomes"] == {"failed": 5}
    assert got["payload"] == {} and got["routing"] == {}


async def test_get_todo_includes_the_open_attempt_and_honours_the_limit(store, agent):
    todo = await add(store, agent, max_attempts=100)
    for _ in range(4):
        await store.todo_claim(agent, todo["id"])
        await store.todo_release(agent, todo["id"])
    await store.todo_claim(agent, todo["id"])
    got = await store.todo_get(agent, todo["id"], attempts_limit=2)
    assert [(a["seq"], a["outcome"]) for a in got["attempts"]] == [(5, None), (4, "released")]
    for bad in (0, 51, "3", True):
        with pytest.raises(Invalid) as err:
            await store.todo_get(agent, todo["id"], attempts_limit=bad)
        assert err.value.argument == "attempts_limit"


async def test_an_endpoint_with_list_todos_may_get_todo(store):
    agent = await make_agent(store, scope=["list_todos", "add_todo"])
    todo = await add(store, agent)
    assert agent.allows("get_todo")
    assert (await store.todo_get(agent, todo["id"]))["id"] == todo["id"]
    bare = await make_agent(store, scope=["add_todo"])
    with pytest.raises(Forbidden):
        await store.todo_get(bare, todo["id"])


# REQ-10 ------------------------------------------------------------------------------

async def _space(store, side: str, teams: dict):
    """A person's space (a new person), or a team's (the same for the same name)."""
    if side == "person":
        return None
    if side not in teams:
        owner = await make_user(store)
        team = await store.team_create(f"{side}{owner.user_id}", owner=owner.username)
        teams[side] = st.Human(team["id"], side)
    return teams[side]


@pytest.mark.parametrize("owners", [("person", "person"), ("team", "other"), ("team", "person"), ("person", "team")],
                         ids=["personal", "two-teams", "team-vs-personal", "personal-vs-team"])
async def test_foreign_todo_is_not_found_exactly_like_a_random_id(store, owners):
    teams: dict = {}
    a = await make_agent(store, agent_id="a", user=await _space(store, owners[0], teams))
    b = await make_agent(store, agent_id="b", user=await _space(store, owners[1], teams))
    todo = await add(store, a)
    await store.todo_claim(a, todo["id"])
    errors = []
    for target in (todo["id"], "never-minted-id"):
        with pytest.raises(NotFound) as err:
            await store.todo_get(b, target)
        errors.append(err.value.wire())
    assert errors[0] == errors[1]
    for verb in (store.todo_claim, store.todo_complete, store.todo_fail, store.todo_release,
                 store.todo_heartbeat, store.todo_cancel):
        with pytest.raises(NotFound) as err:
            await verb(b, todo["id"])
        assert err.value.wire() == errors[1]


async def test_a_todo_in_an_ungranted_queue_is_not_found(store):
    user = await make_user(store)
    wide = await make_agent(store, user=user, queues=("q", "secret"))
    todo = await add(store, wide, queue="secret")
    narrow = wide.__class__(wide.endpoint_id, wide.agent_id, wide.user_id, wide.scope, ("q",))
    with pytest.raises(NotFound):
        await store.todo_get(narrow, todo["id"])


async def test_a_second_human_sees_not_found(store):
    h1 = await make_user(store)
    h2 = await make_user(store)
    agent = await make_agent(store, user=h1)
    todo = await add(store, agent)
    assert (await store.todo_get(h1, todo["id"]))["id"] == todo["id"]
    with pytest.raises(NotFound):
        await store.todo_get(h2, todo["id"])
    with pytest.raises(NotFound):
        await store.todo_release(h2, todo["id"])
    assert (await store.todo_list(h2))["todos"] == []


# REQ-11 ------------------------------------------------------------------------------

async def test_a_hot_todo_is_capped(store, agent, db_url):
    todo = await add(store, agent, max_attempts=1)
    for i in range(60):
        await store.todo_claim(agent, todo["id"])
        await store.todo_fail(agent, todo["id"], summary=f"attempt {i + 1}")
        await store.todo_retry(agent, todo["id"])
    rows = await attempts_of(db_url, todo["id"])
    assert len(rows) == 50 and [r["seq"] for r in rows] == list(range(11, 61))
    got = await store.todo_get(agent, todo["id"], attempts_limit=50)
    assert got["attempts_pruned"] == 10 and got["attempts_total"] == 60
    assert got["attempt_outcomes"] == {"failed": 60}  # exact across pruning


async def test_pruning_never_deletes_the_open_attempt(store, agent, db_url):
    s = st.Store(store.pool, store.settings.with_(attempt_history_max_per_todo=5))
    todo = await add(s, agent, max_attempts=100)
    for _ in range(8):
        await s.todo_claim(agent, todo["id"])
        await s.todo_release(agent, todo["id"])
    await s.todo_claim(agent, todo["id"])
    rows = await attempts_of(db_url, todo["id"])
    assert [r["seq"] for r in rows] == [5, 6, 7, 8, 9] and rows[-1]["ended_at"] is None
    assert (await todo_row(db_url, todo["id"]))["attempts_pruned"] == 4


async def test_retention_removes_history_with_the_todo(store, agent, db_url):
    s = st.Store(store.pool, store.settings.with_(retention_days=30))
    done = await add(s, agent)
    live = await add(s, agent)
    retrying = await add(s, agent)
    await s.todo_claim(agent, done["id"], now=T0)
    await s.todo_complete(agent, done["id"], now=T0)
    await s.todo_claim(agent, live["id"], now=T0, lease_seconds=3600)
    await s.todo_claim(agent, retrying["id"], now=T0)
    await s.todo_fail(agent, retrying["id"], now=T0)
    assert await s.sweep_retention(now=T0 + timedelta(days=29)) == 0
    assert await s.sweep_retention(now=T0 + timedelta(days=31)) == 1
    assert await todo_row(db_url, done["id"]) is None
    assert await attempts_of(db_url, done["id"]) == []
    assert len(await attempts_of(db_url, live["id"])) == 1
    assert len(await attempts_of(db_url, retrying["id"])) == 1


# REQ-12 ------------------------------------------------------------------------------

async def test_retry_after_dead_letter_keeps_history(store, agent, db_url):
    todo = await add(store, agent, max_attempts=5)
    now = T0
    for _ in range(5):
        await store.todo_claim(agent, todo["id"], now=now)
        out = await store.todo_fail(agent, todo["id"], now=now)
        if out["next_retry_at"]:
            now = out["next_retry_at"]
            await store.sweep_retry(now=now)
    assert out["dead_letter"]
    retried = await store.todo_retry(agent, todo["id"])
    assert retried["state"] == "pending" and retried["attempt"] == 0
    res = await store.todo_claim_next(agent)
    assert res["attempt_seq"] == 6 and res["todo"]["attempt"] == 1
    assert res["prior_attempts"][0]["seq"] == 5
    assert len(await attempts_of(db_url, todo["id"])) == 6


async def test_manual_retry_of_a_live_todo_is_conflict(store, agent):
    todo = await add(store, agent)
    with pytest.raises(Conflict):
        await store.todo_retry(agent, todo["id"])


# REQ-19 ------------------------------------------------------------------------------

async def test_wrong_state_is_conflict_and_names_the_state(store, agent):
    todo = await add(store, agent)
    with pytest.raises(Conflict) as err:
        await store.todo_complete(agent, todo["id"])
    assert "pending" in err.value.message
    await store.todo_claim(agent, todo["id"])
    with pytest.raises(Conflict) as err:
        await store.todo_claim(agent, todo["id"])
    assert "lease has not lapsed" in err.value.message
    assert f"todo={todo['id']}" in str(err.value) and "op=claim" in str(err.value)


async def test_claim_next_on_an_empty_queue_returns_nothing(store, agent):
    assert await store.todo_claim_next(agent) == {"todo": None}


async def test_claim_next_takes_the_oldest_pending_first(store, agent):
    first = await add(store, agent, title="first")
    await add(store, agent, title="second")
    res = await store.todo_claim_next(agent)
    assert res["todo"]["id"] == first["id"]


@pytest.mark.parametrize("kwargs,argument", [
    (dict(queue="bad queue!"), "queue"),
    (dict(title=""), "title"),
    (dict(title=5), "title"),
    (dict(payload=[1, 2]), "payload"),
    (dict(routing="x"), "routing"),
    (dict(max_attempts=0), "max_attempts"),
    (dict(payload={"x": "\u0000"}), "payload"),
])
async def test_bad_add_input_is_invalid_naming_the_argument(store, agent, db_url, kwargs, argument):
    with pytest.raises(Invalid) as err:
        await add(store, agent, **kwargs)
    assert err.value.argument == argument
    assert await sql_rows(db_url, "SELECT id FROM todos") == []


@pytest.mark.parametrize("bad", ["a\x00b", "a\ud800b"])
async def test_text_the_driver_cannot_send_is_invalid_even_where_no_input_check_runs(store, bad):
    """The last line: store reads with no input check of their own (a username lookup, the
    attempt summary) get invalid from the one translation of driver errors, never the driver's
    DataError (a NUL) or a UnicodeEncodeError (a lone surrogate)."""
    with pytest.raises(Invalid):
        await store.user_by_name(bad)
    with pytest.raises(Invalid):
        await store.todo_attempt_summary(bad)


async def test_lease_seconds_bounds(store, agent):
    todo = await add(store, agent)
    for bad in (0, -1, "10", 10**9, True):
        with pytest.raises(Invalid) as err:
            await store.todo_claim(agent, todo["id"], lease_seconds=bad)
        assert err.value.argument == "lease_seconds"
    res = await store.todo_claim(agent, todo["id"], lease_seconds=1)
    assert res["todo"]["state"] == "claimed"


async def test_the_doorbell_heartbeat_read_is_per_endpoint_and_never_starved(store):
    busy = await make_agent(store, agent_id="busy")
    quiet = await make_agent(store, agent_id="quiet")
    for i in range(5):
        await add(store, busy, title=f"old {i}")
    fresh = await add(store, quiet, title="new")
    rows = await store.ready_todos([quiet.endpoint_id], limit=2)
    assert [r["id"] for r in rows] == [fresh["id"]]
    rows = await store.ready_todos([busy.endpoint_id, quiet.endpoint_id], limit=2)
    assert sorted(r["endpoint_id"] for r in rows) == sorted([busy.endpoint_id] * 2 + [quiet.endpoint_id])
    assert await store.ready_todos([]) == []


async def test_a_lapsed_last_attempt_is_dead_lettered_never_taken_over(store, agent, db_url):
    todo = await add(store, agent, max_attempts=1)
    await store.todo_claim(agent, todo["id"], lease_seconds=5, now=T0)
    later = T0 + timedelta(minutes=1)
    assert await store.todo_claim_next(agent, now=later) == {"todo": None}
    with pytest.raises(Conflict) as err:
        await store.todo_claim(agent, todo["id"], now=later)
    assert "reaper" in err.value.message
    assert await store.sweep_reap(now=later) == 1
    row = await todo_row(db_url, todo["id"])
    assert row["state"] == "failed" and row["next_retry_at"] is None
    assert [(a["outcome"], a["disposition"]) for a in await attempts_of(db_url, todo["id"])] == [
        ("reaped", "dead_lettered")]
