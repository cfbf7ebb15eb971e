"""Answering an agent's question on the Board over HTTP: the drawer of an interrupted todo
shows the question first with a button per choice and a text box, the CSRF-checked form
records the answer through the store, a todo that stopped waiting is refused with a message,
and another human's todo is not found."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from tests.acceptance.test_board_auth import client_for, make_human, sign_in
from tests.acceptance.test_board_live import open_stream
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
        assert re.search(r'<button type="submit" name="choice" value="not yet"[^>]*>not yet</button>', drawer)
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


def answer_form(drawer: str) -> dict[str, str]:
    """The answer form's hidden fields as the drawer drew them."""
    form = re.search(r'<form method="post" action="/todos/[^"]+/answer".*?</form>', drawer, re.S).group(0)
    return dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form))


async def test_an_answer_drawn_for_one_question_is_refused_once_the_agent_asked_another(live_server):
    """The drawer showed "Deploy now?"; the agent resumed and asked "Drop the table?" before
    the click: the answer does not land on the new question, and the drawer says why."""
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="deploy")
    await store.todo_claim(agent, todo["id"])
    await store.todo_interrupt(agent, todo["id"], question="Deploy now?", choices=["yes", "no"])
    path = f"/todos/{todo['id']}/answer"
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        drawn = answer_form((await c.get(f"/todos/{todo['id']}")).text)
        assert drawn["asked"]
        await store.todo_resume(agent, todo["id"])
        await store.todo_interrupt(agent, todo["id"], question="Drop the table?", choices=["yes", "no"])
        r = await c.post(path, data={**drawn, "choice": "yes"})
        assert r.status_code == 303
        refused = (await c.get(r.headers["location"])).text
        assert "Could not answer: The agent asked something else since this answer was written" in refused
        assert (await store.todo_get(ada, todo["id"]))["attempts"][0]["question"]["answers"] == []
        redrawn = answer_form(refused)
        assert redrawn["asked"] != drawn["asked"]
        r = await c.post(path, data={**redrawn, "choice": "no"})
        assert "Answered. The agent has been told." in (await c.get(r.headers["location"])).text
    [answer] = (await store.todo_get(ada, todo["id"]))["attempts"][0]["question"]["answers"]
    assert answer["choice"] == "no"


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


async def test_the_drawer_says_the_expiry_in_words_describes_the_dialog_by_the_question_and_names_note_kinds(
        live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="deploy")
    await store.todo_claim(agent, todo["id"])
    await store.todo_interrupt(agent, todo["id"], question="Deploy now?", choices=["deploy now", "wait"],
                               expires_in_seconds=600)
    await store.todo_answer(ada, todo["id"], choice="wait", text="after the freeze")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        drawer = (await c.get(f"/todos/{todo['id']}/drawer")).text
    assert 'aria-describedby="question-text"' in drawer.split(">", 1)[0] + drawer[drawer.index("<dialog"):][:300]
    question = drawer[drawer.index('id="drawer-question"'):drawer.index('id="drawer-details"')
                      if 'id="drawer-details"' in drawer else drawer.index('id="attempts-heading"')]
    # Answered: the expiry no longer threatens; the answer so far is one plain sentence.
    assert "Answers so far" in question and "ada answered wait: after the freeze" in question
    assert re.search(r'Asked <time datetime="20\d\d-[^"]+Z">20\d\d-\d\d-\d\d \d\d:\d\d:\d\d UTC</time>\.', question)
    row = drawer[drawer.index('id="attempt-1"'):]
    assert "The agent asked at" in row and "Choices offered: deploy now, wait." in row
    assert re.search(r"ada answered wait at <time[^>]*>[^<]+</time>: after the freeze", row)
    assert re.search(r'<span class="note-author">ada</span> <span class="note-kind">answered</span>', row)
    assert re.search(r'<span class="note-author">agent</span> <span class="note-kind">asked</span>', row)
    assert 'data-announce="ada answered wait: after the freeze"' in row
    assert 'data-announce="The agent asks: Deploy now?"' in row


async def test_an_unanswered_question_shows_its_expiry_in_words_with_a_time(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="deploy")
    await store.todo_claim(agent, todo["id"])
    await store.todo_interrupt(agent, todo["id"], question="Deploy now?", expires_in_seconds=600)
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        drawer = (await c.get(f"/todos/{todo['id']}/drawer")).text
    assert re.search(r'Expires in (10|9) minutes, at <time datetime="20[^"]+Z">20[^<]+ UTC</time>; unanswered by then, '
                     r"the todo is released for the next claimer\.", drawer)
    assert 'name="choice"' not in drawer  # no choices offered: the text box alone


async def test_an_interrupt_with_no_question_still_takes_a_typed_answer(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="log in to the registry")
    await store.todo_claim(agent, todo["id"])
    await store.todo_interrupt(agent, todo["id"], state="auth_required")
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        drawer = (await c.get(f"/todos/{todo['id']}")).text
        assert "The agent needs authorization" in drawer and "The agent asked no question" in drawer
        empty = await c.post(f"/todos/{todo['id']}/answer", data={"csrf_token": token, "text": "  "})
        refused = (await c.get(empty.headers["location"])).text
        assert "Could not answer: Your answer must not be empty" in refused
        r = await c.post(f"/todos/{todo['id']}/answer", data={"csrf_token": token, "text": "done: token rotated"})
        assert r.status_code == 303
        assert "Answered. The agent has been told." in (await c.get(r.headers["location"])).text
    resumed = await store.todo_resume(agent, todo["id"])
    assert [(a["text"], a["who"]) for a in resumed["answers"]] == [("done: token rotated", "ada")]


async def test_a_forged_choice_the_question_does_not_offer_is_refused_naming_the_choices(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="deploy")
    await store.todo_claim(agent, todo["id"])
    await store.todo_interrupt(agent, todo["id"], question="Ship?", choices=["yes", "no"])
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        r = await c.post(f"/todos/{todo['id']}/answer", data={"csrf_token": token, "choice": "maybe"})
        assert r.status_code == 303
        page = (await c.get(r.headers["location"])).text
    assert re.search(r'role="alert"[^>]*>Could not answer: Choice must be one of the question&#39;s choices: yes, no\.',
                     page)
    assert (await store.todo_get(ada, todo["id"]))["attempts"][0]["question"]["answers"] == []


async def test_an_expired_question_is_shown_expired_in_its_attempt_row_with_the_sweeps_note(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="deploy")
    await store.todo_claim(agent, todo["id"])
    await store.todo_interrupt(agent, todo["id"], question="Deploy now?", expires_in_seconds=60)
    assert await store.sweep_questions(now=datetime.now(timezone.utc) + timedelta(minutes=2)) == 1
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        drawer = (await c.get(f"/todos/{todo['id']}/drawer")).text
    assert 'aria-labelledby="question-heading"' not in drawer  # no longer waiting: no answer form
    row = drawer[drawer.index('id="attempt-1"'):]
    assert "Question, expired unanswered" in row
    assert re.search(r"<strong>Expired</strong> unanswered at <time[^>]*>[^<]+</time>; the todo was released", row)
    assert re.search(r'<span class="note-author">Switchboard</span> <span class="note-kind">noted the question '
                     r'expired</span>', row)


async def test_the_overview_counts_todos_waiting_for_a_person_and_links_them(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("deploys", "builds"))
    for title, state in (("a", "input_required"), ("b", "input_required"), ("c", "auth_required")):
        todo = await store.todo_add(agent, queue="deploys", title=title)
        await store.todo_claim(agent, todo["id"])
        await store.todo_interrupt(agent, todo["id"], state=state, question=f"{title}?")
    only = await store.todo_add(agent, queue="builds", title="d")
    await store.todo_claim(agent, only["id"])
    await store.todo_interrupt(agent, only["id"], question="d?")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        board = (await c.get("/")).text
    text = re.sub(r"\s+", " ", board)
    assert '<th scope="col" class="num">Waiting for a person</th>' in text
    assert ('<a href="/?state=input_required&amp;queue=deploys">2 input<span class="visually-hidden"> waiting for a '
            'person in deploys</span></a>') in text
    assert ('<a href="/?state=auth_required&amp;queue=deploys">1 auth<span class="visually-hidden"> (authorization) '
            'waiting for a person in deploys</span></a>') in text
    assert ('<a href="/?state=input_required&amp;queue=builds">1<span class="visually-hidden"> waiting for a person '
            'in builds</span></a>') in text


async def test_an_answer_reaches_every_open_drawer_of_the_todo_over_the_live_stream(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="deploy")
    await store.todo_claim(agent, todo["id"])
    await store.todo_interrupt(agent, todo["id"], question="Deploy now?", choices=["deploy now", "wait"])
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        async with open_stream(c, f"?todo={todo['id']}") as stream, open_stream(c) as listing:
            assert "Deploy now?" in stream.snapshot["drawer"]
            await store.todo_answer(ada, todo["id"], choice="deploy now")  # the NOTIFY kind "answered"
            fresh = await stream.next_todo(todo["id"])
            # A stream watching no drawer re-reads nothing by itself: this event is the notification's.
            assert (await listing.next_todo(todo["id"]))["gone"] is False
    assert 'data-announce="ada answered: deploy now"' in fresh["drawer"]
    assert "Answers so far" in fresh["drawer"]
