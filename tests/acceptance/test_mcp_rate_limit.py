"""Per-endpoint token-bucket rate limiting on MCP tool calls (SPEC-0034 Security: the new
verbs are subject to the existing per-endpoint limiter)."""

from __future__ import annotations

import pytest

from tests.acceptance.mcp_helpers import CREDENTIALS, GENERATIONS, call, call_error, connect, credential, vend


@pytest.fixture
def server_settings(server_settings):
    return server_settings.with_(rate_limit_per_second=0.01, rate_limit_burst=3)


@pytest.mark.parametrize("kind", CREDENTIALS)
@pytest.mark.parametrize("generation", GENERATIONS)
async def test_calls_past_the_burst_are_rate_limited_per_endpoint(live_server, generation, kind):
    store = live_server.store
    busy = await credential(live_server, kind)
    calm = await vend(store, user_id=busy.user_id, agent_id="calm")
    async with connect(live_server, busy.token, generation) as client:
        todo = await call(client, "add_todo", {"queue": "q", "title": "t"})
        await call(client, "get_todo", {"id": todo["id"]})
        await call(client, "claim", {"id": todo["id"]})
        error = await call_error(client, "release", {"id": todo["id"], "summary": "x"})
        assert error["code"] == "rate_limited" and "argument" not in error
        assert (await call_error(client, "get_todo", {"id": todo["id"]}))["code"] == "rate_limited"
    # Nothing changed on the limited call, and another endpoint has its own bucket.
    async with connect(live_server, calm.token, generation) as other:
        assert (await call(other, "list_todos", {}))["todos"] == []
    agent = await store.endpoint_authenticate(busy.token)
    assert (await store.todo_get(agent, todo["id"]))["state"] == "claimed"
