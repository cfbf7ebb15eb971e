"""The Board in a team's space over HTTP: the switcher, every Board action against every role
(a viewer's forged form refused with nothing changed and no record), a non-member's reads of
a team todo exactly as an id never minted (REQ-10), removal ending access on the next request
(in a second server process too), and the Members page."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pytest

from board.store import vocabulary
from tests.acceptance.test_board_auth import client_for, csrf_of, make_human, sign_in
from tests.conftest import run_server, sql_rows

NAMES = itertools.count(1)
NEVER = "5b1c7f1e-0000-4000-8000-000000000000"  # a todo id never minted
TABLES = ("todos", "attempts", "attempt_notes", "todo_deps", "audit_records", "queue_pauses", "queue_limits",
          "endpoints", "schedules", "team_members")


@pytest.fixture
def server_settings(server_settings):
    return server_settings.with_(reaper_interval_seconds=0, retry_interval_seconds=0)


async def db_state(url: str) -> dict:
    """Every row of the tables a Board action may change, as text: equal before and after
    means nothing changed."""
    out = {}
    for table in TABLES:
        rows = await sql_rows(url, f"SELECT to_jsonb(t)::text AS r FROM {table} t ORDER BY 1")  # noqa: S608 (fixed names)
        out[table] = sorted(r["r"] for r in rows)
    return out


@dataclass
class Team:
    space: object  # the command line's Human in the team
    agent: object  # a team endpoint's agent, queue q
    endpoint_id: str
    people: dict  # role -> person's username
    store: object


async def make_team(store) -> Team:
    names = {"admin": "ada", "operator": "ola", "viewer": "vic"}
    for name in (*names.values(), "eve"):
        await make_human(store, name)
    await store.team_create("platform", owner="ada")
    space = await store.team_space("platform")
    for role in ("operator", "viewer"):
        await store.team_member_set(space, names[role], role)
    row, token = await store.endpoint_vend(space, name="w", agent_id="w", queues=["q"], scope=list(vocabulary.VERBS))
    return Team(space, await store.endpoint_authenticate(token), row["id"], names, store)


async def in_team(c, username: str) -> str:
    """Signs in and switches the Board to the team; returns the CSRF token."""
    return await switch_to_team(c, await sign_in(c, username))


async def switch_to_team(c, csrf: str) -> str:
    board = (await c.get("/")).text
    team_id = re.search(r'<option value="(\d+)"[^>]*>platform', board).group(1)
    r = await c.post("/space", data={"csrf_token": csrf, "space": team_id})
    assert r.status_code == 303
    return csrf


# -- each Board action: what it needs, the request, and the role it takes ---------------------

async def pending(team, **kw):
    return (await team.store.todo_add(team.agent, queue="q", title="a todo", **kw))["id"]


async def claimed(team):
    tid = await pending(team)
    await team.store.todo_claim(team.agent, tid)
    return tid


async def dead(team):
    tid = await pending(team, max_attempts=1)
    await team.store.todo_claim(team.agent, tid)
    await team.store.todo_fail(team.agent, tid, summary="no")
    return tid


async def done(team):
    tid = await claimed(team)
    await team.store.todo_complete(team.agent, tid, summary="ok")
    return tid


async def asked(team):
    tid = await claimed(team)
    await team.store.todo_interrupt(team.agent, tid, question="deploy now?")
    return tid


async def waiting(team):
    first = await pending(team)
    return f"{await pending(team, after=[first])}?after={first}"


async def scheduled(team):
    return await pending(team, run_at=(datetime.now(timezone.utc) + timedelta(hours=2)).isoformat())


async def a_schedule(team):
    return (await team.store.schedule_add(team.space, queue="q", title="nightly", cron="0 3 * * *",
                                          timezone="UTC"))["id"]


async def an_endpoint(team):
    name = f"x{next(NAMES)}"
    row, _ = await team.store.endpoint_vend(team.space, name=name, agent_id=name, queues=["q"], scope=["list_todos"])
    return row["id"]


async def nothing(team):
    return ""


def todo_post(action, **data):
    def request(target):
        tid, _, after = target.partition("?after=")
        return f"/todos/{tid}/{action}", data | ({"after_id": after} if after else {})
    return request


ACTIONS = {  # name: (role it takes, setup, request(target) -> (path, data), record action)
    "claim": ("operator", pending, todo_post("claim"), "claim"),
    "release": ("operator", claimed, todo_post("release"), "release"),
    "fail": ("operator", claimed, todo_post("fail"), "fail"),
    "retry": ("operator", dead, todo_post("retry"), "retry"),
    "cancel": ("operator", pending, todo_post("cancel"), "cancel"),
    "start-now": ("operator", scheduled, todo_post("start-now"), "start_now"),
    "priority": ("operator", pending, todo_post("priority", priority="0"), "set_priority"),
    "note": ("operator", claimed, todo_post("note", text="look here"), "note"),
    "answer": ("operator", asked, todo_post("answer", text="yes"), "answer"),
    "drop-dependency": ("operator", waiting, todo_post("drop-dependency"), "drop_dependency"),
    "delete": ("operator", done, lambda t: (f"/todos/{t}/delete", {}), "delete"),
    "bulk": ("operator", pending, lambda t: ("/todos/bulk/apply", {"action": "cancel", "ids": t}), "cancel"),
    "add": ("operator", nothing, None, "add"),  # the request names the team endpoint: see request_of
    "pause": ("admin", nothing, lambda t: ("/queues/q/pause", {"next": "/"}), "pause"),
    "limit": ("admin", nothing, lambda t: ("/queues/q/limit", {"next": "/", "limit": "3"}), "set_limit"),
    "vend": ("admin", nothing, lambda t: ("/endpoints", {"name": "new", "agent_id": "new", "queues": "q",
                                                         "verbs": "list_todos"}), "vend"),
    "revoke": ("admin", an_endpoint, lambda t: (f"/endpoints/{t}/revoke", {}), "revoke"),
    "schedule-add": ("admin", nothing, lambda t: ("/schedules", {
        "queue": "q", "title": "hourly", "cron": "", "timezone": "UTC", "every": "3600", "payload": "",
        "priority": "2", "max_attempts": "3", "action": "add"}), "schedule_add"),
    "schedule-pause": ("admin", a_schedule, lambda t: (f"/schedules/{t}/pause", {}), "schedule_pause"),
    "schedule-remove": ("admin", a_schedule, lambda t: (f"/schedules/{t}/remove", {}), "schedule_remove"),
    "member-set": ("admin", nothing, lambda t: ("/members", {"username": "eve", "role": "viewer"}), "member_set"),
    "member-remove": ("admin", nothing, lambda t: ("/members/vic/remove", {}), "member_remove"),
}


def request_of(name: str, team: Team, target: str):
    if name == "add":
        return "/todos/new", {"target": f"{team.endpoint_id}:q", "title": "added", "priority": "2",
                              "max_attempts": "3", "start_offset": "+00:00"}
    return ACTIONS[name][2](target)


@pytest.mark.parametrize("name", list(ACTIONS))
async def test_each_board_action_by_role_viewer_refused_operator_on_todos_admin_all(live_server, name):
    store, url = live_server.store, live_server.settings.database_url
    team = await make_team(store)
    needs, setup, _, recorded = ACTIONS[name]
    for role in ("viewer", "operator", "admin"):
        target = await setup(team)
        path, data = request_of(name, team, target)
        async with client_for(live_server) as c:
            csrf = await in_team(c, team.people[role])
            before = await db_state(url)
            r = await c.post(path, data=data | {"csrf_token": csrf})
            after = await db_state(url)
        allowed = vocabulary.ROLES.index(role) >= vocabulary.ROLES.index(needs)
        if allowed:
            assert r.status_code in (201, 303), (name, role, r.status_code, r.text[:300])
            records = await sql_rows(url, "SELECT a.action, u.username FROM audit_records a JOIN users u "
                                          "ON u.id = a.actor_id ORDER BY a.id DESC LIMIT 1")
            assert records == [{"action": recorded, "username": team.people[role]}], (name, role)
            assert after != before
        else:
            assert r.status_code == 403, (name, role, r.status_code)
            assert "may not" in r.text and "<title>That did not work" in r.text
            assert after == before, (name, role)  # nothing changed, no record written


async def test_a_non_member_gets_exactly_what_a_never_minted_id_gets(live_server):
    store = live_server.store
    team = await make_team(store)
    ids = {"pending": await pending(team), "asked": await asked(team)}
    waits = await waiting(team)
    ids["waiting"], _, after = waits.partition("?after=")
    before = await db_state(live_server.settings.database_url)
    async with client_for(live_server) as c:
        csrf = await sign_in(c, "eve")
        for tid in ids.values():
            for path in ("", "/drawer", "/confirm-cancel", f"/confirm-drop?after_id={after}"):
                foreign, never = await c.get(f"/todos/{tid}{path}"), await c.get(f"/todos/{NEVER}{path}")
                assert foreign.status_code == never.status_code == 404, path
                assert foreign.content == never.content.replace(NEVER.encode(), tid.encode()), path
            for action, data in (("claim", {}), ("answer", {"text": "yes"}), ("drop-dependency", {"after_id": after}),
                                 ("note", {"text": "x"}), ("confirm-delete", {}), ("delete", {})):
                foreign = await c.post(f"/todos/{tid}/{action}", data=data | {"csrf_token": csrf})
                never = await c.post(f"/todos/{NEVER}/{action}", data=data | {"csrf_token": csrf})
                assert foreign.status_code == never.status_code == 404, action
                assert foreign.content == never.content, action
            # a bulk form naming it: as an id never minted
            bulk = [await c.post("/todos/bulk", data={"csrf_token": csrf, "action": "cancel", "ids": i})
                    for i in (tid, NEVER)]
            assert bulk[0].status_code == bulk[1].status_code == 200
            assert bulk[0].content == bulk[1].content.replace(NEVER.encode(), tid.encode())
            # its live stream: the same first frame as an id never minted
            frames = [await first_frame(c, i) for i in (tid, NEVER)]
            assert frames[0] == frames[1].replace(NEVER, tid) and '"gone":true' in frames[0]
    assert await db_state(live_server.settings.database_url) == before  # nothing changed, nothing recorded


async def first_frame(c, todo_id: str) -> str:
    async with c.stream("GET", f"/events?todo={todo_id}" if todo_id else "/events") as r:
        assert r.status_code == 200
        async for line in r.aiter_lines():
            if line.startswith("data:"):
                return re.sub(r'"csrf[^"]*":"[^"]*"', "", line)
    raise AssertionError("no frame")


async def test_a_team_todo_url_works_for_a_member_whichever_space_the_board_shows(live_server):
    store = live_server.store
    team = await make_team(store)
    tid = await pending(team)
    async with client_for(live_server) as c:
        await sign_in(c, "vic")  # the Board shows vic's own space
        own = (await c.get("/")).text
        assert "a todo" not in own and "<title>Board · Switchboard</title>" in own
        r = await c.get(f"/todos/{tid}")
        assert r.status_code == 200 and "a todo" in r.text and " · platform · Switchboard</title>" in r.text
        assert f'action="/todos/{tid}/claim"' not in r.text and "you can see this todo, not act on it" in r.text
        frame = await first_frame(c, tid)  # its live stream too, in the todo's space
        assert '"gone":false' in frame and "a todo" in frame


async def test_a_member_who_claims_a_team_todo_is_its_holder_you(live_server):
    store = live_server.store
    team = await make_team(store)
    tid = await pending(team)
    async with client_for(live_server) as c:
        csrf = await in_team(c, "ola")
        r = await c.post(f"/todos/{tid}/claim", data={"csrf_token": csrf}, follow_redirects=True)
        assert r.status_code == 200 and f'formaction="/todos/{tid}/complete"' in r.text
        row = re.search(r'<tr id="todo-%s".*?</tr>' % tid, (await c.get("/")).text, re.S).group(0)
        assert '<td data-label="Holder">you' in row


async def test_the_switcher_shows_the_team_space_and_a_foreign_space_is_refused(live_server):
    store = live_server.store
    team = await make_team(store)
    await pending(team)
    await store.team_create("other", owner="eve")
    other = await store.team_space("other")
    async with client_for(live_server) as c:
        csrf = await sign_in(c, "ola")
        board = (await c.get("/")).text
        assert '<label for="space-select">Space</label>' in board
        assert re.search(r'<option value="\d+" selected>ola \(yours\)</option>', board)
        r = await c.post("/space", data={"csrf_token": csrf, "space": str(other.user_id)})  # not ola's
        assert r.status_code == 303
        still = (await c.get("/")).text
        assert "That space is not one of yours" in still and "a todo" not in still
        await switch_to_team(c, csrf)
        board = (await c.get("/")).text
        assert "<title>Board · platform · Switchboard</title>" in board and "a todo" in board
        assert 'href="/members"' in board and "platform's todos" in board
        for path, title, heading in (("/agents", "Agents", "platform's agents"),
                                     ("/schedules", "Schedules", "platform has no schedules yet"),
                                     ("/endpoints", "Endpoints", "platform's endpoints")):
            shown = (await c.get(path)).text
            assert f"<title>{title} · platform · Switchboard</title>" in shown and heading in shown, path
        # the team's endpoint is on its Endpoints page, with no admin control for an operator
        endpoints = (await c.get("/endpoints")).text
        assert "<code>w</code>" in endpoints and "Vend an endpoint" not in endpoints and "/revoke" not in endpoints
    async with client_for(live_server) as c:
        await sign_in(c, "eve")  # in no team of ada's: no switcher to it
        board = (await c.get("/")).text
        assert "platform" not in board


async def test_a_viewer_sees_no_action_control(live_server):
    store = live_server.store
    team = await make_team(store)
    ids = [await pending(team), await claimed(team), await asked(team), await dead(team), await done(team)]
    waits = await waiting(team)
    await a_schedule(team)
    async with client_for(live_server) as c:
        await in_team(c, "vic")
        pages = [(await c.get(p)).text for p in ("/", "/endpoints", "/schedules", "/members")]
        frame = await first_frame(c, "")  # the live overview: no pause or limit form either
        assert "/queues/" not in frame and "queue-q-name" in frame
        forged = await c.post("/todos/bulk", data={"csrf_token": csrf_of(pages[0]), "action": "cancel", "ids": ids[0]})
        assert forged.status_code == 403  # not even the bulk confirmation
        pages += [(await c.get(f"/todos/{t}")).text for t in ids + [waits.partition("?")[0]]]
    for text in pages:
        main = text[text.index("<main"):]
        forms = re.findall(r'<form method="post" action="([^"]*)"', main)
        assert forms in ([], ["/chart"]), forms  # the chart's window is a view, not an action
        assert 'name="ids"' not in main and "Add a todo" not in main and "confirm-" not in main
        assert "/revoke" not in main and "/remove" not in main


async def test_removal_ends_access_on_the_next_request_in_every_process(live_server):
    store = live_server.store
    team = await make_team(store)
    tid = await pending(team)
    async with run_server(live_server.settings) as second, client_for(live_server) as c, client_for(second) as c2:
        await in_team(c, "ola")
        cookie = c.cookies.get("sb_session")
        c2.cookies.set("sb_session", cookie)  # the same session in another server process
        for client in (c, c2):
            assert (await client.get(f"/todos/{tid}")).status_code == 200
            assert "a todo" in (await client.get("/")).text
        await store.team_member_remove(team.space, "ola")
        for client in (c2, c):
            r = await client.get(f"/todos/{tid}")
            never = await client.get(f"/todos/{NEVER}")
            assert r.status_code == 404 and r.content == never.content.replace(NEVER.encode(), tid.encode())
            board = (await client.get("/")).text
            assert "a todo" not in board and "platform" not in board and "<title>Board · Switchboard</title>" in board


async def test_the_members_page_adds_changes_and_removes_and_keeps_the_last_admin(live_server):
    store, url = live_server.store, live_server.settings.database_url
    await make_team(store)
    async with client_for(live_server) as c:
        csrf = await in_team(c, "ada")
        page = (await c.get("/members")).text
        assert "<caption" in page and "The members of platform" in page
        for who, role in (("ada", "admin"), ("ola", "operator"), ("vic", "viewer")):
            row = re.search(r'<tr id="member-%s">.*?</tr>' % who, page, re.S).group(0)
            assert f'<td data-label="Role">{role}</td>' in row
        assert '<label for="member-username">Username</label>' in page and '<label for="member-role">Role</label>' in page
        r = await c.post("/members", data={"csrf_token": csrf, "username": "eve", "role": "operator"}, follow_redirects=True)
        assert "Added eve to platform as an operator." in r.text
        r = await c.post("/members", data={"csrf_token": csrf, "username": "eve", "role": "admin"}, follow_redirects=True)
        assert "eve is now an admin of platform (was operator)." in r.text
        r = await c.post("/members", data={"csrf_token": csrf, "username": "nobody", "role": "viewer"},
                         follow_redirects=True)
        assert "Could not set the role: no person named nobody." in r.text
        confirm = await c.get("/members/vic/remove")
        assert confirm.status_code == 200 and "Remove vic from platform?" in confirm.text
        assert (await c.get("/members/nobody/remove")).status_code == 404
        r = await c.post("/members/vic/remove", data={"csrf_token": csrf}, follow_redirects=True)
        assert "Removed vic from platform." in r.text and 'id="member-vic"' not in r.text
        await c.post("/members", data={"csrf_token": csrf, "username": "eve", "role": "viewer"})
        r = await c.post("/members", data={"csrf_token": csrf, "username": "ada", "role": "operator"},
                         follow_redirects=True)
        assert "ada is the last admin of platform" in r.text and 'role="alert"' in r.text
        r = await c.post("/members/ada/remove", data={"csrf_token": csrf}, follow_redirects=True)
        assert "Could not remove ada: ada is the last admin of platform" in r.text
    members = await sql_rows(url, "SELECT u.username, m.role::text AS role FROM team_members m "
                                  "JOIN users u ON u.id = m.user_id ORDER BY 1")
    assert members == [{"username": "ada", "role": "admin"}, {"username": "eve", "role": "viewer"},
                       {"username": "ola", "role": "operator"}]
    actions = [r["action"] for r in await sql_rows(url, "SELECT action FROM audit_records ORDER BY id")]
    assert actions.count("member_remove") == 1


async def test_an_operator_sees_the_members_but_no_member_control(live_server):
    await make_team(live_server.store)
    async with client_for(live_server) as c:
        await in_team(c, "ola")
        page = (await c.get("/members")).text
        assert 'id="member-ada"' in page and "Add a member" not in page and "/remove" not in page
        assert (await c.get("/members/vic/remove")).status_code == 403
    async with client_for(live_server) as c:
        await sign_in(c, "ola")  # their own space has no members page
        assert (await c.get("/members")).status_code == 404


async def test_the_vend_form_in_a_team_space_makes_a_team_endpoint(live_server):
    store, url = live_server.store, live_server.settings.database_url
    team = await make_team(store)
    async with client_for(live_server) as c:
        csrf = await in_team(c, "ada")
        r = await c.post("/endpoints", data={"csrf_token": csrf, "name": "pool", "agent_id": "pool-1",
                                             "queues": "q", "verbs": "list_todos"})
        assert r.status_code == 201
    rows = await sql_rows(url, "SELECT user_id, space_id FROM endpoints WHERE agent_id = 'pool-1'")
    assert rows == [{"user_id": team.space.user_id, "space_id": rows[0]["space_id"]}] and rows[0]["space_id"]
    record = await sql_rows(url, "SELECT a.action, a.space_id, u.username FROM audit_records a "
                                 "JOIN users u ON u.id = a.actor_id WHERE a.action = 'vend'")
    assert record == [{"action": "vend", "space_id": team.space.user_id, "username": "ada"}]
