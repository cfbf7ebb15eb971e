"""Behind a transaction pooler: SWITCHBOARD_LISTEN_DATABASE_URL sends a process's one LISTEN
connection to the URL it names while every statement goes through DATABASE_URL, and the
live events still arrive."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from tests.conftest import make_agent, make_user, run_server, sql_rows


async def test_the_listen_connection_goes_to_its_own_url_and_events_still_arrive(server_settings, db_url):
    listen_url = db_url + " application_name=sb_direct_listen"
    async with run_server(replace(server_settings, listen_database_url=listen_url)) as server:
        listeners = []
        for _ in range(100):
            listeners = await sql_rows(db_url, "SELECT query FROM pg_stat_activity "
                                               "WHERE application_name = 'sb_direct_listen'")
            if listeners:
                break
            await asyncio.sleep(0.05)
        assert [r["query"] for r in listeners] == ["LISTEN switchboard_v1"]  # that connection only
        agent = await make_agent(server.store, user=await make_user(server.store))
        async with server.runtime.fanout.subscription() as sub, \
                server.runtime.fanout.presence.listening(agent.user_id, 10):
            todo = await server.store.todo_add(agent, queue="q", title="heard")
            while True:
                event = await asyncio.wait_for(sub.get(), 10)
                if event.get("todo") == todo["id"]:
                    break
        assert event["kind"] == "added"


async def test_a_listen_url_without_a_database_url_is_ignored(server_settings, db_url):
    """The embedded database's own URL is used for both: a stray listen URL cannot split them."""
    from board.app import listen_url_of
    assert listen_url_of(replace(server_settings, database_url=None, listen_database_url="host=elsewhere"),
                         "embedded") == "embedded"
    assert listen_url_of(replace(server_settings, listen_database_url="host=direct"), db_url) == "host=direct"
    assert listen_url_of(server_settings, db_url) == db_url
