"""The MCP Inspector CLI (`mcp-inspector --cli`, built on the TypeScript SDK) against a real
server, each way it negotiates: legacy (2025-11-25, with a session), modern (pinned to
2026-07-28, sessionless) and auto (it probes). Its --strict mode reports tool-schema
portability problems; the server's schemas have none."""

from __future__ import annotations

import json
import logging

import pytest

from board.store.vocabulary import VERBS
from tests.acceptance.mcp_helpers import mcp_server, vend  # noqa: F401 (mcp_server is a fixture)
from tests.acceptance.third_party import inspector

ERAS = {"legacy": {"2025-11-25"}, "modern": {"2026-07-28"}, "auto": {"2025-11-25", "2026-07-28"}}


def _negotiated(caplog) -> set[str]:
    return {r.protocol for r in caplog.records if r.name == "switchboard.mcp" and hasattr(r, "protocol")}


@pytest.mark.parametrize("era", ERAS)
async def test_the_inspector_lists_every_tool_with_no_portability_warning_in_strict_mode(mcp_server, era, tmp_path):
    ep = await vend(mcp_server.store)
    ran = await inspector(mcp_server, ep.token, era, "--method", "tools/list", "--strict", tmp_path=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert {t["name"] for t in ran.json()["tools"]} == set(VERBS) | {"add_todos", "complete_todos"}
    assert "Warning" not in ran.stderr and "warnings across" not in ran.stderr, ran.stderr


@pytest.mark.parametrize("era", ERAS)
async def test_the_inspector_calls_a_tool_and_reads_its_result(mcp_server, era, tmp_path, caplog):
    ep = await vend(mcp_server.store)
    caplog.set_level(logging.INFO, logger="switchboard.mcp")
    ran = await inspector(mcp_server, ep.token, era, "--method", "tools/call", "--tool-name", "add_todo",
                          "--tool-arg", "queue=q", "--tool-arg", "title=from the inspector", tmp_path=tmp_path)
    assert ran.returncode == 0, ran.stderr
    result = ran.json()
    assert result["isError"] is False
    assert (result["structuredContent"]["state"], result["structuredContent"]["title"]) == (
        "pending", "from the inspector")
    [call] = _negotiated(caplog)
    assert call in ERAS[era]


@pytest.mark.parametrize("era", ERAS)
async def test_the_inspector_reads_a_tool_error_s_code(mcp_server, era, tmp_path):
    ep = await vend(mcp_server.store)
    ran = await inspector(mcp_server, ep.token, era, "--method", "tools/call", "--tool-name", "get_todo",
                          "--tool-arg", "id=never-minted-0000", tmp_path=tmp_path)
    # The Inspector reports a tool error (isError) with its own exit status, after printing the result.
    assert ran.returncode != 0 and "tool_is_error" in ran.stderr, (ran.returncode, ran.stderr)
    result = ran.json()
    assert result["isError"] is True and "structuredContent" not in result
    assert json.loads(result["content"][0]["text"]) == {"error": {"code": "not_found", "message": "no such todo"}}
