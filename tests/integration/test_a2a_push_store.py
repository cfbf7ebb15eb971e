"""A2A push notification configs in the store: scoped like every read (REQ-10), validated, and
each status change of a configured todo written to the hook outbox in the transition's own
transaction (migration 0021's trigger)."""

from __future__ import annotations

import pytest

from board.errors import Conflict, Internal, Invalid, NotFound
from board.store.vocabulary import PUSH_CONFIGS_MAX
from tests.conftest import make_agent, sql_rows
from tests.integration.test_atomicity import _install_failing_trigger

URL = "http://127.0.0.1:9/push"
PUSHES = ("SELECT payload->'todo'->>'state' AS state, (payload->'todo'->>'dead_letter')::boolean AS dead_letter,"
          " url, push_config_id FROM hook_events WHERE event = 'a2a.task_status' ORDER BY created_at, id")


async def test_a_config_is_set_read_listed_and_deleted_without_its_secrets(store, agent):
    todo = await store.todo_add(agent, queue="q", title="t")
    made = await store.push_config_set(agent, todo["id"], url=URL, token="tok-1", auth_scheme="Bearer",
                                       auth_credentials="cred-1")
    assert made == {"task_id": todo["id"], "id": todo["id"], "url": URL, "auth_scheme": "Bearer"}
    second = await store.push_config_set(agent, todo["id"], config_id="b", url=URL + "/b")
    assert await store.push_config(agent, todo["id"]) == made  # no id: the task's default
    assert await store.push_config(agent, todo["id"], "b") == second
    assert [c["id"] for c in await store.push_configs(agent, todo["id"])] == [todo["id"], "b"]
    # setting an id again replaces it
    await store.push_config_set(agent, todo["id"], config_id="b", url=URL + "/b2")
    assert (await store.push_config(agent, todo["id"], "b"))["url"] == URL + "/b2"
    await store.push_config_delete(agent, todo["id"], "b")
    with pytest.raises(NotFound, match="no push notification config"):
        await store.push_config(agent, todo["id"], "b")
    with pytest.raises(NotFound, match="no push notification config"):
        await store.push_config_delete(agent, todo["id"], "b")


async def test_another_callers_task_is_the_same_error_as_a_never_minted_one(store, agent):
    other = await make_agent(store, agent_id="other")
    todo = await store.todo_add(agent, queue="q", title="t")
    await store.push_config_set(agent, todo["id"], url=URL)
    for call in (lambda tid: store.push_config_set(other, tid, url=URL), lambda tid: store.push_configs(other, tid),
                 lambda tid: store.push_config(other, tid), lambda tid: store.push_config_delete(other, tid)):
        errors = []
        for tid in (todo["id"], "never-minted"):
            with pytest.raises(NotFound) as caught:
                await call(tid)
            errors.append(caught.value.wire())
        assert errors[0] == errors[1] == {"error": {"code": "not_found", "message": "no such todo"}}
    assert [c["url"] for c in await store.push_configs(agent, todo["id"])] == [URL]  # untouched


@pytest.mark.parametrize("fields, argument", [
    ({}, "url"),
    ({"url": "ftp://example.com/x"}, "url"),
    ({"url": "https://"}, "url"),
    ({"url": "https://user:pw@example.com/x"}, "url"),
    ({"url": "https://example.com/x y"}, "url"),
    ({"url": "https://example.com/" + "x" * 2048}, "url"),
    ({"url": "https://example.com/?key=sk_live_" + "a" * 24}, "url"),
    ({"url": URL, "token": "t" * 1025}, "token"),
    ({"url": URL, "token": "a\nb"}, "token"),
    ({"url": URL, "config_id": "x" * 129}, "id"),
    ({"url": URL, "config_id": "a\x00b"}, "id"),
    ({"url": URL, "auth_credentials": "secret"}, "authentication.scheme"),
    ({"url": URL, "auth_scheme": "Bearer token", "auth_credentials": "x"}, "authentication.scheme"),
])
async def test_a_bad_config_is_refused_naming_its_field_and_writes_nothing(store, agent, db_url, fields, argument):
    todo = await store.todo_add(agent, queue="q", title="t")
    with pytest.raises(Invalid) as caught:
        await store.push_config_set(agent, todo["id"], **fields)
    assert caught.value.argument == argument
    assert await sql_rows(db_url, "SELECT 1 FROM a2a_push_configs") == []
    assert await sql_rows(db_url, "SELECT 1 FROM hook_events") == []


async def test_a_task_holds_a_bounded_number_of_configs(store, agent):
    todo = await store.todo_add(agent, queue="q", title="t")
    for i in range(PUSH_CONFIGS_MAX):
        await store.push_config_set(agent, todo["id"], config_id=f"c{i}", url=URL)
    with pytest.raises(Conflict, match=f"at most {PUSH_CONFIGS_MAX}"):
        await store.push_config_set(agent, todo["id"], config_id="one-more", url=URL)
    await store.push_config_set(agent, todo["id"], config_id="c0", url=URL + "/again")  # replacing is fine
    assert len(await store.push_configs(agent, todo["id"])) == PUSH_CONFIGS_MAX


async def test_each_status_change_of_a_configured_todo_writes_one_push_per_config(store, agent, db_url):
    todo = await store.todo_add(agent, queue="q", title="t", max_attempts=2)
    await store.push_config_set(agent, todo["id"], config_id="a", url=URL + "/a")
    await store.push_config_set(agent, todo["id"], config_id="b", url=URL + "/b")
    await store.todo_claim(agent, todo["id"])
    await store.todo_heartbeat(agent, todo["id"])  # no change of state: no push
    await store.todo_fail(agent, todo["id"])
    await store.sweep_retry(now=(await store.todo_get(agent, todo["id"]))["next_retry_at"])
    await store.todo_claim(agent, todo["id"])
    await store.todo_complete(agent, todo["id"])
    rows = await sql_rows(db_url, PUSHES)
    by_config = {c: [(r["state"], r["dead_letter"]) for r in rows if r["push_config_id"] == c] for c in "ab"}
    # a: its own status at setting (pending), then each change; b: set while pending too
    expected = [("pending", False), ("claimed", False), ("failed", False), ("pending", False), ("claimed", False),
                ("done", False)]
    assert by_config["a"] == by_config["b"] == expected
    assert {r["url"] for r in rows} == {URL + "/a", URL + "/b"}


async def test_a_todo_without_configs_writes_no_push(store, agent, db_url):
    todo = await store.todo_add(agent, queue="q", title="t", max_attempts=1)
    await store.todo_claim(agent, todo["id"])
    await store.todo_fail(agent, todo["id"])
    assert await sql_rows(db_url, "SELECT 1 FROM hook_events") == []


async def test_a_rolled_back_transition_writes_no_push(store, agent, db_url):
    todo = await store.todo_add(agent, queue="q", title="t")
    await store.push_config_set(agent, todo["id"], url=URL)
    await _install_failing_trigger(db_url, "attempts")
    with pytest.raises(Internal):
        await store.todo_claim(agent, todo["id"])
    assert [r["state"] for r in await sql_rows(db_url, PUSHES)] == ["pending"]  # the one written at setting


async def test_a_deleted_config_takes_its_undelivered_pushes_with_it(store, agent, db_url):
    todo = await store.todo_add(agent, queue="q", title="t")
    await store.push_config_set(agent, todo["id"], config_id="keep", url=URL)
    await store.push_config_set(agent, todo["id"], config_id="drop", url=URL)
    await store.todo_claim(agent, todo["id"])
    await store.push_config_delete(agent, todo["id"], "drop")
    assert {r["push_config_id"] for r in await sql_rows(db_url, PUSHES)} == {"keep"}
