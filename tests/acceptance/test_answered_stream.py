"""The "answered" notification on the Board's live stream: an answer (a new notification
kind) reaches both the list's stream and the watched drawer's, and the streams go on
delivering after it (an unknown kind must not end or stall them)."""

from __future__ import annotations

from tests.acceptance.test_board_auth import client_for, make_human, sign_in
from tests.acceptance.test_board_live import open_stream
from tests.conftest import make_agent


async def test_an_answer_reaches_the_list_and_the_watched_drawer_and_the_streams_go_on(live_server, monkeypatch):
    import board.web.events
    monkeypatch.setattr(board.web.events, "WATCH_REFRESH_SECONDS", 600)  # only the notification can bring it
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="deploy")
    await store.todo_claim(agent, todo["id"])
    await store.todo_interrupt(agent, todo["id"], question="Ship it?", choices=["ship", "hold"])
    async with client_for(live_server) as watcher, client_for(live_server) as lister:
        await sign_in(watcher, "ada")
        token = await sign_in(lister, "ada")
        async with open_stream(watcher, f"?todo={todo['id']}") as drawer, open_stream(lister) as rows:
            assert "ada answered" not in drawer.snapshot["drawer"]
            r = await lister.post(f"/todos/{todo['id']}/answer", data={"csrf_token": token, "choice": "hold"})
            assert r.status_code == 303
            seen = await drawer.next_todo(todo["id"])
            assert "ada answered: hold" in seen["drawer"]
            assert (await rows.next_todo(todo["id"]))["matches"]
            await store.todo_resume(agent, todo["id"])  # the next notification still arrives on both
            assert "claimed" in (await drawer.next_todo(todo["id"]))["row"]
            assert "claimed" in (await rows.next_todo(todo["id"]))["row"]
