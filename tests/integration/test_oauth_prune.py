"""Registered OAuth clients do not pile up: the retention sweep deletes a client a day after
it registered unless it completed a grant (an endpoint names it, revoked or not) or holds a
code not yet expired. Time is moved through the sweep's `now`, never slept."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from tests.conftest import make_user, sql_rows

META = {"client_name": "Host", "redirect_uris": ["http://127.0.0.1:9/callback"], "token_endpoint_auth_method": "none"}


async def clients(db_url) -> list[str]:
    return [r["client_id"] for r in await sql_rows(db_url, "SELECT client_id FROM oauth_clients ORDER BY client_id")]


async def code(store, user_id: int, client_id: str) -> str:
    return await store.oauth_code_issue(
        user_id, client_id=client_id, client_name="Host", client_verified=False, agent_id="host", scope=["claim"],
        queues=["q"], redirect_uri="http://127.0.0.1:9/callback", redirect_uri_explicit=True, code_challenge="c" * 43,
        resource="http://127.0.0.1/mcp")


async def test_a_client_that_never_completed_a_grant_is_deleted_a_day_after_it_registered(store, db_url):
    ada = await make_user(store, "ada")
    for client_id in ("a-abandoned", "b-granted", "c-granted-then-revoked"):
        await store.oauth_client_register(client_id, META, None)
    for client_id in ("b-granted", "c-granted-then-revoked"):
        issued = await store.oauth_code_exchange(await code(store, ada.user_id, client_id), access_seconds=60,
                                                 refresh_seconds=600)
        if client_id.startswith("c-"):
            await store.endpoint_revoke(issued["endpoint_id"])
    now = datetime.now(timezone.utc)

    await store.sweep_retention(now=now + timedelta(hours=23))
    assert await clients(db_url) == ["a-abandoned", "b-granted", "c-granted-then-revoked"]  # under a day: kept
    await store.sweep_retention(now=now + timedelta(days=1, minutes=1))
    assert await clients(db_url) == ["b-granted", "c-granted-then-revoked"]


async def test_a_day_old_client_with_a_code_not_yet_exchanged_is_kept_until_the_code_expires(store, db_url):
    ada = await make_user(store, "ada")
    await store.oauth_client_register("slow-host", META, None)
    await sql_rows(db_url, "UPDATE oauth_clients SET registered_at = now() - interval '2 days' RETURNING 1")
    await code(store, ada.user_id, "slow-host")  # the person approved just now; the host has not exchanged it yet
    now = datetime.now(timezone.utc)
    await store.sweep_retention(now=now)
    assert await clients(db_url) == ["slow-host"]
    await store.sweep_retention(now=now + timedelta(minutes=6))  # the code (5 minutes) expired unused
    assert await clients(db_url) == []
