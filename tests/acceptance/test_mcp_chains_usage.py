"""Continuation chains and usage per attempt through the MCP Python SDK client, in both
protocol generations: the review loop an agent runs reads as one chain, and usage reported
on the closing calls comes back on the attempts and summed on the todo."""

from __future__ import annotations

import pytest

from tests.acceptance.mcp_helpers import GENERATIONS, call, call_error, connect, mcp_server, vend  # noqa: F401


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_a_review_loop_of_three_continuations_reads_as_one_chain(mcp_server, generation):
    ep = await vend(mcp_server.store)
    async with connect(mcp_server, ep.token, generation) as client:
        root = await call(client, "add_todo", {"queue": "q", "title": "write the parser"})
        assert "continues_id" not in root
        claim = await call(client, "claim", {"id": root["id"]})
        assert "continues" not in claim
        await call(client, "complete", {"id": root["id"], "result": {"pr": 1}, "summary": "first draft",
                                        "usage": {"input_tokens": 1000, "output_tokens": 200, "cost_usd": 0.02,
                                                  "model": "model-a"}})
        ids, prev = [root["id"]], root
        for round_ in range(1, 4):  # review sends it back three times
            nxt = await call(client, "add_todo", {"queue": "q", "title": f"address review {round_}",
                                                  "continues": prev["id"]})
            assert nxt["continues_id"] == prev["id"]
            claim = await call(client, "claim_next", {})
            assert claim["todo"]["id"] == nxt["id"]
            cont = claim["continues"]
            assert cont["id"] == prev["id"] and cont["state"] == "done" and cont["attempts_total"] == 1
            assert cont["result"] == {"pr": round_}
            assert cont["last_attempt"]["outcome"] == "completed"
            assert cont["last_attempt"]["summary"] == ("first draft" if round_ == 1 else f"fixed review {round_ - 1}")
            await call(client, "complete", {"id": nxt["id"], "result": {"pr": round_ + 1},
                                            "summary": f"fixed review {round_}",
                                            "usage": {"input_tokens": 100 * round_, "output_tokens": 10}})
            ids.append(nxt["id"])
            prev = nxt
        for link in (ids[0], ids[2], ids[3]):
            got = await call(client, "get_todo", {"id": link})
            assert [c["id"] for c in got["chain"]] == ids
            assert [c["title"] for c in got["chain"]] == ["write the parser"] + [f"address review {i}" for i in (1, 2, 3)]
            assert all(c["last_outcome"] == "completed" for c in got["chain"])
        assert got["continues_id"] == ids[2] and got["continued_by_id"] is None
        first = await call(client, "get_todo", {"id": ids[0]})
        assert first["continues_id"] is None and first["continued_by_id"] == ids[1]
        assert first["attempts"][0]["usage"] == {"input_tokens": 1000, "output_tokens": 200, "cost_usd": 0.02,
                                                 "model": "model-a"}
        assert first["usage"] == {"input_tokens": 1000, "output_tokens": 200, "cost_usd": 0.02}
        assert got["usage"] == {"input_tokens": 300, "output_tokens": 10, "cost_usd": None}
        # the chain has one successor per link: a second continuation of the root is refused by name
        refused = await call_error(client, "add_todo", {"queue": "q", "title": "again", "continues": ids[0]})
        assert refused["code"] == "conflict" and ids[1] in refused["message"] and refused["argument"] == "continues"


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_usage_on_fail_and_release_and_bad_usage_is_invalid_naming_usage(mcp_server, generation):
    ep = await vend(mcp_server.store)
    async with connect(mcp_server, ep.token, generation) as client:
        todo = await call(client, "add_todo", {"queue": "q", "title": "flaky"})
        await call(client, "claim", {"id": todo["id"]})
        bad = await call_error(client, "release", {"id": todo["id"], "usage": {"input_tokens": -5}})
        assert bad["code"] == "invalid" and bad["argument"] == "usage" and "input_tokens" in bad["message"]
        bad = await call_error(client, "release", {"id": todo["id"], "usage": {"prompt_tokens": 5}})
        assert bad["code"] == "invalid" and bad["argument"] == "usage" and "prompt_tokens" in bad["message"]
        await call(client, "release", {"id": todo["id"], "usage": {"input_tokens": 5, "cost_usd": 0.001}})
        await call(client, "claim", {"id": todo["id"]})
        await call(client, "fail", {"id": todo["id"], "usage": {"output_tokens": 9, "model": "m" * 300}})
        got = await call(client, "get_todo", {"id": todo["id"]})
    assert [a["usage"] for a in got["attempts"]] == [
        {"input_tokens": None, "output_tokens": 9, "cost_usd": None, "model": "m" * 128},
        {"input_tokens": 5, "output_tokens": None, "cost_usd": 0.001, "model": None}]
    assert got["usage"] == {"input_tokens": 5, "output_tokens": 9, "cost_usd": 0.001}


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_a_continuation_of_a_live_or_foreign_todo_is_refused(mcp_server, generation):
    mine, other = await vend(mcp_server.store), await vend(mcp_server.store)
    async with connect(mcp_server, other.token, generation) as client:
        theirs = await call(client, "add_todo", {"queue": "q", "title": "theirs"})
        await call(client, "cancel", {"id": theirs["id"]})
    async with connect(mcp_server, mine.token, generation) as client:
        live = await call(client, "add_todo", {"queue": "q", "title": "live"})
        err = await call_error(client, "add_todo", {"queue": "q", "title": "x", "continues": live["id"]})
        assert err["code"] == "conflict" and "still live" in err["message"]
        foreign = await client.call_tool("add_todo", {"queue": "q", "title": "x", "continues": theirs["id"]})
        never = await client.call_tool("add_todo", {"queue": "q", "title": "x", "continues": "01JRANDOM-never"})
        assert foreign.content[0].text == never.content[0].text
        assert (await call_error(client, "add_todo", {"queue": "q", "title": "x", "continues": "nope"}))["code"] == (
            "not_found")
