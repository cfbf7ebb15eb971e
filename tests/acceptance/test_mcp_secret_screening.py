"""Over MCP: what an agent writes for the next worker is refused as invalid, naming the
argument, when it plainly holds a credential; nothing is recorded, and the same call with
clean text then goes through."""

from __future__ import annotations

import pytest

from tests.acceptance.mcp_helpers import GENERATIONS, call, call_error, connect, mcp_server, vend  # noqa: F401

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
