"""Answering an agent's question on the Board over HTTP: the drawer of an interrupted todo
shows the question first with a button per choice and a text box, the CSRF-checked form
records the answer through the store, a todo that stopped waiting is refused with a message,
and another human's todo is not found."""

from __future__ import annotations

import re

from tests.acceptance.test_board_auth import client_for, make_human, sign_in
from tests.conftest import make_agent


async def test_the_owner_answers_a_question_by_choice_and_a_late_answer_is_refused(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="deploy")
    await store.todo_claim(agent, todo["id"])
    await store.todo_interrupt(agent, todo["id"], question="Ship <b>now</b>?", choices=["yes", "not yet"])
    path = f"/todos/{todo['id']}/answer"
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        drawer = (await c.get(f"/todos/{todo['id']}")).text
        assert drawer.index('id="drawer-question"') < drawer.index('id="drawer-details"' if 'id="drawer-details"' in drawer
                                                                    else 'id="attempts-heading"')
        assert "Ship &lt;b&gt;now&lt;/b&gt;?" in drawer
        assert re.search(r'<button type="submit" name="choice" value="not yet">not yet</button>', drawer)
        assert (await c.post(path, data={"choice": "yes"})).status_code == 403  # no CSRF token
        r = await c.post(path, data={"csrf_token": token, "choice": "not yet", "text": ""})
        assert r.status_code == 303
        after = (await c.get(r.headers["location"])).text
        assert "Answered. The agent has been told." in after and "ada answered: not yet" in after
        resumed = await store.todo_resume(agent, todo["id"])
        assert [(a["choice"], a["who"]) for a in resumed["answers"]] == [("not yet", "ada")]
        r = await c.post(path, data={"csrf_token": token, "text": "too late"})
        late = (await c.get(r.headers["location"])).text
        assert "Could not answer: The todo is no longer waiting for an answer (it is claimed)" in late


async def test_another_human_cannot_answer_a_todo_that_is_not_theirs_on_the_board(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    await make_human(store, "mallory")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="deploy")
    await store.todo_claim(agent, todo["id"])
    await store.todo_interrupt(agent, todo["id"], question="Go?")
    async with client_for(live_server) as c:
        token = await sign_in(c, "mallory")
        r = await c.post(f"/todos/{todo['id']}/answer", data={"csrf_token": token, "text": "yes"})
        assert r.status_code == 404
    assert (await store.todo_get(ada, todo["id"]))["attempts"][0]["question"]["answers"] == []
