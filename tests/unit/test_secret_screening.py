"""What is shown to whoever works on a todo (titles, payloads, results, notes, summaries,
artifacts) is refused when it plainly holds a credential, naming the argument and the kind
of credential but never the text; and passes when it is ordinary prose, an id, a hash, a
link or a stand-in for a secret. The fake credentials are built from parts, so this file
holds none a scanner would flag."""

from __future__ import annotations

import base64
import json

import pytest

from board.errors import Invalid
from board.store.inputs import clean_artifact, clean_note, json_object_text, json_value, screen_json, screen_secrets


def b64url(value: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


JWT = b64url({"alg": "HS256", "typ": "JWT"}) + "." + b64url({"sub": "ada", "exp": 1}) + "." + "Sg" * 22
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"

# (kind named in the refusal, text)
CREDENTIALS = [
    ("a private key", "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEow..."),
    ("a private key", "-----BEGIN OPENSSH " + "PRIVATE KEY-----"),
    ("a private key", "-----BEGIN ENCRYPTED " + "PRIVATE KEY-----"),
    ("a Switchboard token", "use sb_" + "Ab3-" * 10 + "xyz to call it"),
    ("a Switchboard token", "sba_" + "Q" * 43),
    ("a Switchboard token", "sbr_" + "q_" * 21 + "z"),
    ("an AWS access key", "AKIA" + "IOSFODNN7EXAMPLE"),
    ("an AWS secret access key", "aws_secret_access_key = " + AWS_SECRET),
    ("an AWS secret access key", "export AWS_SECRET_ACCESS_KEY=" + AWS_SECRET),
    ("an AWS secret access key", '"SecretAccessKey": "' + AWS_SECRET + '"'),
    ("a GitHub token", "ghp_" + "a1B2" * 9),
    ("a GitHub token", "github_pat_" + "11ABCDEFG" * 3),
    ("a GitLab token", "glpat-" + "x" * 20),
    ("a Slack token", "xoxb-" + "1234567890-abc"),
    ("an API key", "sk-ant-" + "api03-" + "k" * 30),
    ("an API key", "sk-proj-" + "p" * 40),
    ("a Google API key", "AIza" + "S" * 35),
    ("a Stripe secret key", "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"),
    ("an Authorization header", "curl -H 'Authorization: Bearer " + "abc.def.ghi-123'"),
    ("an Authorization header", "Authorization: Basic " + "dXNlcjpwYXNzd29yZA=="),
    ("a bearer token", "sent Bearer " + "eyJhbGciOiJIUzI1NiJ9.e30.x" + "y" * 10),
    ("a JWT", "the session cookie was " + JWT),
    ("a JWT", "id_token=" + JWT + "&state=1"),
    ("a URL with a password", "postgresql://u:" + "p@db.internal:5432/app"),
    ("a URL with a password", "DATABASE_URL=postgres://app:" + "s3cr3t@10.0.0.7/app?sslmode=require"),
    ("a URL with a password", "redis://:" + "hunter2@cache:6379/0"),
    ("a URL with a password", "jdbc:mysql://root:" + "Tr0ub4dor@mysql/db"),
    ("a URL with a password", "https://bot:" + "ghs-xyz-123@git.example/org/repo.git"),
    ("a password", "password=" + "hunter2"),
    ("a password", "mysql -u root --password=" + "Xk9#mQ2!"),
    ("a password", "passwd: " + "s3cr3t"),
    ("a password", 'PGPASSWORD="' + 'pg-2024-spring"'),
    ("a password", "db_password: '" + "p@ss w0rd'"),
    ("a password", "Password: " + "hUnTeRtWo"),
    ("a password", "password := " + '"12345678"'),
    ("a password", "passphrase => " + "'c0rrect-h0rse'"),
    ("a password", "(login with password=" + "Winter2024)"),
]

# Innocent look-alikes: each passes, and each passed before these shapes were added.
ORDINARY = [
    "Fixed the flaky test; the token bucket refilled too slowly under load.",
    "token",
    "Rotate the token and the refresh token nightly.",
    "The password reset page now validates the email first.",
    "password reset flow",
    "Bearer of bad news: the migration needs a lock.",
    "commit 3f2a9c0d1e2b4a5f6789abcdef0123456789abcd",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "todo 550e8400-e29b-41d4-a716-446655440000 continues it",
    "base64 of the fixture: aGVsbG8gd29ybGQgdGhpcyBpcyBhIGxvbmcgc3RyaW5n",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkeyJ0ZGQAAAIdAQ1eyJd9AAAAAElFTkSuQmCC",
    "sk-ing the edge case; ask-me-anything",
    "Authorization: see the README",
    "the sb_ prefix marks a vended token",
]
# Innocent look-alikes of the new shapes.
LOOK_ALIKES = [
    # JWT-looking strings that are not three base64url segments with a JSON header naming alg
    "eyJhbGciOiJIUzI1NiJ9.e30",  # two segments
    b64url({"typ": "JWT"}) + "." + b64url({"sub": "x"}) + "." + "S" * 43,  # a header without alg
    "eyJub3QganNvbg.eyJzdWIiOiJ4In0." + "S" * 43,  # a header that is not JSON
    "eyJhbGciOiJIUzI1NiJ9.e30.short",  # no signature to speak of
    "version eyJ.1.2 of the parser",
    # URLs with a user but no password, or a stand-in for one
    "ssh://git@github.com/org/repo.git",
    "https://ada@example.com/profile",
    "postgresql://app@db.internal/app",
    "postgresql://app:@db.internal/app",
    "postgresql://app:***@db.internal/app",
    "postgresql://app:${PGPASSWORD}@db.internal/app",
    "postgresql://app:<password>@db.internal/app",
    "postgresql://user:password@localhost/app",
    "https://example.com:8443/a@b",
    "git@github.com:org/repo.git",
    "mailto:ada@example.com",
    # `password:` with no value, or a word, a mask, a reference or code instead of one
    "password: see vault",
    'password: "see the vault"',
    "password: in 1Password",
    "password: ***",
    "password: ********",
    "password: <redacted>",
    "password: [REDACTED]",
    "password: ${VAR}",
    "password=$PGPASSWORD",
    "password: %(password)s",
    "password=%s",
    "password: {{ vault_db_password }}",
    "password: changeme",
    "password: rotated",
    "reset the password: done.",
    "Password: NONE",
    "password=",
    'password: ""',
    "password: str",
    "password: SecretStr",
    "password: Optional[str] = None",
    "password = getpass()",
    "password = os.environ['DB_PASSWORD']",
    "password = settings.DB_PASSWORD",
    "password_file: /run/secrets/db",
    "password: /run/secrets/db",
    "password_hash: $2b$12$abcdefghijklmnopqrstuv",
    "reset_password_url: https://example.com/reset",
    "if password == expected:",
    "passwordless: true",
    # an AWS-like 40 characters without the name
    "the key id is 40 chars: " + AWS_SECRET,
    "secret_access_key: <from the vault>",
]


@pytest.mark.parametrize(("what", "text"), CREDENTIALS, ids=[f"{w}-{i}" for i, (w, _) in enumerate(CREDENTIALS)])
def test_text_that_is_plainly_a_credential_is_refused_naming_the_argument_and_the_kind(what, text):
    with pytest.raises(Invalid) as refused:
        screen_secrets(text, "summary")
    assert refused.value.argument == "summary"
    assert f"({what})" in refused.value.message and "must not contain secrets" in refused.value.message


@pytest.mark.parametrize(("what", "text"), CREDENTIALS, ids=[f"{w}-{i}" for i, (w, _) in enumerate(CREDENTIALS)])
def test_a_refusal_never_echoes_the_credential(what, text):
    with pytest.raises(Invalid) as refused:
        screen_json({"notes": ["first", {"detail": text}]}, "payload")
    assert refused.value.argument == "payload"
    assert refused.value.message == (f"payload looks like it holds a credential ({what}); it is shown to whoever "
                                     "works on this todo, so it must not contain secrets")


@pytest.mark.parametrize("text", ORDINARY + LOOK_ALIKES)
def test_ordinary_text_ids_hashes_the_word_token_and_stand_ins_for_secrets_pass(text):
    screen_secrets(text, "summary")
    assert clean_note(text, 2048)[0] == text
    assert json_value({"text": text, "list": [text], text[:200]: 1}, "result")["text"] == text


def test_a_note_and_an_artifact_are_screened_too():
    with pytest.raises(Invalid) as note:
        clean_note("my key: " + "AKIA" + "IOSFODNN7EXAMPLE", 2048)
    assert note.value.argument == "text"
    with pytest.raises(Invalid) as artifact:
        clean_artifact("https://ci.example/run/7?key=" + "AKIA" + "IOSFODNN7EXAMPLE")
    assert artifact.value.argument == "artifact"
    assert clean_artifact("https://ci.example/run/7") == "https://ci.example/run/7"


@pytest.mark.parametrize(("where", "value"), [
    ("a string deep in an array", {"steps": [{"run": ["deploy", "--token", "ghp_" + "a1B2" * 9]}]}),
    ("a key", {"postgresql://u:" + "p@db/app": ["the database"]}),
    ("a member named password", {"db": {"password": "hunter2"}}),
    ("a member named like a password", {"DB_PASSWORD": "Winter2024"}),
    ("a numeric password", {"password": 31415926}),
    ("an AWS secret as a member", {"aws_secret_access_key": AWS_SECRET}),
    ("a JWT value", {"headers": {"cookie": "session=" + JWT}}),
])
def test_json_is_screened_in_its_keys_strings_and_named_members(where, value):
    with pytest.raises(Invalid) as refused:
        json_value(value, "result")
    assert refused.value.argument == "result"


@pytest.mark.parametrize("value", [
    {"password": "see vault", "password_policy": {"min_length": 12}, "token": "rotated"},
    {"password": None, "passwd": True, "reset": "password reset flow"},
    {"user": "ada", "url": "https://ada@example.com", "sha": "3f2a9c0d1e2b4a5f6789abcdef0123456789abcd"},
    {"password": {"type": "string", "writeOnly": True}},
    ["eyJhbGciOiJIUzI1NiJ9", "e30", "S" * 43],  # a JWT's segments apart are not one
])
def test_json_with_innocent_look_alikes_passes(value):
    assert json_value(value, "payload") == value


def test_json_pieces_are_not_read_across_each_other():
    """Two strings side by side never make a credential together (the join is a NUL)."""
    for value in (["password:", "hunter2", "password:"], ["s3cr3t@db", "postgres://app:", "s3cr3t@db"],
                  {"a": ["password:"], "b": ["hunter2"], "c": ["password:"]}):
        assert json_value(value, "result") == value


def test_a_payload_typed_into_the_board_form_is_screened_naming_the_field():
    with pytest.raises(Invalid) as refused:
        json_object_text('{"dsn": "postgresql://app:' + 'hunter2@db/app"}', "payload")
    assert refused.value.argument == "payload" and "(a URL with a password)" in refused.value.message
