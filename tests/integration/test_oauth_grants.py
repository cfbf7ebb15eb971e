"""OAuth grants in the store: a person has at most one live grant per client, so a code
exchanged while another exchange for the same person and client is committing updates the
grant that one made rather than making a second."""

from __future__ import annotations

import asyncio

import psycopg

from tests.conftest import make_user, sql_rows


async def code_of(store, user_id: int, *, queues=("q",)) -> str:
    return await store.oauth_code_issue(
        user_id, client_id="host", client_name="Host", client_verified=False, agent_id="host", scope=["get_todo"],
        queues=list(queues), redirect_uri="http://127.0.0.1:9/cb", redirect_uri_explicit=True,
        code_challenge="c", resource="http://127.0.0.1/mcp")


async def test_an_exchange_waiting_on_another_grant_of_the_same_client_updates_that_grant(store, db_url):
    ada = await make_user(store, "ada")
    code = await code_of(store, ada.user_id, queues=("docs",))
    async with await psycopg.AsyncConnection.connect(db_url) as other:  # the other exchange, not yet committed
        cur = await other.execute(
            "INSERT INTO endpoints (user_id, name, agent_id, kind, client_id, client_name, scope, queues)"
            " VALUES (%s, 'Host', 'host', 'oauth', 'host', 'Host', '{get_todo}', '{q}') RETURNING id::text",
            (ada.user_id,))
        first = (await cur.fetchone())[0]
        task = asyncio.create_task(store.oauth_code_exchange(code, access_seconds=60, refresh_seconds=600))
        for _ in range(500):  # until its insert waits on the unique index
            if await sql_rows(db_url, "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                                      "AND wait_event_type = 'Lock'"):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the exchange never waited for the other grant")
        assert not task.done()
        await other.commit()
    issued = await asyncio.wait_for(task, timeout=10)
    assert issued["endpoint_id"] == first and issued["updated"]
    rows = await sql_rows(db_url, "SELECT id::text, queues, revoked_at FROM endpoints WHERE kind = 'oauth'")
    assert rows == [{"id": first, "queues": ["docs"], "revoked_at": None}]
    agent = await store.endpoint_authenticate(issued["access_token"])
    assert agent.endpoint_id == first and agent.queues == ("docs",)
