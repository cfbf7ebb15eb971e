"""The record of who did what on the Board, and a team's live Board: a todo's drawer lists its
records beside its attempts, the Activity page lists the space's records newest first with
filters and pages, a bad filter is a 400 naming it, a record never holds a token, a summary
or an artifact and is never written for a refused action; two members watching one team
each get its changes live, and only the other hears who made one; a member removed from the
team has their stream of it ended, whichever process removed them."""

from __future__ import annotations

import contextlib
import re
from datetime import datetime, timedelta, timezone

from board.store.store import Human
from board.web.activity import PAGE_ROWS
from tests.acceptance.test_board_auth import client_for, csrf_of, make_human, sign_in
from tests.acceptance.test_board_live import EventStream, open_stream
from tests.conftest import make_agent

SUMMARY = "the deploy key is in the vault under ops/deploy"


async def team_of(store, queues: tuple[str, ...] = ("deploys",), **members: str) -> tuple[dict, object]:
    """The team ops, made by ada (its admin), with each member (made too) at the role given,
    and an endpoint of the team's granted the queues."""
    for username in ("ada", *members):
        await make_human(store, username)
    team = await store.team_create("ops", owner="ada")
    space = await store.team_space("ops")
    for username, role in members.items():
        await store.team_member_set(space, username, role)
    return team, await make_agent(store, user=space, agent_id="deployer", queues=queues)


async def signed_in_team(client, username: str, team: dict) -> str:
    """The client signed in, its Board switched to the team's space."""
    csrf = await sign_in(client, username)
    r = await client.post("/space", data={"csrf_token": csrf, "space": str(team["id"])})
    assert r.status_code == 303
    return csrf


async def records_of(store) -> list[dict]:
    async with store.pool.connection() as conn:
        cur = await conn.execute("SELECT * FROM audit_records ORDER BY id")
        return await cur.fetchall()


def drawer_lines(html: str) -> list[str]:
    section = re.search(r'<section class="records".*?</section>', html, re.S)
    if section is None:
        return []
    return [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", li)).strip()
            for li in re.findall(r"<li id=\"record-\d+\">(.*?)</li>", section.group(0), re.S)]


async def test_the_drawer_lists_who_did_what_to_a_team_todo_after_board_and_command_line_actions(live_server):
    store = live_server.store
    team, agent = await team_of(store, bob="operator")
    todo = await store.todo_add(agent, queue="deploys", title="Deploy the API")
    other = await store.todo_add(agent, queue="deploys", title="Deploy the web app")
    async with client_for(live_server) as bob, client_for(live_server) as ada:
        csrf = await signed_in_team(bob, "bob", team)
        await signed_in_team(ada, "ada", team)
        r = await bob.post(f"/todos/{todo['id']}/priority", data={"csrf_token": csrf, "priority": "1"})
        assert r.status_code == 303
        r = await bob.post(f"/todos/{todo['id']}/cancel", data={"csrf_token": csrf})
        assert r.status_code == 303
        await store.todo_cancel(await store.team_space("ops"), other["id"])  # the command line

        drawer = await ada.get(f"/todos/{todo['id']}/drawer")
        assert drawer.status_code == 200
        lines = drawer_lines(drawer.text)
        assert [re.sub(r", \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$", "", line) for line in lines] == [
            "Priority set to P1 by bob", "Canceled by bob"], lines
        assert len(re.findall(r'<time datetime="\d{4}-\d\d-\d\dT[\d:.]+Z">', drawer.text.split('class="records"')[1]
                              .split("</section>")[0])) == 2
        # The records sit under the attempts.
        assert drawer.text.index('id="attempts-heading"') < drawer.text.index('id="records-heading"')
        page = await ada.get(f"/todos/{other['id']}")
        assert drawer_lines(page.text)[0].startswith("Canceled by the command line, ")


async def test_a_todo_nobody_acted_on_has_no_record_section_and_a_personal_todo_shows_its_owner(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w", queues=("q",))
    quiet = await store.todo_add(agent, queue="q", title="Left alone")
    mine = await store.todo_add(agent, queue="q", title="Canceled by hand")
    async with client_for(live_server) as c:
        csrf = await sign_in(c, "ada")
        assert (await c.post(f"/todos/{mine['id']}/cancel", data={"csrf_token": csrf})).status_code == 303
        assert 'class="records"' not in (await c.get(f"/todos/{quiet['id']}/drawer")).text
        assert [line.split(",")[0] for line in drawer_lines((await c.get(f"/todos/{mine['id']}/drawer")).text)] == [
            "Canceled by ada"]


async def person(store, name: str) -> Human:
    row = await store.user_by_name(name)
    return Human(row["id"], row["username"])


def activity_rows(html: str) -> list[dict]:
    """Each row of the Activity table as text: when, who, action, todo, queue, source."""
    body = re.search(r"<tbody>(.*?)</tbody>", html, re.S)
    if body is None:
        return []
    out = []
    for row in re.findall(r"<tr id=\"activity-\d+\">(.*?)</tr>", body.group(1), re.S):
        cells = [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", c)).strip()
                 for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
        out.append(dict(zip(("when", "who", "action", "todo", "queue", "source"), cells)))
    return out


async def test_the_activity_page_lists_the_spaces_records_newest_first_with_filters(live_server):
    store = live_server.store
    team, deployer = await team_of(store, ("deploys", "builds"), bob="operator")
    space = await store.team_space("ops")
    deploy = await store.todo_add(deployer, queue="deploys", title="Deploy")
    build = await store.todo_add(deployer, queue="builds", title="Build")
    await store.todo_cancel(await store.human_in(await person(store, "bob"), team["id"]), deploy["id"])
    await store.todos_set_priority(await store.human_in(await person(store, "ada"), team["id"]), [build["id"]], 0)
    await store.queue_pause(space, "builds")
    async with client_for(live_server) as c:
        await signed_in_team(c, "ada", team)
        r = await c.get("/activity")
        assert r.status_code == 200
        assert '<caption id="activity-caption">What people did in ops, newest first</caption>' in r.text
        rows = activity_rows(r.text)
        assert [(x["who"], x["action"], x["queue"], x["source"]) for x in rows] == [
            ("the command line", "Paused", "builds", "command line"), ("ada", "Priority set to P0", "builds", "Board"),
            ("bob", "Canceled", "deploys", "Board"), ("the command line", "Member set: bob as operator", "", "command line"),
            ("the command line", "Team created", "", "command line")], rows
        assert f'href="/todos/{deploy["id"]}"' in r.text and rows[0]["todo"] == ""
        assert '<a href="/activity" aria-current="page">Activity</a>' in r.text

        assert [x["who"] for x in activity_rows((await c.get("/activity?person=bob")).text)] == ["bob"]
        assert [x["action"] for x in activity_rows((await c.get("/activity?action=cancel")).text)] == ["Canceled"]
        assert [x["action"] for x in activity_rows((await c.get("/activity?queue=builds")).text)] == [
            "Paused", "Priority set to P0"]
        later = (datetime.now(timezone.utc) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
        empty = await c.get(f"/activity?since={later}")
        assert activity_rows(empty.text) == [] and "Nothing matches these filters." in empty.text
        assert len(activity_rows((await c.get(f"/activity?until={later}")).text)) == 5
    async with client_for(live_server) as own:
        await sign_in(own, "bob")  # Bob's own space: nothing of the team's
        assert activity_rows((await own.get("/activity")).text) == []


async def test_the_activity_page_pages_back_through_records_made_in_one_transaction(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w", queues=("q",))
    todos = [await store.todo_add(agent, queue="q", title=f"Todo {n}") for n in range(PAGE_ROWS + 7)]
    await store.todos_set_priority(ada, [t["id"] for t in todos], 1)  # one row each, all at one time
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        first = await c.get("/activity?action=set_priority")
        rows = activity_rows(first.text)
        assert len(rows) == PAGE_ROWS
        older = re.search(r'<a href="([^"]+)" id="activity-older"', first.text)
        assert older, "no link to the older records"
        second = await c.get(older.group(1).replace("&amp;", "&"))
        assert second.status_code == 200
        more = activity_rows(second.text)
        assert len(more) == 7 and 'id="activity-older"' not in second.text
        ids = re.findall(r'<tr id="activity-(\d+)">', first.text) + re.findall(r'<tr id="activity-(\d+)">', second.text)
        assert len(set(ids)) == PAGE_ROWS + 7 and ids == sorted(ids, key=int, reverse=True)  # each once, newest first
        assert "action=set_priority" in older.group(1)  # the filters stay on the next page


async def test_a_bad_activity_filter_is_a_400_naming_it_never_a_500(live_server):
    store = live_server.store
    await make_human(store, "ada")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        for query, named in (("person=no%20spaces", "person"), ("action=explode", "action"),
                             ("queue=a%20queue", "queue"), ("since=yesterday", "since"), ("until=2026-13-01", "until"),
                             ("since=2026-12-05&until=2026-12-04", "since"), ("cursor=garbage", "cursor"),
                             ("cursor=2026-12-05T12:00:00_12", "cursor"), ("person=%00", "person")):
            r = await c.get(f"/activity?{query}")
            assert r.status_code == 400, (query, r.status_code)
            assert f"The {named} " in r.text, (query, r.text[:2000])
            assert 'role="alert"' in r.text and 'aria-invalid="true"' in r.text or named == "cursor"


async def test_a_record_never_holds_a_token_a_summary_or_an_artifact(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w", queues=("q",))
    todo = await store.todo_add(agent, queue="q", title="Rotate the key")
    async with client_for(live_server) as c:
        csrf = await sign_in(c, "ada")
        assert (await c.post(f"/todos/{todo['id']}/claim", data={"csrf_token": csrf})).status_code == 303
        r = await c.post(f"/todos/{todo['id']}/complete", data={"csrf_token": csrf, "summary": SUMMARY})
        assert r.status_code == 303
    _, token = await store.endpoint_vend(ada, name="second", agent_id="second", queues=["q"], scope=["claim_next"])
    rows = await records_of(store)
    assert [r["action"] for r in rows] == ["claim", "complete", "vend"]
    text = repr(rows)
    for secret in (SUMMARY, token):
        assert secret not in text
    assert all(set(r["detail"]) <= {"agent_id", "name", "endpoint_id", "priority", "queue", "limit", "choice",
                                    "after_id", "delay_seconds", "username", "role", "title", "schedule_id", "owner"}
               for r in rows)


async def test_a_refused_or_missed_action_writes_no_record(live_server):
    store = live_server.store
    team, agent = await team_of(store, carol="viewer")
    todo = await store.todo_add(agent, queue="deploys", title="Keep running")
    done = await store.todo_add(agent, queue="deploys", title="Already done")
    await store.todo_cancel(agent, done["id"])
    before = await records_of(store)  # the team's making
    async with client_for(live_server) as viewer, client_for(live_server) as admin:
        csrf = await signed_in_team(viewer, "carol", team)
        r = await viewer.post(f"/todos/{todo['id']}/cancel", data={"csrf_token": csrf})  # a forged form
        assert r.status_code < 500
        admin_csrf = await signed_in_team(admin, "ada", team)
        r = await admin.post(f"/todos/{done['id']}/cancel", data={"csrf_token": admin_csrf})  # already ended: a miss
        assert r.status_code == 303
    assert (await store.todo_get(agent, todo["id"]))["state"] == "pending"
    assert await records_of(store) == before


# -- a team's Board, live -----------------------------------------------------------------

async def next_event(stream: EventStream, kind: str) -> dict:
    """Skips to the next event of that kind."""
    while True:
        event, data = await stream.next()
        if event == kind:
            return data


async def test_two_members_each_see_a_team_change_live_and_only_the_other_hears_who_made_it(live_server):
    store = live_server.store
    team, agent = await team_of(store, bob="operator")
    todo = await store.todo_add(agent, queue="deploys", title="Deploy the API")
    other = await store.todo_add(agent, queue="deploys", title="Deploy the web app")
    carol = await make_human(store, "carol")  # not a member: her own space only, even naming the team's
    carols_agent = await make_agent(store, user=carol, agent_id="hers", queues=("q",))
    hers = await store.todo_add(carols_agent, queue="q", title="Carol's own")
    async with client_for(live_server) as a, client_for(live_server) as b, client_for(live_server) as c:
        ada_csrf = await signed_in_team(a, "ada", team)
        bob_csrf = await signed_in_team(b, "bob", team)
        await signed_in_team(c, "carol", team)
        async with open_stream(a) as ada_stream, open_stream(b) as bob_stream, open_stream(c) as carol_stream:
            assert todo["id"] not in carol_stream.snapshot["rows"] and hers["id"] in carol_stream.snapshot["rows"]
            assert todo["id"] in ada_stream.snapshot["rows"] and todo["id"] in bob_stream.snapshot["rows"]
            r = await b.post(f"/todos/{todo['id']}/cancel", data={"csrf_token": bob_csrf})
            assert r.status_code == 303
            # Ada hears who did it, once, before the row it changed.
            said = [await ada_stream.next()]
            while said[-1][0] != "todo":
                said.append(await ada_stream.next())
            assert [e for e, _ in said].count("activity") == 1, said
            heard = next(d for e, d in said if e == "activity")
            assert heard == {"text": "Bob canceled todo Deploy the API", "todos": [todo["id"]]}
            assert said[-1][1]["id"] == todo["id"] and "state-canceled" in said[-1][1]["row"]
            # Bob sees the row change too, but is not told what he did himself: the next
            # activity he hears is Ada's, made after his.
            seen = [await bob_stream.next()]
            while seen[-1][0] != "todo":
                seen.append(await bob_stream.next())
            assert "state-canceled" in seen[-1][1]["row"] and "activity" not in [e for e, _ in seen], seen
            r = await a.post(f"/todos/{other['id']}/priority", data={"csrf_token": ada_csrf, "priority": "0"})
            assert r.status_code == 303
            assert (await next_event(bob_stream, "activity"))["text"] == "Ada set the priority of todo Deploy the web app"
            # Carol heard nothing of the team before her own todo's change, made after theirs.
            await store.todo_claim(carols_agent, hers["id"])
            heard = [await carol_stream.next()]
            while heard[-1][0] != "todo":
                heard.append(await carol_stream.next())
            assert heard[-1][1]["id"] == hers["id"] and "activity" not in [e for e, _ in heard], heard


@contextlib.asynccontextmanager
async def ada_and_bob_watching(live_server):
    """Ada (admin) and Bob (operator) each watching the team ops live: Bob's client and both streams."""
    store = live_server.store
    team, agent = await team_of(store, bob="operator")
    await store.todo_add(agent, queue="deploys", title="Watch me")
    async with client_for(live_server) as a, client_for(live_server) as b:
        await signed_in_team(a, "ada", team)
        await signed_in_team(b, "bob", team)
        async with open_stream(a) as ada_stream, open_stream(b) as bob_stream:
            yield b, ada_stream, bob_stream


async def test_a_removed_member_has_their_stream_of_the_team_ended_by_a_removal_in_another_process(live_server,
                                                                                                    store):
    """`store` is not the server's: its removal reaches the server only through LISTEN, as
    another process's would."""
    async with ada_and_bob_watching(live_server) as (b, ada_stream, bob_stream):
        await store.team_member_remove(await store.team_space("ops"), "bob")
        assert await next_event(bob_stream, "removed") == {"team": "ops"}
        try:
            event = await bob_stream.next()
        except EOFError:
            event = None
        assert event is None, event  # the stream ended
        # Ada stays, and hears of it.
        assert (await next_event(ada_stream, "activity"))["text"] == "The command line removed a member"
        # Bob's next request finds the team gone: his Board is his own space again.
        again = await b.get("/activity")
        assert again.status_code == 200 and "Nothing recorded yet." in again.text


async def test_a_members_new_role_ends_their_stream_so_it_comes_back_with_it(live_server):
    store = live_server.store
    async with ada_and_bob_watching(live_server) as (_, ada_stream, bob_stream):
        await store.team_member_set(await store.team_space("ops"), "bob", "viewer")
        events = []
        try:
            while True:
                events.append((await bob_stream.next())[0])
        except EOFError:
            pass
        assert "removed" not in events, events  # ended, not removed: the browser reconnects
        assert (await next_event(ada_stream, "activity"))["text"] == "The command line set a member's role"
