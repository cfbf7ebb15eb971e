"""OAuth grants for a team, through the MCP Python SDK's own OAuth client and the consent
screen: an admin of a team chooses the team, and the grant reads and claims the team's todos
with its other endpoints; a grant made again after a revoke still sees the team's work; two
admins connecting one client with their own agent ids get a grant each; a person who is not
an admin of the team cannot choose it (a forged choice is refused, nothing issued)."""

from __future__ import annotations

import re

import pytest

from board.store.store import Human
from tests.acceptance.mcp_helpers import call, connect, credential, vend
from tests.acceptance.oauth_helpers import (HttpConsent, MemoryStorage, approve, authorize, authorize_params, pkce,
                                            public_client, sdk_provider, sdk_session)
from tests.acceptance.test_board_auth import client_for, make_human, sign_in
from tests.conftest import sql_rows

VERBS = ("list_todos", "get_todo", "claim_next", "heartbeat", "complete")


async def grants(server) -> list[dict]:
    return await sql_rows(server.settings.database_url,
                          "SELECT id::text, user_id, agent_id, space_id IS NOT NULL AS team, revoked_at IS NULL AS live"
                          " FROM endpoints WHERE kind = 'oauth' ORDER BY created_at")


async def a_team(server, name: str, admin: str, *others: tuple[str, str]) -> tuple[int, list[Human]]:
    """A team with `admin` as its first admin and others (name, role); returns its id and the
    persons."""
    people = [await make_human(server.store, admin)] + [await make_human(server.store, n) for n, _ in others]
    team = await server.store.team_create(name, owner=admin)
    space = await server.store.team_space(name)
    for (n, role) in others:
        await server.store.team_member_set(space, n, role)
    return team["id"], people


async def test_an_admin_connects_the_sdk_client_for_a_team_and_it_drains_the_teams_queue(live_server):
    team, _ = await a_team(live_server, "ops", "ada")
    planner = await vend(live_server.store, user_id=team, agent_id="planner", queues=("builds",))
    async with connect(live_server, planner.token) as p:
        first = await call(p, "add_todo", {"queue": "builds", "title": "first"})
        second = await call(p, "add_todo", {"queue": "builds", "title": "second"})
    async with client_for(live_server) as board:
        await sign_in(board, "ada")
        consent = HttpConsent(board, verbs=VERBS, queues="builds", agent_id="sdk-host", space=team)
        storage = MemoryStorage()
        async with sdk_session(live_server.url, sdk_provider(live_server.url, storage, consent)) as client:
            claimed = await call(client, "claim_next", {"require_fence": True})
            assert claimed["todo"]["id"] == first["id"]  # the planner's todo: the team's
            await call(client, "complete", {"id": first["id"], "lease_token": claimed["lease_token"]})
        assert "The team ops" in consent.pages[0] and "Your own space" in consent.pages[0]
        [grant] = await grants(live_server)
        assert grant["user_id"] == team and grant["team"] and grant["agent_id"] == "sdk-host"
        records = await live_server.store.audit_list(await live_server.store.team_space("ops"), action="vend")
        assert [(r["actor_name"], r["detail"]["agent_id"]) for r in records] == [("ada", "sdk-host")]

        # revoked, then connected again: the new grant still sees the team's work
        assert await live_server.store.endpoint_revoke(grant["id"], user_id=team) == 0
        again = HttpConsent(board, verbs=VERBS, queues="builds", agent_id="sdk-host", space=team)
        async with sdk_session(live_server.url, sdk_provider(live_server.url, MemoryStorage(), again)) as client:
            assert (await call(client, "claim_next", {}))["todo"]["id"] == second["id"]
    assert [(g["live"], g["team"]) for g in await grants(live_server)] == [(False, True), (True, True)]


async def test_two_admins_connecting_one_client_for_a_team_get_a_grant_each_by_agent_id(live_server):
    team, _ = await a_team(live_server, "pool", "ada", ("bob", "admin"))
    async with client_for(live_server) as ada, client_for(live_server) as bob:
        await sign_in(ada, "ada")
        await sign_in(bob, "bob")
        storage = MemoryStorage()  # one registration of the client, as one host reused
        first = HttpConsent(ada, verbs=VERBS, agent_id="host-ada", space=team)
        async with sdk_session(live_server.url, sdk_provider(live_server.url, storage, first)) as client:
            await call(client, "list_todos", {})
        second = HttpConsent(bob, verbs=VERBS, agent_id="host-bob", space=team)
        storage.tokens = None
        async with sdk_session(live_server.url, sdk_provider(live_server.url, storage, second)) as client:
            await call(client, "list_todos", {})
        # bob's consent made a second grant: ada's still works
        rows = await grants(live_server)
        assert sorted(g["agent_id"] for g in rows if g["live"]) == ["host-ada", "host-bob"]
        # an agent id another agent of the team has is refused, naming it
        await vend(live_server.store, user_id=team, agent_id="planner")
        r = await authorize(bob, authorize_params(storage.client_info.client_id, pkce(),
                                                  redirect_uri=str(storage.client_info.redirect_uris[0])))
        refused = await approve(bob, r.headers["location"], verbs=VERBS, agent_id="planner", space=team)
        assert refused.status_code == 400
        assert "another agent of pool has the agent id planner" in " ".join(refused.text.split()).lower(), \
            re.findall(r"field-error.*", refused.text)


@pytest.mark.parametrize("role", ["operator", "outsider"])
async def test_a_forged_choice_of_a_team_the_person_is_not_an_admin_of_is_refused(live_server, role):
    team, _ = await a_team(live_server, f"t-{role}", f"admin-{role}",
                           *([(f"carl-{role}", "operator")] if role == "operator" else []))
    if role == "outsider":
        await make_human(live_server.store, f"carl-{role}")
    async with client_for(live_server) as board, client_for(live_server) as c:
        await sign_in(board, f"carl-{role}")
        client_id = await public_client(c)
        r = await authorize(c, authorize_params(client_id, pkce()))
        page = await board.get(r.headers["location"])
        assert "The team" not in page.text  # not offered
        refused = await approve(board, r.headers["location"], verbs=VERBS, space=team)
        assert refused.status_code == 400
        assert "choose your own space or a team you are an admin of" in refused.text.lower()
    assert await grants(live_server) == []
    assert await sql_rows(live_server.settings.database_url, "SELECT 1 FROM oauth_codes") == []


async def test_a_code_for_an_agent_id_another_endpoint_of_the_team_has_grants_nothing(live_server):
    """The exchange holds the rule the consent screen checks: an agent id names one agent of a
    team, so a code approved for one another live endpoint of the team has makes no grant."""
    team, _ = await a_team(live_server, "taken", "tess")
    await vend(live_server.store, user_id=team, agent_id="planner")
    code = await live_server.store.oauth_code_issue(
        team, client_id="test-client", client_name="Test Host", client_verified=False, agent_id="planner",
        scope=list(VERBS), queues=["q"], redirect_uri="http://127.0.0.1:9/callback", redirect_uri_explicit=True,
        code_challenge="unused-here", resource=live_server.url + "/mcp")
    assert await live_server.store.oauth_code_exchange(code, access_seconds=60, refresh_seconds=60) is None
    assert await grants(live_server) == []
    assert (await credential(live_server, "oauth", user_id=team, agent_id="other")).token
