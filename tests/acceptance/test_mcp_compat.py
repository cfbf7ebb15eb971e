"""REQ-17: every new argument is optional and every new response field additive, so a client
written without SPEC-0034 keeps working unchanged. The "old client" here knows only the
pre-SPEC-0034 verbs and arguments, and reads only the fields it always read."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

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


# What the server answered before notes and derived liveness (the keys a client written then
# reads): every response now must hold at least these, with the same meaning.
OLD_TODO = frozenset({"id", "queue", "title", "state", "owner", "attempt", "max_attempts", "lease_expires_at",
                      "next_retry_at", "dead_letter", "payload", "routing", "result", "attempts_total",
                      "attempts_pruned", "created_at", "updated_at"})
OLD_ATTEMPT = frozenset({"seq", "attempt", "claimer_kind", "claimant", "claimed_at", "last_heartbeat_at",
                         "lease_expires_at", "ended_at", "outcome", "disposition", "died", "summary",
                         "summary_truncated", "artifact"})
OLD_CLAIM = frozenset({"todo", "attempt_seq", "attempts_total", "prior_attempts", "lease_token"})
OLD_CLOSED = frozenset({"seq", "attempt", "outcome", "disposition", "died"})


def superset(response: dict, old: frozenset, what: str) -> None:
    assert old <= set(response), f"{what} lost {sorted(old - set(response))}"


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_a_client_written_before_notes_goes_through_claim_heartbeat_complete_unchanged(mcp_server, generation):
    """claim, heartbeat, complete (and a fail, a second claim and a get_todo) with exactly the
    arguments such a client sends, none of the new ones; each response holds everything the
    old one did, with the values the old client expects."""
    ep = await vend(mcp_server.store, scope=("add_todo", "claim", "claim_next", "heartbeat", "complete", "fail",
                                             "get_todo"))
    async with connect(mcp_server, ep.token, generation) as client:
        todo = await old_call(client, "add_todo", {"queue": "q", "title": "build"})
        superset(todo, OLD_TODO, "add_todo")
        claim = await old_call(client, "claim_next", {"queue": "q", "claimant": "old/run-1", "require_fence": True,
                                                      "lease_seconds": 60})
        superset(claim, OLD_CLAIM, "claim_next")
        superset(claim["todo"], OLD_TODO, "claim_next's todo")
        assert (claim["todo"]["id"], claim["attempt_seq"], claim["prior_attempts"]) == (todo["id"], 1, [])
        token = claim["lease_token"]
        beat = await old_call(client, "heartbeat", {"id": todo["id"], "lease_token": token, "lease_seconds": 120})
        superset(beat, OLD_TODO, "heartbeat")
        assert beat["state"] == "claimed" and beat["lease_expires_at"] > claim["todo"]["lease_expires_at"]
        done = await old_call(client, "complete", {"id": todo["id"], "lease_token": token, "result": {"ok": True},
                                                   "summary": "green"})
        superset(done, OLD_TODO | {"closed_attempt"}, "complete")
        superset(done["closed_attempt"], OLD_CLOSED, "complete's closed_attempt")
        assert (done["state"], done["result"], done["closed_attempt"]["outcome"]) == ("done", {"ok": True}, "completed")

        second = await old_call(client, "add_todo", {"queue": "q", "title": "test", "max_attempts": 2})
        await old_call(client, "claim", {"id": second["id"]})
        failed = await old_call(client, "fail", {"id": second["id"], "summary": "red"})
        await mcp_server.store.sweep_retry(now=datetime.now(timezone.utc) + timedelta(hours=2))
        again = await old_call(client, "claim", {"id": second["id"]})
        superset(again, OLD_CLAIM - {"lease_token"}, "claim")
        [prior] = again["prior_attempts"]
        superset(prior, OLD_ATTEMPT, "a prior attempt")
        assert (prior["outcome"], prior["summary"], failed["closed_attempt"]["outcome"]) == ("failed", "red", "failed")
        got = await old_call(client, "get_todo", {"id": second["id"], "attempts_limit": 5})
        superset(got, OLD_TODO | {"attempts", "attempt_outcomes"}, "get_todo")
        for a in got["attempts"]:
            superset(a, OLD_ATTEMPT, "a get_todo attempt")
        assert [a["outcome"] for a in got["attempts"]] == [None, "failed"]
