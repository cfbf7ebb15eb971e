"""Over MCP: what an agent writes for the next worker (a note, a summary, an artifact, a title,
a payload, a result) is refused as invalid, naming the argument and the kind of credential,
when it plainly holds one; nothing is recorded, and the same call with clean text (innocent
look-alikes included) then goes through."""

from __future__ import annotations

import pytest

from tests.acceptance.mcp_helpers import GENERATIONS, call, call_error, connect, mcp_server, vend  # noqa: F401
from tests.acceptance.third_party import Threw, ok, tool_error, ts_client

KEY_BLOCK = "-----BEGIN EC " + "PRIVATE KEY-----\nMHcCAQEE..."
GITHUB = "ghp_" + "Zz09" * 9
AWS = "AKIA" + "IOSFODNN7EXAMPLE"


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_a_credential_in_a_note_a_summary_or_an_artifact_is_refused_and_nothing_is_recorded(
        mcp_server, generation):
    ep = await vend(mcp_server.store)
    async with connect(mcp_server, ep.token, generation) as client:
        todo = await call(client, "add_todo", {"queue": "q", "title": "deploy"})
        fence = (await call(client, "claim", {"id": todo["id"], "require_fence": True}))["lease_token"]
        error = await call_error(client, "note", {"id": todo["id"], "lease_token": fence,
                                                 "text": "the deploy key:\n" + KEY_BLOCK})
        assert error["code"] == "invalid" and error["argument"] == "text"
        assert "a private key" in error["message"] and "must not contain secrets" in error["message"]
        error = await call_error(client, "complete", {"id": todo["id"], "lease_token": fence,
                                                     "summary": f"pushed with {GITHUB}"})
        assert error["code"] == "invalid" and error["argument"] == "summary"
        error = await call_error(client, "complete", {"id": todo["id"], "lease_token": fence,
                                                     "artifact": f"https://ci.example/run/7?aws={AWS}"})
        assert error["code"] == "invalid" and error["argument"] == "artifact"
        held = await call(client, "get_todo", {"id": todo["id"]})
        assert held["state"] == "claimed" and held["attempts"][0]["ended_at"] is None
        assert held["attempts"][0]["notes_count"] == 0
        done = await call(client, "complete", {"id": todo["id"], "lease_token": fence,
                                               "summary": "pushed with the deploy key from the vault"})
    assert done["state"] == "done"


DSN = "postgresql://app:" + "Winter2024@db.internal/app"
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" + ".eyJzdWIiOiJhZGEifQ." + "Sg" * 22)
# What a todo's payload, title or result may say: look-alikes of credentials that are not ones.
INNOCENT = {"sha": "3f2a9c0d1e2b4a5f6789abcdef0123456789abcd", "todo": "550e8400-e29b-41d4-a716-446655440000",
            "password": "see vault", "db_password": "${DB_PASSWORD}", "clone": "ssh://git@github.com/org/repo.git",
            "note": "password reset flow; rotate the token"}


def assert_refused(error: dict, argument: str, what: str, secret: str) -> None:
    assert error["code"] == "invalid" and error["argument"] == argument, error
    assert f"({what})" in error["message"] and "must not contain secrets" in error["message"]
    assert secret not in error["message"]


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_a_credential_in_a_title_or_a_payload_is_refused_naming_it_and_nothing_is_added(
        mcp_server, generation):
    ep = await vend(mcp_server.store)
    async with connect(mcp_server, ep.token, generation) as client:
        error = await call_error(client, "add_todo", {"queue": "q", "title": f"rotate {JWT}"})
        assert_refused(error, "title", "a JWT", JWT)
        error = await call_error(client, "add_todo", {"queue": "q", "title": "migrate",
                                                      "payload": {"db": {"url": DSN}}})
        assert_refused(error, "payload", "a URL with a password", "Winter2024")
        error = await call_error(client, "add_todo", {"queue": "q", "title": "migrate",
                                                      "routing": {"password": "Winter2024"}})
        assert_refused(error, "routing", "a password", "Winter2024")
        error = await call_error(client, "add_todos", {"todos": [
            {"queue": "q", "title": "fine"}, {"queue": "q", "title": "migrate", "payload": {"password": "Winter2024"}}]})
        assert_refused(error, "todos[1].payload", "a password", "Winter2024")
        error = await call_error(client, "add_todos", {"todos": [{"queue": "q", "title": f"use {DSN}"}]})
        assert_refused(error, "todos[0].title", "a URL with a password", "Winter2024")
        assert (await call(client, "list_todos", {}))["todos"] == []
        added = await call(client, "add_todo", {"queue": "q", "title": "the password reset flow",
                                                "payload": INNOCENT})
    assert added["payload"] == INNOCENT and added["title"] == "the password reset flow"


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_a_credential_in_a_result_is_refused_and_the_todo_stays_claimed(mcp_server, generation):
    ep = await vend(mcp_server.store)
    async with connect(mcp_server, ep.token, generation) as client:
        todo = await call(client, "add_todo", {"queue": "q", "title": "deploy"})
        fence = (await call(client, "claim", {"id": todo["id"], "require_fence": True}))["lease_token"]
        held = {"id": todo["id"], "lease_token": fence}
        error = await call_error(client, "complete", {**held, "result": {"log": ["connected to " + DSN]}})
        assert_refused(error, "result", "a URL with a password", "Winter2024")
        error = await call_error(client, "fail", {**held, "result": {"session": JWT}})
        assert_refused(error, "result", "a JWT", JWT)
        error = await call_error(client, "complete_todos", {"todos": [{**held, "result": {"password": "Winter2024"}}]})
        assert_refused(error, "todos[0].result", "a password", "Winter2024")
        read = await call(client, "get_todo", {"id": todo["id"]})
        assert read["state"] == "claimed" and read["result"] is None and read["attempts"][0]["ended_at"] is None
        done = await call(client, "complete", {**held, "result": INNOCENT})
    assert done["state"] == "done" and done["result"] == INNOCENT


async def test_a_screening_refusal_is_a_tool_error_the_typescript_client_reads(mcp_server):
    """The TypeScript SDK validates structured content even on errors: a refusal must reach it
    as a readable tool error naming the argument, not as a thrown schema mismatch."""
    ep = await vend(mcp_server.store)
    async with ts_client(mcp_server, ep.token) as client:
        try:
            refused_add = await client.call_tool("add_todo", {"queue": "q", "title": "migrate",
                                                              "payload": {"dsn": DSN}})
            todo = ok(await client.call_tool("add_todo", {"queue": "q", "title": "migrate"}))
            ok(await client.call_tool("claim", {"id": todo["id"]}))
            refused_close = await client.call_tool("complete", {"id": todo["id"], "result": {"password": "Winter2024"}})
        except Threw as thrown:
            pytest.fail(f"the TypeScript client threw instead of returning the refusal: {thrown}")
    assert_refused(tool_error(refused_add), "payload", "a URL with a password", "Winter2024")
    assert_refused(tool_error(refused_close), "result", "a password", "Winter2024")
