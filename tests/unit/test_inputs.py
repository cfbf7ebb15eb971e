"""Input shaping (REQ-5), configuration parsing and hook signatures: no database."""

from __future__ import annotations

import pytest

from board.store import inputs
from board.config import from_env
from board.errors import Invalid, NotFound
from board.ops.hooks import sign, verify


@pytest.mark.parametrize("text,limit,expected,cut", [
    ("abc", 5, "abc", False),
    ("ééé", 5, "éé", True),          # never half a character
    ("a€", 3, "a", True),
    ("😀x", 4, "😀", True),
    ("", 0, "", False),
])
def test_cut_utf8_never_splits_a_character(text, limit, expected, cut):
    assert inputs.cut_utf8(text, limit) == (expected, cut)


@pytest.mark.parametrize("value,problem", [
    ("plain", None), ("😀 paired", None), ({"k": [1, None, True, {"x": "ok"}]}, None),
    ("a\x00b", "NUL"), ("\ud800", "surrogate"), ("\udfff", "surrogate"),
    ({"deep": [[{"x": "a\x00"}]]}, "NUL"), ({"key\ud83d": 1}, "surrogate"), ([[[[["\x00"]]]]], "NUL"),
])
def test_text_problem_finds_a_nul_or_a_lone_surrogate_anywhere_in_a_json_value(value, problem):
    found = inputs.text_problem(value)
    assert (found is None) if problem is None else (problem in found)


def test_text_problem_walks_deeper_than_the_recursion_limit():
    deep = "\x00"
    for _ in range(5000):
        deep = [deep]
    assert "NUL" in inputs.text_problem(deep)


@pytest.mark.parametrize("todo_id", ["a\x00b", "\ud800", "x" * (inputs.TODO_ID_MAX_CHARS + 1)])
def test_an_id_no_todo_can_have_is_not_found_like_any_unknown_id(todo_id):
    with pytest.raises(NotFound) as err:
        inputs.checked_todo_id(todo_id)
    assert err.value.wire() == NotFound().wire()


def test_a_claimant_with_a_lone_surrogate_is_invalid_and_a_nul_is_removed():
    assert inputs.clean_claimant("run\x00-7") == "run-7"
    with pytest.raises(Invalid) as err:
        inputs.clean_claimant("run\ud800")
    assert err.value.argument == "claimant"


def test_claimant_loses_control_characters_and_is_cut_to_128_bytes():
    assert inputs.clean_claimant("a\tb\nc\x7fd\x1b") == "abcd"
    assert len(inputs.clean_claimant("é" * 100).encode()) == 128
    assert inputs.clean_claimant(None) is None
    with pytest.raises(Invalid) as err:
        inputs.clean_claimant(7)
    assert err.value.argument == "claimant"


@pytest.mark.parametrize("artifact", [
    "mcp://cairn/Zz9", "mcp://cairn/a_b-c", "https://example.com", "https://ci.example.com:8443/run/7?x=1#frag",
])
def test_good_artifacts(artifact):
    assert inputs.clean_artifact(artifact) == artifact


@pytest.mark.parametrize("artifact", [
    "file:///etc/passwd", "http://example.com", "HTTPS://", "https://exa mple.com", "https://host:99999/",
    "mcp://cairn/../x", "mcp://other/x", "ftp://x", " https://example.com", "https://example.com\n", 5,
])
def test_bad_artifacts_are_invalid_naming_artifact(artifact):
    with pytest.raises(Invalid) as err:
        inputs.clean_artifact(artifact)
    assert err.value.argument == "artifact"


def test_not_found_never_echoes_the_id():
    e = NotFound(op="get_todo", todo_id="secret-id")
    assert "secret-id" not in str(e.wire())
    assert e.wire() == NotFound(op="claim", todo_id="other").wire()
    assert "secret-id" in str(e)  # the wrapped form for logs names it


def test_config_reads_the_contract_names():
    s = from_env({"SWITCHBOARD_ATTEMPT_SUMMARY_FROM_RESULT": "true", "SWITCHBOARD_ATTEMPT_HISTORY_MAX_PER_TODO": "7",
                  "SWITCHBOARD_LEASE_SECONDS": "2.5", "SWITCHBOARD_REAPER_INTERVAL_SECONDS": "0"})
    assert s.attempt_summary_from_result is True and s.attempt_history_max_per_todo == 7
    assert s.lease_seconds == 2.5 and s.reaper_interval_seconds == 0
    assert from_env({}).attempt_summary_from_result is False


@pytest.mark.parametrize("env,name", [
    ({"SWITCHBOARD_ATTEMPT_HISTORY_MAX_PER_TODO": "4"}, "SWITCHBOARD_ATTEMPT_HISTORY_MAX_PER_TODO"),
    ({"SWITCHBOARD_LEASE_SECONDS": "soon"}, "SWITCHBOARD_LEASE_SECONDS"),
    ({"SWITCHBOARD_ATTEMPT_SUMMARY_FROM_RESULT": "maybe"}, "SWITCHBOARD_ATTEMPT_SUMMARY_FROM_RESULT"),
    ({"SWITCHBOARD_HOOK_URLS": "http://example.com/hook", "SWITCHBOARD_HOOK_SECRET": "s"}, "SWITCHBOARD_HOOK_URLS"),
    ({"SWITCHBOARD_HOOK_URLS": "https://example.com/hook"}, "SWITCHBOARD_HOOK_SECRET"),
])
def test_bad_configuration_names_the_variable(env, name):
    with pytest.raises(Invalid) as err:
        from_env(env)
    assert err.value.argument == name


def test_hook_signatures_verify_and_reject_tampering():
    body = b'{"id":"e1","event":"todo.ready"}'
    header = sign("k", 1_700_000_000, body)
    assert verify("k", header, body, now=1_700_000_010)
    assert not verify("k", header, body + b" ", now=1_700_000_010)
    assert not verify("other", header, body, now=1_700_000_010)
    assert not verify("k", header, body, now=1_700_001_000)  # stale
    assert not verify("k", "garbage", body)
