"""The Board's forms over HTTP: adding a todo (through the store's add, ringing the doorbell,
live on the list), its JSON errors next to their fields, Cancel asking first, the vend form's
every error at once, and the not-found page keeping the navigation for a signed-in human."""

from __future__ import annotations

import html
import re

import pytest

from tests.acceptance.mcp_helpers import vend
from tests.acceptance.test_board_auth import client_for, csrf_of, make_human, sign_in
from tests.acceptance.test_board_live import open_stream
from tests.acceptance.test_mcp_doorbell import legacy_session, uri
from tests.conftest import make_agent


@pytest.fixture
def server_settings(server_settings):
    return server_settings.with_(reaper_interval_seconds=0, retry_interval_seconds=0)


def options(page: str) -> dict[str, str]:
    """The add form's queue choices: label -> value."""
    select = re.search(r'<select id="add-target".*?</select>', page, re.S).group(0)
    return {html.unescape(label): html.unescape(value)
            for value, label in re.findall(r'<option value="([^"]+)"[^>]*>([^<]+)</option>', select)}


def field_error(page: str, name: str) -> str | None:
    m = re.search(r'<p class="field-error" id="%s-error">.*?</span>(.*?)</p>' % name, page, re.S)
    return html.unescape(m.group(1)) if m else None


def control(page: str, control_id: str) -> str:
    return re.search(r'<(?:input|textarea|select) id="%s"[^>]*>' % control_id, page).group(0)


async def test_a_todo_added_from_the_board_goes_through_the_store_rings_the_doorbell_and_appears_live(live_server):
    store = live_server.store
    ada, bob = await make_human(store, "ada"), await make_human(store, "bob")
    ep = await vend(store, user_id=ada.user_id, agent_id="fixer", queues=("builds", "docs"))
    old = await make_agent(store, user=ada, agent_id="old", queues=("retired",))
    await store.endpoint_revoke(old.endpoint_id, user_id=ada.user_id)
    await make_agent(store, user=bob, agent_id="bobs", queues=("bobq",))
    async with client_for(live_server) as c, legacy_session(live_server, ep.token, ep.endpoint_id) as (_, inbox):
        token = await sign_in(c, "ada")
        assert 'href="/todos/new"' in (await c.get("/")).text
        form = (await c.get("/todos/new?queue=docs")).text
        choices = options(form)
        assert choices == {"builds": f"{ep.endpoint_id}:builds", "docs": f"{ep.endpoint_id}:docs"}
        assert re.search(r'<option value="[^"]+:docs" selected>', form)
        async with open_stream(c) as stream:
            r = await c.post("/todos/new", data={"csrf_token": token, "target": choices["builds"],
                                                 "title": "Bump <the> version", "payload": '{"repo": "switchboard"}',
                                                 "routing": '{"lane": "ci"}', "max_attempts": "3"})
            assert r.status_code == 303 and r.headers["location"] == "/"
            [todo] = (await store.todo_list(ada))["todos"]
            live = await stream.next_todo(todo["id"])
            assert live["matches"] and "Bump &lt;the&gt; version" in live["row"]
        await inbox.wait_for(uri(todo["id"]))  # the endpoint's session was rung
        landed = (await c.get("/")).text
    assert "Added “Bump &lt;the&gt; version” to queue builds. It is pending." in landed
    assert (todo["endpoint_id"], todo["queue"], todo["state"]) == (ep.endpoint_id, "builds", "pending")
    assert (todo["payload"], todo["routing"], todo["max_attempts"]) == ({"repo": "switchboard"}, {"lane": "ci"}, 3)


async def test_the_add_form_shows_every_error_next_to_its_field_and_keeps_what_was_typed(live_server):
    store = live_server.store
    ada, bob = await make_human(store, "ada"), await make_human(store, "bob")
    agent = await make_agent(store, user=ada, agent_id="fixer", queues=("builds",))
    bobs = await make_agent(store, user=bob, agent_id="bobs", queues=("bobq",))
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        r = await c.post("/todos/new", data={"csrf_token": token, "target": "", "title": "  ",
                                             "payload": '{"repo": "x",}', "routing": "[1, 2]", "max_attempts": "0"})
        assert r.status_code == 400
        page = r.text
        assert 'role="alert"' in page and "Fix these 5 problems" in page
        expected = {
            "add-target": "Choose a queue of one of your live endpoints.",
            "add-title": "Give the todo a title.",
            "add-payload": "Payload is not valid JSON: Expecting property name enclosed in double quotes "
                           "at line 1, column 14.",
            "add-routing": 'Routing must be a JSON object, like {"key": "value"}.',
            "add-max_attempts": "Max attempts must be a whole number from 1 to 1000.",
        }
        for name, message in expected.items():
            assert field_error(page, name) == message, name
            tag = control(page, name)
            assert 'aria-invalid="true"' in tag and f'aria-describedby="{name}-help {name}-error"' in tag
            assert f'<a href="#{name}">' in page  # the summary links to the field
        assert '>{&#34;repo&#34;: &#34;x&#34;,}</textarea>' in page and ">[1, 2]</textarea>" in page
        assert 'value="0"' in control(page, "add-max_attempts")
        # One good field among bad ones is not marked; a forged queue (Bob's endpoint) is refused.
        r = await c.post("/todos/new", data={"csrf_token": token, "target": f"{bobs.endpoint_id}:bobq",
                                             "title": "sneaky", "payload": "", "routing": "", "max_attempts": ""})
        assert r.status_code == 400 and field_error(r.text, "add-target")
        assert 'aria-invalid' not in control(r.text, "add-title") and 'value="sneaky"' in r.text
        # The endpoint revoked after the form was drawn: refused, and no form to try again.
        await store.endpoint_revoke(agent.endpoint_id, user_id=ada.user_id)
        r = await c.post("/todos/new", data={"csrf_token": token, "target": f"{agent.endpoint_id}:builds",
                                             "title": "late", "payload": "", "routing": "", "max_attempts": "5"})
        assert r.status_code == 400 and "Choose a queue of one of your live endpoints." in r.text
        assert "You have no live endpoint" in r.text and "<form method=\"post\" action=\"/todos/new\"" not in r.text
        assert (await c.post("/todos/new", data={"title": "no token"})).status_code == 403
    assert (await store.todo_list(ada))["todos"] == [] and (await store.todo_list(bob))["todos"] == []


async def test_a_credential_typed_into_the_add_form_is_shown_beside_its_field_and_nothing_is_added(live_server):
    """Title, payload and routing are screened like an agent's add: each credential is named
    by its kind next to its field (never echoed in the message), and look-alikes pass."""
    store = live_server.store
    ada = await make_human(store, "ada")
    ep = await vend(store, user_id=ada.user_id, agent_id="fixer", queues=("builds",))
    jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" + ".eyJzdWIiOiJhZGEifQ." + "Sg" * 22
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        r = await c.post("/todos/new", data={
            "csrf_token": token, "target": f"{ep.endpoint_id}:builds", "title": f"replay session {jwt}",
            "payload": '{"dsn": "postgresql://app:' + 'Winter2024@db/app"}', "routing": '{"password": "Winter2024"}',
            "max_attempts": "5"})
        assert r.status_code == 400 and "Fix these 3 problems" in r.text
        for name, what in (("add-title", "a JWT"), ("add-payload", "a URL with a password"),
                           ("add-routing", "a password")):
            error = field_error(r.text, name)
            assert error and f"({what})" in error and "must not contain secrets" in error, name
            assert "Winter2024" not in error and jwt not in error
        assert (await store.todo_list(ada))["todos"] == []
        r = await c.post("/todos/new", data={
            "csrf_token": token, "target": f"{ep.endpoint_id}:builds", "title": "the password reset flow",
            "payload": '{"password": "see vault", "sha": "3f2a9c0d1e2b4a5f6789abcdef0123456789abcd"}',
            "routing": '{"clone": "ssh://git@github.com/org/repo.git"}', "max_attempts": "5"})
        assert r.status_code == 303
    [todo] = (await store.todo_list(ada))["todos"]
    assert todo["title"] == "the password reset flow" and todo["payload"]["password"] == "see vault"


async def test_cancel_asks_for_confirmation_first(live_server):
    store = live_server.store
    ada, bob = await make_human(store, "ada"), await make_human(store, "bob")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="Maybe <later>")
    await store.todo_claim(agent, todo["id"], claimant="run-1")
    theirs = await store.todo_add(await make_agent(store, user=bob, agent_id="w2"), queue="q", title="bob's")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        drawer = (await c.get(f"/todos/{todo['id']}")).text
        assert f'href="/todos/{todo["id"]}/confirm-cancel">Cancel todo…</a>' in drawer
        assert f'action="/todos/{todo["id"]}/cancel"' not in drawer  # no one-click cancel
        page = await c.get(f"/todos/{todo['id']}/confirm-cancel")
        assert page.status_code == 200 and "Cancel todo Maybe &lt;later&gt;?" in page.text
        assert "open attempt closes as <em>canceled</em>" in page.text
        assert (await store.todo_get(ada, todo["id"]))["state"] == "claimed"  # asking changed nothing
        r = await c.post(f"/todos/{todo['id']}/cancel", data={"csrf_token": csrf_of(page.text)})
        assert r.status_code == 303
        got = await store.todo_get(ada, todo["id"])
        assert got["state"] == "canceled" and got["attempts"][0]["outcome"] == "canceled"
        # Nothing left to cancel: back to the drawer, saying why.
        again = await c.get(f"/todos/{todo['id']}/confirm-cancel")
        assert again.status_code == 303 and again.headers["location"] == f"/todos/{todo['id']}"
        foreign = await c.get(f"/todos/{theirs['id']}/confirm-cancel")
        random = await c.get("/todos/5b1c7f1e-0000-4000-8000-000000000000/confirm-cancel")
        assert foreign.status_code == random.status_code == 404 and foreign.content == random.content


async def test_the_vend_form_reports_every_error_at_once_next_to_each_field(live_server):
    store = live_server.store
    await make_human(store, "ada")
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        r = await c.post("/endpoints", data={"csrf_token": token, "name": "Fixer", "agent_id": "no spaces",
                                             "queues": "ok, bad/queue"})
        assert r.status_code == 400 and "Fix these 3 problems" in r.text
        assert field_error(r.text, "ep-agent") == "Agent id must be 1-128 of letters, digits, _ . : / -."
        assert field_error(r.text, "ep-queues") == "The queue 'bad/queue' must be 1-64 of letters, digits, _ . : -."
        assert field_error(r.text, "ep-verbs") == "Grant at least one verb."
        for name in ("ep-agent", "ep-queues"):
            tag = control(r.text, name)
            assert 'aria-invalid="true"' in tag and f"{name}-error" in tag
        assert 'aria-describedby="ep-verbs-error"' in r.text
        assert 'value="no spaces"' in r.text and 'value="ok, bad/queue"' in r.text and 'value="Fixer"' in r.text
    assert await store.endpoints_of_user((await store.user_by_name("ada"))["id"]) == []


async def test_the_not_found_page_keeps_the_navigation_and_sign_out_for_a_signed_in_human(live_server):
    await make_human(live_server.store, "ada")
    async with client_for(live_server) as c:
        anonymous = await c.get("/no/such/page")
        assert anonymous.status_code == 404 and 'aria-label="Main"' not in anonymous.text
        await sign_in(c, "ada")
        for path in ("/no/such/page", "/todos/a/b/c", "/static/nothing-here.js"):
            r = await c.get(path)
            assert r.status_code == 404 and "Not found" in r.text, path
            assert '<nav aria-label="Main">' in r.text and 'href="/endpoints"' in r.text, path
            assert "Signed in as <strong>ada</strong>" in r.text and ">Sign out</button>" in r.text, path
            assert r.headers["content-security-policy"].startswith("default-src 'self'")
        signed_out = await c.post("/logout", data={"csrf_token": csrf_of(r.text)})  # its Sign out form works
        assert signed_out.status_code == 303 and signed_out.headers["location"] == "/login"


async def test_continue_in_a_new_todo_from_the_drawer_adds_the_next_link_of_the_chain(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="reviewer", queues=("reviews", "other"))
    done = await store.todo_add(agent, queue="reviews", title="Write <the> parser")
    await store.todo_claim(agent, done["id"])
    await store.todo_complete(agent, done["id"], summary="review: needs tests")
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        drawer = (await c.get(f"/todos/{done['id']}")).text
        assert f'href="/todos/new?continues={done["id"]}"' in drawer
        form = (await c.get(f"/todos/new?continues={done['id']}")).text
        assert "This todo continues “Write &lt;the&gt; parser”" in form
        assert re.search(r'<option value="[^"]+:reviews" selected>', form)
        assert 'value="Continue: Write &lt;the&gt; parser"' in control(form, "add-title")
        target = options(form)["reviews"]
        r = await c.post("/todos/new", data={"csrf_token": token, "target": target, "title": "Add the tests",
                                             "max_attempts": "5", "continues": done["id"]})
        assert r.status_code == 303, r.text
        got = await store.todo_get(ada, done["id"])
        assert got["continued_by_id"] is not None
        assert "Continue in a new todo" not in (await c.get(f"/todos/{done['id']}")).text
        # a second continuation of the same todo is refused next to the field, naming the first
        again = await c.post("/todos/new", data={"csrf_token": token, "target": target, "title": "Again",
                                                 "max_attempts": "5", "continues": done["id"]})
        assert again.status_code == 400
        assert got["continued_by_id"] in field_error(again.text, "add-continues")
    chain = (await store.todo_get(ada, got["continued_by_id"]))["chain"]
    assert [link["title"] for link in chain] == ["Write <the> parser", "Add the tests"]
