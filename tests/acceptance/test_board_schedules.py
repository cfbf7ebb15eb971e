"""The Schedules page over HTTP without JavaScript: the Preview button shows the next three
runs in the schedule's zone and adds nothing, a bad field is a 400 naming it (never a 500),
the live preview's JSON, another human's schedule is the not-found page, and a form without
its CSRF token is refused."""

from __future__ import annotations

from tests.acceptance.test_board_auth import client_for, make_human, sign_in
from tests.conftest import make_agent

GOOD = {"queue": "reports", "title": "Weekday report", "cron": "0 9 * * 1-5", "timezone": "Europe/Berlin",
        "every": "", "payload": "", "priority": "2", "max_attempts": "5"}


async def _ada_with_reports(server):
    """ada, with an endpoint granted the queue reports."""
    ada = await make_human(server.store, "ada")
    await make_agent(server.store, user=ada, agent_id="w", queues=("reports",))
    return server.store, ada


async def test_preview_shows_three_runs_in_the_zone_and_adds_nothing(live_server):
    store, ada = await _ada_with_reports(live_server)
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        r = await c.post("/schedules", data=GOOD | {"csrf_token": token, "action": "preview"})
        assert r.status_code == 200
        assert r.text.count(" 09:00 (+0") == 3 and 'aria-live="polite"' in r.text
        assert await store.schedules_list(ada.user_id) == []
        r = await c.get("/schedules/preview", params={"every": "90", "timezone": "UTC"})
        assert r.status_code == 200 and len(r.json()["times"]) == 3
        r = await c.get("/schedules/preview", params={"cron": "0 9 * * 1-5", "timezone": "Nowhere/Else"})
        assert r.json()["field"] == "timezone" and "is not a known IANA time zone" in r.json()["error"]


async def test_bad_fields_are_a_400_naming_each_never_a_500(live_server):
    store, ada = await _ada_with_reports(live_server)
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        for bad, field in [({"cron": "0 25 * * *"}, "cron"), ({"timezone": "Mars/Base"}, "timezone"),
                           ({"cron": "", "every": "0"}, "every"), ({"cron": "", "every": ""}, "cron"),
                           ({"payload": "[1]"}, "payload"), ({"priority": "9"}, "priority"),
                           ({"queue": "elsewhere"}, "queue"), ({"title": " "}, "title"),
                           ({"max_attempts": "x"}, "max_attempts"), ({"cron": "0 0 30 2 *"}, "cron"),
                           ({"timezone": "../../etc/passwd"}, "timezone")]:
            r = await c.post("/schedules", data=GOOD | bad | {"csrf_token": token, "action": "add"})
            assert r.status_code == 400, (bad, r.status_code)
            assert f'id="schedule-{field}-error"' in r.text, bad
        r = await c.post("/schedules", data=GOOD | {"title": "a\x00b", "csrf_token": token, "action": "add"})
        assert r.status_code == 400 and "title field must not contain NUL characters" in r.text
        assert await store.schedules_list(ada.user_id) == []
        assert (await c.post("/schedules", data=GOOD | {"action": "add"})).status_code == 403


async def test_another_humans_schedule_is_not_found(live_server):
    store, ada = await _ada_with_reports(live_server)
    await make_human(store, "bea")
    s = await store.schedule_add(ada.user_id, queue="reports", title="t", every_seconds=60)
    async with client_for(live_server) as c:
        token = await sign_in(c, "bea")
        for action in ("pause", "resume", "remove", "nonsense"):
            assert (await c.post(f"/schedules/{s['id']}/{action}", data={"csrf_token": token})).status_code == 404
        assert (await c.get(f"/schedules/{s['id']}/remove")).status_code == 404
        assert (await c.get("/schedules/not-an-id/remove")).status_code == 404
    assert [x["paused"] for x in await store.schedules_list(ada.user_id)] == [False]
