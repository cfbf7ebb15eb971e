"""What agents write for the next worker (notes, summaries, artifacts) is refused when it is
plainly a credential, and passes when it is ordinary prose, an id, a hash or a link. The fake
credentials are built from parts, so this file holds none a scanner would flag."""

from __future__ import annotations

import pytest

from board.errors import Invalid
from board.store.inputs import clean_artifact, clean_note, screen_secrets

CREDENTIALS = {
    "a private key": "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEow...",
    "an OpenSSH key": "-----BEGIN OPENSSH " + "PRIVATE KEY-----",
    "an encrypted key": "-----BEGIN ENCRYPTED " + "PRIVATE KEY-----",
    "a vended token": "use sb_" + "Ab3-" * 10 + "xyz to call it",
    "an OAuth access token": "sba_" + "Q" * 43,
    "an OAuth refresh token": "sbr_" + "q_" * 21 + "z",
    "an AWS key": "AKIA" + "IOSFODNN7EXAMPLE",
    "a GitHub token": "ghp_" + "a1B2" * 9,
    "a fine-grained GitHub token": "github_pat_" + "11ABCDEFG" * 3,
    "a GitLab token": "glpat-" + "x" * 20,
    "a Slack token": "xoxb-" + "1234567890-abc",
    "an Anthropic key": "sk-ant-" + "api03-" + "k" * 30,
    "an OpenAI key": "sk-proj-" + "p" * 40,
    "a Google key": "AIza" + "S" * 35,
    "a Stripe key": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "an Authorization header": "curl -H 'Authorization: Bearer " + "abc.def.ghi-123'",
    "a basic header": "Authorization: Basic " + "dXNlcjpwYXNzd29yZA==",
    "a bare bearer token": "sent Bearer " + "eyJhbGciOiJIUzI1NiJ9.e30.x" + "y" * 10,
}

ORDINARY = [
    "Fixed the flaky test; the token bucket refilled too slowly under load.",
    "The password reset page now validates the email first.",
    "Bearer of bad news: the migration needs a lock.",
    "commit 3f2a9c0d1e2b4a5f6789abcdef0123456789abcd",
    "todo 550e8400-e29b-41d4-a716-446655440000 continues it",
    "base64 of the fixture: aGVsbG8gd29ybGQgdGhpcyBpcyBhIGxvbmcgc3RyaW5n",
    "sk-ing the edge case; ask-me-anything",
    "Authorization: see the README",
    "the sb_ prefix marks a vended token",
]


@pytest.mark.parametrize("what", sorted(CREDENTIALS))
def test_text_that_is_plainly_a_credential_is_refused_naming_the_argument(what):
    with pytest.raises(Invalid) as refused:
        screen_secrets(CREDENTIALS[what], "summary")
    assert refused.value.argument == "summary"
    assert "must not contain secrets" in refused.value.message


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_ids_hashes_and_the_word_token_pass(text):
    screen_secrets(text, "summary")
    assert clean_note(text, 2048)[0] == text


def test_a_note_and_an_artifact_are_screened_too():
    with pytest.raises(Invalid) as note:
        clean_note("my key: " + CREDENTIALS["an AWS key"], 2048)
    assert note.value.argument == "text"
    with pytest.raises(Invalid) as artifact:
        clean_artifact("https://ci.example/run/7?key=" + CREDENTIALS["an AWS key"])
    assert artifact.value.argument == "artifact"
    assert clean_artifact("https://ci.example/run/7") == "https://ci.example/run/7"
