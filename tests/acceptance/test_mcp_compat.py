"""REQ-17: every new argument is optional and every new response field additive, so a client
written without SPEC-0034 keeps working unchanged. The "old client" here knows only the
pre-SPEC-0034 verbs and arguments, and reads only the fields it always read."""

from __future__ import annotations

import pytest

from tests.acceptance.mcp_helpers import GENERATIONS, connect, mcp_server, vend  # noqa: F401 (mcp_server is a fixture)

OLD_SCOPE = ("add_todo", "list_todos", "claim", "claim_next", "heartbeat", "complete", "fail", "cancel",
             "interrupt", "resume")


async def old_call(client, tool, args):
    """What a pre-SPEC-0034 client does: call, check isError, read the structured content."""
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.structured_content
    return result.structured_content


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_a_client_written_without_spec_0034_keeps_working(mcp_server, generation):
    ep = await vend(mcp_server.store, scope=OLD_SCOPE)
    async with connect(mcp_server, ep.token, generation) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert set(OLD_SCOPE) <= names and "release" not in names
        first = await old_call(client, "add_todo", {"queue": "q", "title": "build", "payload": {"n": 1}})
        second = await old_call(client, "add_todo", {"queue": "q", "title": "test"})
        claim = await old_call(client, "claim_next", {"queue": "q"})
        todo = claim["todo"]
        assert (todo["id"], todo["state"], todo["payload"], todo["attempt"]) == (first["id"], "claimed", {"n": 1}, 1)
        await old_call(client, "heartbeat", {"id": todo["id"], "lease_seconds": 120})
        done = await old_call(client, "complete", {"id": todo["id"], "result": {"ok": True}})
        assert (done["state"], done["result"]) == ("done", {"ok": True})
        claim = await old_call(client, "claim", {"id": second["id"]})
        await old_call(client, "interrupt", {"id": second["id"]})
        await old_call(client, "resume", {"id": second["id"]})
        failed = await old_call(client, "fail", {"id": second["id"], "result": {"error": "red"}})
        assert failed["state"] == "failed" and failed["result"] == {"error": "red"}
        listed = await old_call(client, "list_todos", {"state": "done"})
        assert [t["id"] for t in listed["todos"]] == [first["id"]]
        third = await old_call(client, "add_todo", {"queue": "q", "title": "drop"})
        assert (await old_call(client, "cancel", {"id": third["id"]}))["state"] == "canceled"
        assert (await old_call(client, "claim_next", {})) == {"todo": None}
