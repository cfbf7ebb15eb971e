"""Teams in the store, on Postgres: each role against each action a person may take (a
viewer changes nothing, an operator acts on todos, an admin also manages the team); the
record of an action written in the action's transaction (none for a refused, missed or
rolled-back action); the team's last admin kept, also when two admins step down at once;
a team's endpoints sharing its todos while a personal endpoint and a non-member see none
of them; removal ending access at once in another process; the record's retention."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone

import psycopg
import pytest

from board.config import Settings
from board.errors import Conflict, Forbidden, Internal, NotFound
from board.store import store as st
from board.store.db import open_pool
from board.store.vocabulary import ROLES, VERBS
from tests.conftest import make_agent, make_user, sql_rows


@dataclass
class Team:
    space: st.Human  # the command line acting in the team
    people: dict[str, st.Human]  # role -> that member acting in the team
    planner: st.Agent  # a team endpoint that adds
    worker: st.Agent  # a team endpoint that claims


async def make_team(store, name="platform") -> Team:
    ada = await make_user(store, f"{name}-ada")
    await store.team_create(name, owner=ada.username)
    space = await store.team_space(name)
    people = {}
    for role in ROLES:
        person = await make_user(store, f"{name}-{role}")
        await store.team_member_set(space, person.username, role)
        people[role] = await store.human_in(person, space.user_id)
    endpoints = []
    for agent_id in ("planner", "worker"):
        _, token = await store.endpoint_vend(space, name=agent_id, agent_id=agent_id, queues=["builds"],
                                             scope=list(VERBS))
        endpoints.append(await store.endpoint_authenticate(token))
    return Team(space, people, *endpoints)


async def records(db_url, **where) -> list[dict]:
    cond = " AND ".join(f"{k} = %({k})s" for k in where) or "true"
    return await sql_rows(db_url, f"SELECT space_id, actor_id, actor_name, action, todo_id, queue, detail, source::text"
                                  f" FROM audit_records WHERE {cond} ORDER BY id", where)


async def run_sql(db_url, text: str) -> None:
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute(text)


async def snapshot(db_url) -> list:
    """Everything a person's action may change."""
    out = []
    for q in ("SELECT id, state, priority, owner, waits, scheduled, attempts_total FROM todos ORDER BY id",
              "SELECT todo_id, seq, outcome::text FROM attempts ORDER BY 1, 2",
              "SELECT todo_id, seq, n, kind::text FROM attempt_notes ORDER BY 1, 2, 3",
              "SELECT * FROM todo_deps ORDER BY 1, 2", "SELECT user_id, queue FROM queue_pauses ORDER BY 1, 2",
              "SELECT user_id, queue, max_held FROM queue_limits ORDER BY 1, 2", "SELECT id FROM schedules ORDER BY 1",
              "SELECT id, revoked_at FROM endpoints ORDER BY 1", "SELECT * FROM team_members ORDER BY 1, 2"):
        out.append(await sql_rows(db_url, q))
    return out


# -- each action a person may take: what it needs set up, and the call ----------------------

async def _pending(store, team, **kw):
    return (await store.todo_add(team.planner, queue="builds", title="build", **kw))["id"]


async def _claimed(store, team, **kw):
    todo_id = await _pending(store, team, **kw)
    await store.todo_claim(team.worker, todo_id)
    return todo_id


async def _dead(store, team):
    todo_id = await _claimed(store, team, max_attempts=1)
    await store.todo_fail(team.worker, todo_id, summary="broke")
    return todo_id


async def _asking(store, team):
    todo_id = await _claimed(store, team)
    await store.todo_interrupt(team.worker, todo_id, question="Deploy now?")
    return todo_id


async def _waiting(store, team):
    first = await _pending(store, team)
    return await _pending(store, team, after=[first]), first


async def _canceled(store, team):
    todo_id = await _pending(store, team)
    await store.todo_cancel(team.space, todo_id)
    return todo_id


async def _scheduled(store, team):
    return await _pending(store, team, run_at=(datetime.now(timezone.utc) + timedelta(hours=1)).isoformat())


_spares = itertools.count()


async def _endpoint(store, team):
    _, token = await store.endpoint_vend(team.space, name="spare", agent_id=f"spare-{next(_spares)}",
                                         queues=["builds"], scope=["list_todos"])
    return (await store.endpoint_authenticate(token)).endpoint_id


async def _member(store, team):
    person = await make_user(store)
    await store.team_member_set(team.space, person.username, "viewer")
    return person.username


async def _paused(store, team):
    await store.queue_pause(team.space, "builds")


async def _nothing(store, team):
    return None


async def _claim_and_complete(store, human, todo_id):
    """A person completes a todo they hold (a claim, recorded too, then the complete)."""
    await store.todo_claim(human, todo_id)
    await store.todo_complete(human, todo_id, summary="done by hand")


ACTIONS = {  # action -> (least role, setup, call)
    "add": ("operator", _nothing, lambda s, h, x: s.todo_add(h, queue="builds", title="by hand")),
    "claim": ("operator", _pending, lambda s, h, x: s.todo_claim(h, x)),
    "complete": ("operator", _pending, lambda s, h, x: _claim_and_complete(s, h, x)),
    "fail": ("operator", _claimed, lambda s, h, x: s.todo_fail(h, x, summary="failed by hand")),
    "release": ("operator", _claimed, lambda s, h, x: s.todo_release(h, x)),
    "cancel": ("operator", _pending, lambda s, h, x: s.todo_cancel(h, x)),
    "retry": ("operator", _dead, lambda s, h, x: s.todo_retry(h, x)),
    "note": ("operator", _claimed, lambda s, h, x: s.todo_note(h, x, text="look at the logs")),
    "answer": ("operator", _asking, lambda s, h, x: s.todo_answer(h, x, text="yes")),
    "drop_dependency": ("operator", _waiting, lambda s, h, x: s.todo_drop_dependency(h, x[0], x[1])),
    "delete": ("operator", _canceled, lambda s, h, x: s.todos_delete(h, [x])),
    "start_now": ("operator", _scheduled, lambda s, h, x: s.todo_start_now(h, x)),
    "set_priority": ("operator", _pending, lambda s, h, x: s.todos_set_priority(h, [x], 0)),
    "pause": ("admin", _nothing, lambda s, h, x: s.queue_pause(h, "builds")),
    "resume": ("admin", _paused, lambda s, h, x: s.queue_resume(h, "builds")),
    "set_limit": ("admin", _nothing, lambda s, h, x: s.queue_limit_set(h, "builds", 3)),
    "schedule_add": ("admin", _nothing, lambda s, h, x: s.schedule_add(h, queue="builds", title="nightly",
                                                                     every_seconds=3600)),
    "vend": ("admin", _nothing, lambda s, h, x: s.endpoint_vend(h, name="w9", agent_id="w9", queues=["builds"],
                                                                scope=["claim_next"])),
    "revoke": ("admin", _endpoint, lambda s, h, x: s.endpoint_revoke(x, user_id=h)),
    "member_set": ("admin", _member, lambda s, h, x: s.team_member_set(h, x, "operator")),
    "member_remove": ("admin", _member, lambda s, h, x: s.team_member_remove(h, x)),
}


@pytest.mark.parametrize("action", ACTIONS)
async def test_each_role_may_take_an_action_only_at_or_above_the_role_it_needs_and_each_taken_one_is_recorded(
        store, db_url, action):
    least, setup, call = ACTIONS[action]
    team = await make_team(store)
    for role in ROLES:
        person = team.people[role]
        target = await setup(store, team)
        before = await snapshot(db_url)
        if ROLES.index(role) < ROLES.index(least):
            with pytest.raises(Forbidden):
                await call(store, person, target)
            assert await snapshot(db_url) == before, f"a {role}'s refused {action} changed something"
            assert await records(db_url, actor_id=person.actor) == [], f"a {role}'s refused {action} was recorded"
            continue
        await call(store, person, target)
        assert await snapshot(db_url) != before
        got = await records(db_url, actor_id=person.actor)
        assert [(r["action"], r["actor_name"], r["space_id"], r["source"]) for r in got][-1:] == [
            (action, person.username, team.space.user_id, "board")], got
        assert len(got) == (2 if action == "complete" else 1), got


async def test_a_viewer_s_bulk_action_is_refused_whole_and_an_operator_s_records_each_todo(store, db_url):
    team = await make_team(store)
    ids = [await _pending(store, team) for _ in range(3)]
    before = await snapshot(db_url)
    for kind in ("cancel", "priority", "delete"):
        with pytest.raises(Forbidden):
            await store.todos_bulk(team.people["viewer"], kind, ids, priority=0)
    assert await snapshot(db_url) == before
    counts = await store.todos_bulk(team.people["operator"], "cancel", ids)
    assert counts["changed"] == 3
    got = await records(db_url, actor_id=team.people["operator"].actor)
    assert sorted(r["todo_id"] for r in got) == sorted(ids) and {r["action"] for r in got} == {"cancel"}


async def test_a_record_names_the_todo_and_queue_and_never_holds_a_summary_or_a_token(store, db_url):
    team = await make_team(store)
    todo_id = await _claimed(store, team)
    await store.todo_fail(team.people["operator"], todo_id, summary="the secret summary", artifact="https://example.com/secret")
    await store.todos_set_priority(team.people["operator"], [await _pending(store, team)], 1)
    fail, priority = await records(db_url, actor_id=team.people["operator"].actor)
    assert (fail["action"], fail["todo_id"], fail["queue"]) == ("fail", todo_id, "builds")
    assert (priority["action"], priority["detail"]) == ("set_priority", {"priority": 1})
    text = str(await sql_rows(db_url, "SELECT * FROM audit_records"))
    assert "secret" not in text and "sb_" not in text


async def test_an_action_that_misses_or_is_refused_by_its_rules_is_not_recorded(store, db_url):
    team = await make_team(store)
    op = team.people["operator"]
    todo_id = await _pending(store, team)
    await store.todo_cancel(op, todo_id)
    with pytest.raises(Conflict):
        await store.todo_cancel(op, todo_id)  # already canceled
    with pytest.raises(NotFound):
        await store.todo_cancel(op, "no-such-todo")
    assert [r["action"] for r in await records(db_url, actor_id=op.actor)] == ["cancel"]


async def test_an_action_rolled_back_at_commit_leaves_neither_its_change_nor_its_record(store, db_url, caplog):
    team = await make_team(store)
    todo_id = await _pending(store, team)
    await run_sql(db_url, "CREATE FUNCTION refuse_at_commit() RETURNS trigger LANGUAGE plpgsql AS "
                          "$$ BEGIN RAISE EXCEPTION 'refused at commit'; END $$")
    await run_sql(db_url, "CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER UPDATE ON todos DEFERRABLE INITIALLY"
                          " DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_at_commit()")
    with pytest.raises(Internal):
        await store.todo_cancel(team.people["operator"], todo_id)
    assert (await sql_rows(db_url, "SELECT state::text FROM todos WHERE id = %s", (todo_id,)))[0]["state"] == "pending"
    assert await records(db_url, action="cancel") == []


async def test_the_last_admin_is_kept_and_of_two_admins_stepping_down_at_once_one_stays(store, db_url):
    team = await make_team(store)
    owner = f"{team.space.space_name}-ada"
    await store.team_member_remove(team.space, f"{team.space.space_name}-admin")
    with pytest.raises(Conflict, match="last admin"):
        await store.team_member_set(team.space, owner, "operator")
    with pytest.raises(Conflict, match="last admin"):
        await store.team_member_remove(team.space, owner)
    await store.team_member_set(team.space, f"{team.space.space_name}-admin", "admin")
    pool = await open_pool(db_url, min_size=1, max_size=2)
    other = st.Store(pool, Settings())  # a second process's store
    try:
        for _ in range(5):
            results = await asyncio.gather(
                store.team_member_set(team.space, owner, "viewer"),
                other.team_member_remove(team.space, f"{team.space.space_name}-admin"), return_exceptions=True)
            admins = await sql_rows(db_url, "SELECT user_id FROM team_members WHERE team_id = %s AND role = 'admin'",
                                    (team.space.user_id,))
            assert len(admins) == 1, results
            assert sum(isinstance(r, Conflict) for r in results) == 1, results
            await store.team_member_set(team.space, owner, "admin")
            await store.team_member_set(team.space, f"{team.space.space_name}-admin", "admin")
    finally:
        await pool.close()


async def test_a_team_s_endpoints_share_its_todos_and_a_personal_endpoint_or_another_team_sees_none(store):
    team = await make_team(store)
    other = await make_team(store, "design")
    personal = await make_agent(store, queues=("builds",))
    todo_id = await _pending(store, team)
    assert (await store.todo_claim_next(team.worker))["todo"]["id"] == todo_id
    assert (await store.todo_get(team.planner, todo_id))["state"] == "claimed"
    for outsider in (personal, other.planner):
        with pytest.raises(NotFound):
            await store.todo_get(outsider, todo_id)
        assert (await store.todo_list(outsider))["todos"] == []
        assert (await store.todo_claim_next(outsider))["todo"] is None
    mine = (await store.todo_add(personal, queue="builds", title="mine"))["id"]
    with pytest.raises(NotFound):
        await store.todo_get(team.planner, mine)


async def test_an_attempt_names_the_team_endpoint_that_claimed(store, db_url):
    team = await make_team(store)
    todo_id = await _claimed(store, team)
    row, = await sql_rows(db_url, "SELECT claimer_endpoint_id::text AS e FROM attempts WHERE todo_id = %s", (todo_id,))
    assert row["e"] == team.worker.endpoint_id


async def test_revoking_a_team_endpoint_dead_letters_only_what_it_held(store):
    team = await make_team(store)
    held = await _claimed(store, team)
    other = await _pending(store, team)
    await store.todo_claim(team.planner, other)
    assert await store.endpoint_revoke(team.worker.endpoint_id, user_id=team.space) == 1
    assert (await store.todo_get(team.planner, held))["dead_letter"] is True
    assert (await store.todo_get(team.planner, other))["state"] == "claimed"


async def test_a_team_endpoint_s_agent_id_is_its_own_among_the_team_s_live_endpoints(store):
    team = await make_team(store)
    with pytest.raises(Conflict, match="agent id worker"):
        await store.endpoint_vend(team.space, name="w", agent_id="worker", queues=["builds"], scope=["claim_next"])
    await store.endpoint_revoke(team.worker.endpoint_id, user_id=team.space)
    await store.endpoint_vend(team.space, name="w", agent_id="worker", queues=["builds"], scope=["claim_next"])


async def test_a_person_sees_a_team_todo_only_while_a_member_and_another_process_knows_at_once(store, db_url):
    team = await make_team(store)
    todo_id = await _pending(store, team)
    stranger = await make_user(store)
    assert await store.human_for_todo(stranger, todo_id) is None
    assert await store.human_in(stranger, team.space.user_id) is None
    assert await store.human_for_todo(stranger, "never-minted") is None
    viewer = team.people["viewer"]
    person = st.Human(viewer.actor, viewer.username)
    assert (await store.human_for_todo(person, todo_id)).role == "viewer"
    pool = await open_pool(db_url, min_size=1, max_size=2)
    other = st.Store(pool, Settings())
    try:
        assert (await other.human_in(person, team.space.user_id)).space_name == "platform"
        await store.team_member_remove(team.space, viewer.username)
        assert await other.human_in(person, team.space.user_id) is None
        assert await other.human_for_todo(person, todo_id) is None
    finally:
        await pool.close()
    spaces = await store.spaces_of(team.people["operator"])
    assert [(s["name"], s["kind"], s["role"]) for s in spaces] == [
        ("platform-operator", "person", "admin"), ("platform", "team", "operator")]


async def test_a_team_cannot_be_signed_in_as_nor_take_a_person_s_name(store):
    ada = await make_user(store, "ada")
    await store.team_create("ops", owner="ada")
    assert await store.user_by_name("ops") is None
    with pytest.raises(Conflict, match="taken"):
        await store.team_create("ada", owner="ada")
    with pytest.raises(NotFound, match="no person named nobody"):
        await store.team_create("ops2", owner="nobody")
    with pytest.raises(NotFound, match="no person named ops"):  # a team is not a person
        await store.team_create("ops3", owner="ops")
    assert ada


async def test_records_older_than_the_audit_retention_are_deleted_and_todos_retention_does_not_touch_them(
        store, db_url):
    team = await make_team(store)
    await _canceled(store, team)
    await run_sql(db_url, "UPDATE audit_records SET at = now() - interval '400 days' WHERE action = 'cancel'")
    kept = len(await records(db_url))
    assert await store.sweep_audit() == 1
    assert len(await records(db_url)) == kept - 1
    short = st.Store(store.pool, replace(store.settings, audit_retention_days=0))
    await short.sweep_retention()
    assert await records(db_url) == []
