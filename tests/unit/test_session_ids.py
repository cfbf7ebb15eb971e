"""MCP session ids any process can resume (board/mcp/sessions.py): what an id carries, and
what is refused."""

from __future__ import annotations

import json

from board.mcp.sessions import CAPABILITIES_MAX_BYTES, SessionIds, opening_capabilities

APPS = {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}}


def test_an_id_minted_by_one_process_is_read_by_another_with_the_same_key_only():
    session_id = SessionIds("shared-key-0123456789").mint("ep-1", APPS)
    claims = SessionIds("shared-key-0123456789").read(session_id)
    assert claims is not None and claims.endpoint_id == "ep-1" and claims.capabilities == APPS
    assert SessionIds("another-key-0123456789").read(session_id) is None


def test_an_altered_id_is_refused():
    ids = SessionIds("shared-key-0123456789")
    session_id = ids.mint("ep-1", {})
    payload, _, signature = session_id.rpartition(".")
    assert ids.read(payload + "." + signature[::-1]) is None
    assert ids.read(ids.mint("ep-2", {}).rpartition(".")[0] + "." + signature) is None
    assert ids.read("not-an-id") is None


def test_two_sessions_of_one_endpoint_get_different_ids():
    ids = SessionIds("shared-key-0123456789")
    assert ids.mint("ep-1", {}) != ids.mint("ep-1", {})


def test_oversized_capabilities_are_cut_to_their_extensions_so_the_id_stays_a_short_header():
    ids = SessionIds("shared-key-0123456789")
    big = {"experimental": {"blob": "x" * (4 * CAPABILITIES_MAX_BYTES)}, **APPS}
    session_id = ids.mint("ep-1", big)
    assert len(session_id) < 2 * CAPABILITIES_MAX_BYTES
    assert ids.read(session_id).capabilities == APPS
    huge = {"extensions": {"x": "y" * (4 * CAPABILITIES_MAX_BYTES)}}
    assert ids.read(ids.mint("ep-1", huge)).capabilities == {}


def test_only_an_initialize_request_opens_a_session_with_its_declared_capabilities():
    def body(method, **params):
        return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()

    assert opening_capabilities(body("initialize", capabilities=APPS)) == APPS
    assert opening_capabilities(body("initialize")) == {}
    assert opening_capabilities(body("tools/list")) is None
    assert opening_capabilities(b"[not json") is None
    assert opening_capabilities(b"[]") is None
