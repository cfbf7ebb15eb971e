"""The in-process cache of authenticated endpoints: a token is looked up once, and dropped
as soon as its endpoint's revocation is announced through the LISTEN fan-out; a
revocation that no notification announced cannot outlive a LISTEN reconnect."""

from __future__ import annotations

from board.live.endpoint_cache import EndpointCache
from board.live.fanout import Fanout
from tests.conftest import make_user, sql_rows, until

# Revokes behind the store's back: no notification, so only a lookup could notice.
SILENT_REVOKE = "UPDATE endpoints SET revoked_at = now() WHERE id = %s RETURNING id"


async def _vend(store):
    user = await make_user(store)
    row, token = await store.endpoint_vend(user.user_id, name="w", agent_id="w", queues=["q"], scope=["list_todos"])
    return row["id"], token


async def _cache(store, db_url):
    fanout = Fanout(db_url)
    await fanout.start()
    return fanout, EndpointCache(store, fanout)


async def test_a_cached_token_authenticates_without_a_lookup(store, db_url):
    fanout, cache = await _cache(store, db_url)
    try:
        endpoint_id, token = await _vend(store)
        assert (await cache.authenticate(token)).endpoint_id == endpoint_id
        await sql_rows(db_url, SILENT_REVOKE, (endpoint_id,))
        # The database says revoked, the cache was never told: the answer came from the cache.
        assert (await cache.authenticate(token)).endpoint_id == endpoint_id
        assert await store.endpoint_authenticate(token) is None
    finally:
        await fanout.stop()


async def test_a_revocation_drops_the_cached_endpoint_through_the_fanout(store, db_url):
    fanout, cache = await _cache(store, db_url)
    try:
        endpoint_id, token = await _vend(store)
        other_id, other_token = await _vend(store)
        assert await cache.authenticate(token) and await cache.authenticate(other_token)
        await store.endpoint_revoke(endpoint_id)
        await until(lambda: len(cache) == 1, "the revoked endpoint leaving the cache")
        assert await cache.authenticate(token) is None
        assert (await cache.authenticate(other_token)).endpoint_id == other_id
    finally:
        await fanout.stop()


async def test_a_lost_listen_connection_empties_the_cache_on_reconnect(store, db_url):
    fanout, cache = await _cache(store, db_url)
    try:
        endpoint_id, token = await _vend(store)
        assert await cache.authenticate(token)
        await sql_rows(db_url, SILENT_REVOKE, (endpoint_id,))
        killed = await sql_rows(db_url, "SELECT pg_terminate_backend(pid) AS k FROM pg_stat_activity "
                                        "WHERE query LIKE 'LISTEN%%' AND datname = current_database()")
        assert killed == [{"k": True}]
        await until(lambda: fanout.reconnects == 1, "the LISTEN reconnect")
        assert await cache.authenticate(token) is None
    finally:
        await fanout.stop()


async def test_while_the_listen_connection_is_down_every_call_looks_up(store, db_url):
    fanout, cache = await _cache(store, db_url)
    endpoint_id, token = await _vend(store)
    assert await cache.authenticate(token)
    await fanout.stop()  # no LISTEN connection: nothing would announce a revocation now
    await sql_rows(db_url, SILENT_REVOKE, (endpoint_id,))
    assert await cache.authenticate(token) is None


async def test_a_lookup_overtaken_by_a_revocation_is_not_cached(store, db_url):
    fanout, cache = await _cache(store, db_url)
    try:
        endpoint_id, token = await _vend(store)
        real = store.endpoint_authenticate

        async def revoked_mid_lookup(t):
            agent = await real(t)  # the row as read before the revocation committed
            await store.endpoint_revoke(endpoint_id)
            await until(lambda: cache._generation >= 1, "the revocation seen by the cache")
            return agent

        store.endpoint_authenticate = revoked_mid_lookup
        assert (await cache.authenticate(token)).endpoint_id == endpoint_id  # answered as read
        store.endpoint_authenticate = real
        assert len(cache) == 0
        assert await cache.authenticate(token) is None
    finally:
        await fanout.stop()
