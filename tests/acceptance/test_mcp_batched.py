"""The batched verbs over MCP: add_todos and claim_next's limit, through the Python SDK's
client (both protocol generations) and the TypeScript SDK's client, which validates every
result against the tool's output schema."""

from __future__ import annotations

import pytest

from tests.acceptance.mcp_helpers import (GENERATIONS, Inbox, call, call_error, connect, doorbell,  # noqa: F401
                                          mcp_server, vend, wait_until)
from tests.acceptance.test_bad_input import escaping_client
from tests.acceptance.third_party import ok, tool_error, ts_client
from tests.conftest import sql_rows

TODOS = "switchboard://todos"


def items(n: int, **extra) -> list[dict]:
    return [{"queue": "q", "title": f"job {i}", **extra} for i in range(n)]


async def todo_count(server, endpoint_id: str) -> int:
    rows = await sql_rows(server.settings.database_url, "SELECT count(*) AS n FROM todos WHERE endpoint_id = %s",
                          (endpoint_id,))
    return rows[0]["n"]


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_a_batch_added_then_claimed_ten_at_a_time_each_with_its_own_fence(mcp_server, generation):
    ep = await vend(mcp_server.store)
    async with connect(mcp_server, ep.token, generation) as client:
        added = await call(client, "add_todos", {"todos": items(25, payload={"n": 1}, max_attempts=2)})
        assert [t["title"] for t in added["todos"]] == [f"job {i}" for i in range(25)]
        single = await call(client, "claim_next", {})
        assert "claims" not in single and single["todo"]["title"] == "job 0"
        batch = await call(client, "claim_next", {"limit": 10, "require_fence": True, "claimant": "batcher"})
        claims = batch["claims"]
        assert [c["todo"]["title"] for c in claims] == [f"job {i}" for i in range(1, 11)]
        assert batch["todo"] == claims[0]["todo"] and batch["lease_token"] == claims[0]["lease_token"]
        assert len({c["lease_token"] for c in claims}) == 10
        # A token fences its own attempt only.
        assert (await call_error(client, "complete", {"id": claims[1]["todo"]["id"],
                                                      "lease_token": claims[2]["lease_token"]}))["code"] == "conflict"
        done = await call(client, "complete", {"id": claims[0]["todo"]["id"], "lease_token": claims[0]["lease_token"]})
        assert done["state"] == "done"
        # The rest in one call; the first is done already, so with it the call changes nothing.
        rest_of_batch = [{"id": c["todo"]["id"], "lease_token": c["lease_token"], "summary": "ok"} for c in claims]
        error = await call_error(client, "complete_todos", {"todos": rest_of_batch})
        assert (error["code"], error["argument"]) == ("conflict", "todos[0].id")
        closed = await call(client, "complete_todos", {"todos": rest_of_batch[1:]})
        assert [t["id"] for t in closed["todos"]] == [c["todo"]["id"] for c in claims[1:]]
        assert all(t["state"] == "done" and t["closed_attempt"]["outcome"] == "completed" for t in closed["todos"])
        rest = await call(client, "claim_next", {"limit": 50})
        assert len(rest["claims"]) == 14
        assert await call(client, "claim_next", {"limit": 50}) == {"todo": None, "claims": []}
    rows = await sql_rows(mcp_server.settings.database_url,
                          "SELECT count(*) AS n, count(DISTINCT todo_id) AS todos FROM attempts a "
                          "JOIN todos t ON t.id = a.todo_id WHERE t.endpoint_id = %s", (ep.endpoint_id,))
    assert rows == [{"n": 25, "todos": 25}]


@pytest.mark.parametrize("bad, argument", [
    ({"queue": "q", "title": ""}, "todos[7].title"),
    ({"queue": "elsewhere", "title": "x"}, "todos[7].queue"),
    ({"queue": "q", "title": "a\x00b"}, "todos[7].title"),
    ({"queue": "q", "title": "x", "payload": {"k\x00ey": 1}}, "todos[7].payload"),
    ({"queue": "q", "title": "x", "max_attempts": 0}, "todos[7].max_attempts"),
    ({"queue": "q", "title": "x", "continues": "never-minted"}, "todos[7].continues"),
    ({"queue": "q", "title": "x", "extra": 1}, "todos[7].extra"),
])
async def test_a_bad_item_fails_the_whole_call_naming_its_index(mcp_server, bad, argument):
    ep = await vend(mcp_server.store)
    todos = items(10)
    todos[7] = bad
    async with connect(mcp_server, ep.token) as client:
        error = await call_error(client, "add_todos", {"todos": todos})
    assert error["argument"] == argument and error["message"].startswith("todos[7]"), error
    assert await todo_count(mcp_server, ep.endpoint_id) == 0


async def test_a_lone_surrogate_in_an_item_is_invalid_naming_the_item(mcp_server):
    ep = await vend(mcp_server.store)
    async with escaping_client(mcp_server, ep.token) as client:
        result = await client.call_tool("add_todos", {"todos": [{"queue": "q", "title": "ok"},
                                                                {"queue": "q", "title": "a\ud800b"}]})
    assert result.is_error and '"argument":"todos[1].title"' in result.content[0].text
    assert await todo_count(mcp_server, ep.endpoint_id) == 0


@pytest.mark.parametrize("args, argument", [
    ({"todos": []}, "todos"), ({"todos": items(1001)}, "todos"), ({"todos": "x"}, "todos"),
])
async def test_an_empty_or_oversized_batch_is_invalid(mcp_server, args, argument):
    ep = await vend(mcp_server.store)
    async with connect(mcp_server, ep.token) as client:
        error = await call_error(client, "add_todos", args)
    assert (error["code"], error["argument"]) == ("invalid", argument)
    assert await todo_count(mcp_server, ep.endpoint_id) == 0


@pytest.mark.parametrize("limit", [0, 51, "10"])
async def test_a_claim_next_limit_outside_1_to_50_is_invalid(mcp_server, limit):
    ep = await vend(mcp_server.store)
    async with connect(mcp_server, ep.token) as client:
        await call(client, "add_todo", {"queue": "q", "title": "x"})
        error = await call_error(client, "claim_next", {"limit": limit})
    assert (error["code"], error["argument"]) == ("invalid", "limit")


async def test_each_batched_verb_is_listed_and_allowed_with_the_verb_it_batches_only(mcp_server):
    producer = await vend(mcp_server.store, agent_id="producer", scope=("add_todo",))
    worker = await vend(mcp_server.store, agent_id="worker", scope=("claim_next", "complete"))
    async with connect(mcp_server, producer.token) as client:
        assert {t.name for t in (await client.list_tools()).tools} == {"add_todo", "add_todos"}
        added = await call(client, "add_todos", {"todos": items(2)})
        assert (await call_error(client, "complete_todos", {"todos": [{"id": added["todos"][0]["id"]}]}))["code"] \
            == "forbidden"
    async with connect(mcp_server, worker.token) as client:
        assert {t.name for t in (await client.list_tools()).tools} == {"claim_next", "complete", "complete_todos"}
        assert (await call_error(client, "add_todos", {"todos": items(2)}))["code"] == "forbidden"


async def test_each_todo_of_a_batch_rings_the_doorbell_once(mcp_server):
    ep = await vend(mcp_server.store)
    inbox = Inbox()
    before = doorbell(mcp_server).live_doorways(ep.endpoint_id)
    async with connect(mcp_server, ep.token, "legacy", inbox=inbox) as client:
        await wait_until(lambda: doorbell(mcp_server).live_doorways(ep.endpoint_id) > before)
        added = await call(client, "add_todos", {"todos": items(12)})
        uris = [f"{TODOS}/{t['id']}" for t in added["todos"]]
        for uri in uris:
            await inbox.wait_for(uri)
    assert sorted(u for u in inbox.uris if u in uris) == sorted(uris)


async def test_the_typescript_client_accepts_batched_adds_and_claims(mcp_server):
    """Every batched result passes the TypeScript client's output-schema check: add_todos,
    claim_next with a limit (fenced, with prior attempts and a continuation), the empty batch,
    and an add_todos error is a readable tool error naming the item."""
    ep = await vend(mcp_server.store)
    async with ts_client(mcp_server, ep.token) as client:
        first = ok(await client.call_tool("add_todo", {"queue": "q", "title": "first"}))
        ok(await client.call_tool("cancel", {"id": first["id"]}))
        added = ok(await client.call_tool("add_todos", {"todos": [
            {"queue": "q", "title": "a", "payload": {"k": [1, 2]}, "routing": {"lane": "x"}},
            {"queue": "q", "title": "b", "continues": first["id"], "max_attempts": 3},
            {"queue": "q", "title": "c"}]}))
        assert [t["title"] for t in added["todos"]] == ["a", "b", "c"]
        assert added["todos"][1]["continues_id"] == first["id"]
        claim = ok(await client.call_tool("claim", {"id": added["todos"][2]["id"]}))
        ok(await client.call_tool("release", {"id": claim["todo"]["id"], "summary": "later"}))
        batch = ok(await client.call_tool("claim_next", {"limit": 5, "require_fence": True}))
        assert [c["todo"]["title"] for c in batch["claims"]] == ["a", "b", "c"]
        assert batch["claims"][1]["continues"]["id"] == first["id"]
        assert [p["outcome"] for p in batch["claims"][2]["prior_attempts"]] == ["released"]
        assert ok(await client.call_tool("claim_next", {"limit": 5})) == {"todo": None, "claims": []}
        closed = ok(await client.call_tool("complete_todos", {"todos": [
            {"id": c["todo"]["id"], "lease_token": c["lease_token"], "result": {"i": i}, "summary": "done",
             "usage": {"input_tokens": 10, "model": "m"}} for i, c in enumerate(batch["claims"])]}))
        assert [t["result"] for t in closed["todos"]] == [{"i": 0}, {"i": 1}, {"i": 2}]
        error = tool_error(await client.call_tool("complete_todos", {"todos": [{"id": batch["todo"]["id"]}]}))
        assert (error["code"], error["argument"]) == ("conflict", "todos[0].id")
        error = tool_error(await client.call_tool("add_todos", {"todos": [{"queue": "q", "title": "ok"},
                                                                          {"queue": "q", "title": ""}]}))
        assert error["argument"] == "todos[1].title"
