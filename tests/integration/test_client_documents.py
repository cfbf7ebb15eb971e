"""Client ID metadata documents (board/oauth/client_documents.py), fetched over real https
from tests/oauth_documents.py's server on 127.0.0.1: what is accepted, what is refused and
why, what is cached for how long, and that one URL is fetched once however many ask."""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import json
import logging
import time

import pytest
from mcp.client.auth.utils import is_valid_client_metadata_url

from board.config import Settings
from board.errors import Invalid
from board.oauth.client_documents import ClientDocumentError, ClientDocuments, is_document_client_id
from board.store.vocabulary import VERBS
from tests.conftest import LOAD_SLACK_SECONDS
from tests.oauth_documents import REDIRECT, DocumentServer

_paths = itertools.count()


class Clock:
    """The cache's clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def docs():
    with DocumentServer() as server:
        yield server


@pytest.fixture
def path():
    """A path no other test serves, so its hits are this test's."""
    return f"/c{next(_paths)}/client.json"


def settings(docs: DocumentServer, *, allow_private: bool = True, trust: bool = True) -> Settings:
    return Settings(oauth_client_metadata_ca_file=docs.ca_pem_path if trust else None,
                    oauth_client_metadata_allow_private=allow_private)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
async def documents(docs, clock):
    documents = ClientDocuments(settings(docs), clock=clock)
    yield documents
    await documents.aclose()


async def refused(documents: ClientDocuments, client_id: str) -> str:
    with pytest.raises(ClientDocumentError) as info:
        await documents.resolve(client_id)
    return info.value.message


# -- what a document client id is ---------------------------------------------------------


def test_an_https_url_with_a_path_is_a_document_id():
    assert is_document_client_id("https://host.example/client.json")
    assert is_document_client_id("https://host.example:8443/a/b?v=1")


@pytest.mark.parametrize("client_id", [
    "http://host.example/client.json",  # not https
    "https://host.example",  # no path
    "https://host.example/",  # the root path
    "https:///client.json",  # no host
    "https://host.example/client.json#top",  # a fragment
    "https://host.example/client.json#",  # an empty fragment
    "https://user:pw@host.example/client.json",  # a user name and password
    "https://host.example/a/../client.json",  # a .. segment
    "https://host.example/./client.json",  # a . segment
    "https://host.example:port/client.json",  # a port that is not a number
    "https://host.example/client .json",  # a space
    "0f8c5d1e-registered-client-id",  # a registered client's id
    "",
])
def test_a_url_that_is_not_https_with_a_host_and_a_path_is_not_a_document_id(client_id):
    assert not is_document_client_id(client_id)


@pytest.mark.parametrize("client_id", [
    "https://host.example/client.json", "https://h.example:1/a/b?q=1", "http://host.example/client.json",
    "https://host.example/", "https://host.example/client.json#top", "https://u@host.example/c.json"])
def test_every_document_id_is_one_the_sdk_client_would_send(client_id):
    assert not is_document_client_id(client_id) or is_valid_client_metadata_url(client_id)


async def test_a_plain_http_client_id_is_refused_without_a_fetch(docs, documents, path):
    docs.serve_client(path)
    http_id = docs.url(path).replace("https://", "http://", 1)
    assert not is_document_client_id(http_id)
    assert "must be an https URL" in await refused(documents, http_id)
    assert docs.hits(path) == 0


# -- a good document ----------------------------------------------------------------------


async def test_a_good_document_resolves_to_a_public_client_that_may_ask_for_every_verb(docs, documents, path):
    url = docs.serve_client(path, client_name="Good Host", redirect_uris=[REDIRECT, "https://host.example/cb"],
                            client_uri="https://host.example/", logo_uri="https://host.example/logo.png",
                            scope="list_todos")
    client = await documents.resolve(url)
    assert client.client_id == url
    assert client.client_name == "Good Host"
    assert [str(u) for u in client.redirect_uris] == [REDIRECT, "https://host.example/cb"]
    assert client.scope == " ".join(VERBS)
    assert client.token_endpoint_auth_method == "none"
    assert client.client_secret is None
    assert client.grant_types == ["authorization_code", "refresh_token"]
    assert client.response_types == ["code"]
    assert str(client.client_uri) == "https://host.example/"
    assert str(client.logo_uri) == "https://host.example/logo.png"
    assert docs.hits(path) == 1


async def test_a_document_with_a_private_use_redirect_and_a_bidi_name_resolves_with_the_name_cleaned(
        docs, documents, path):
    url = docs.serve_client(path, client_name="Evil\u202e Host\u200b", redirect_uris=[
        "cursor://anysphere.cursor-retrieval/oauth/callback", "com.example.app:/cb"])
    client = await documents.resolve(url)
    assert [str(u) for u in client.redirect_uris] == ["cursor://anysphere.cursor-retrieval/oauth/callback",
                                                      "com.example.app:/cb"]
    assert client.client_name == "Evil Host"


async def test_a_document_without_auth_method_or_grant_types_gets_the_defaults(docs, documents, path):
    url = docs.serve_client(path, token_endpoint_auth_method=None, grant_types=None, response_types=None)
    client = await documents.resolve(url)
    assert client.token_endpoint_auth_method == "none"
    assert client.grant_types == ["authorization_code", "refresh_token"]
    assert client.response_types == ["code"]


async def test_a_document_served_through_localhost_resolves(docs, documents, path):
    url = docs.serve_client(path, host="localhost")
    assert (await documents.resolve(url)).client_id == url


async def test_the_fetch_asks_for_json_uncompressed(docs, documents, path):
    await documents.resolve(docs.serve_client(path))
    headers = docs.request_headers(path)
    assert headers["accept"] == "application/json"
    assert headers["accept-encoding"] == "identity"


# -- refusals -----------------------------------------------------------------------------


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "streamed"])
async def test_a_document_over_64_kib_is_refused_naming_the_size(docs, documents, path, chunked):
    # A good document but for its size, so only the cap can refuse it.
    doc = docs.document(path, software_id="x" * (64 * 1024))
    docs.serve(path, json_body=doc, chunked=chunked)
    message = await refused(documents, docs.url(path))
    assert "larger than 64 KiB" in message


async def test_a_document_just_under_64_kib_is_accepted(docs, documents, path):
    doc = docs.document(path, software_id="")
    doc["software_id"] = "x" * (64 * 1024 - len(json.dumps(doc).encode()))
    assert len(json.dumps(doc).encode()) == 64 * 1024
    docs.serve(path, json_body=doc, chunked=True)
    assert (await documents.resolve(docs.url(path))).client_id == docs.url(path)


async def test_a_redirect_to_http_is_refused(docs, documents, path):
    target = path.replace("client.json", "target.json")
    docs.serve_client(target)
    docs.redirect(path, docs.url(target).replace("https://", "http://", 1))
    assert "redirected to a URL that is not https" in await refused(documents, docs.url(path))
    assert docs.hits(path) == 1
    assert docs.hits(target) == 0


async def test_an_https_redirect_is_followed_once(docs, documents, path):
    target = path.replace("client.json", "moved.json")
    # The document names the URL asked for (the client id), not where it moved to.
    docs.serve(target, json_body=docs.document(path, client_name="Moved"))
    docs.redirect(path, docs.url(target), status=301)
    client = await documents.resolve(docs.url(path))
    assert client.client_id == docs.url(path)
    assert client.client_name == "Moved"
    assert (docs.hits(path), docs.hits(target)) == (1, 1)


async def test_a_relative_redirect_is_followed(docs, documents, path):
    target = path.replace("client.json", "relative.json")
    docs.serve(target, json_body=docs.document(path))
    docs.redirect(path, target, status=307)
    assert (await documents.resolve(docs.url(path))).client_id == docs.url(path)


async def test_three_redirects_are_followed_and_a_fourth_is_refused(docs, documents, path):
    def chain(start: str, hops: int) -> list[str]:
        paths = [start] + [start.replace(".json", f"-hop{i}.json") for i in range(1, hops + 1)]
        for here, there in zip(paths, paths[1:]):
            docs.redirect(here, docs.url(there))
        docs.serve(paths[-1], json_body=docs.document(start))
        return paths

    three = chain(path, 3)
    assert (await documents.resolve(docs.url(path))).client_id == docs.url(path)
    assert [docs.hits(p) for p in three] == [1, 1, 1, 1]
    four = chain(path.replace("client.json", "longer.json"), 4)
    assert "redirected more than 3 times" in await refused(documents, docs.url(four[0]))
    assert [docs.hits(p) for p in four] == [1, 1, 1, 1, 0]


async def test_a_redirect_to_a_private_address_is_refused(docs, path):
    class OnlyTheTestServerAllowed(ClientDocuments):
        async def _check_host(self, url):  # the test server is private too: let it alone through
            if url.port != docs.port:
                await super()._check_host(url)

    documents = OnlyTheTestServerAllowed(settings(docs, allow_private=False))
    try:
        docs.redirect(path, "https://169.254.169.254/latest/meta-data/client.json")
        assert "private" in await refused(documents, docs.url(path))
        assert docs.hits(path) == 1
    finally:
        await documents.aclose()


async def test_a_document_naming_another_client_id_is_refused(docs, documents, path):
    docs.serve(path, json_body=docs.document(path, client_id="https://other.example/client.json"))
    message = await refused(documents, docs.url(path))
    assert "names another client id" in message
    assert "https://other.example/client.json" in message


async def test_a_document_naming_its_url_with_a_different_spelling_is_refused(docs, documents, path):
    # Compared as strings, never normalized: the host spelled in capitals is another id.
    docs.serve(path, json_body=docs.document(path, client_id=docs.url(path).replace("https://", "HTTPS://")))
    assert "names another client id" in await refused(documents, docs.url(path))


@pytest.mark.parametrize("body, expected", [
    (b"<html>not json</html>", "not JSON"),
    (b"\xff\xfe\x00garbage", "not JSON"),
    (b'["a", "list"]', "not a JSON object"),
], ids=["html", "binary", "array"])
async def test_a_body_that_is_not_a_json_object_is_refused(docs, documents, path, body, expected):
    docs.serve(path, body=body, content_type="application/json")
    assert expected in await refused(documents, docs.url(path))


@pytest.mark.parametrize("change, expected", [
    ({"client_id": None}, "has no client_id"),
    ({"redirect_uris": None}, "has no redirect_uris"),
    ({"redirect_uris": []}, "has no redirect_uris"),
    ({"redirect_uris": "http://127.0.0.1/cb"}, "must be a list"),
    ({"redirect_uris": ["http://host.example/callback"]}, "must be https, http on 127.0.0.1, [::1] or localhost"),
    ({"redirect_uris": [REDIRECT, "http://10.0.0.5/callback"]}, "must be https, http on 127.0.0.1"),
    ({"redirect_uris": ["javascript:alert(1)"]}, "redirect URI 'javascript:alert(1)' must be https"),
    ({"redirect_uris": ["file:///etc/passwd"]}, "redirect URI 'file:///etc/passwd' must be https"),
    ({"redirect_uris": [f"http://127.0.0.1:{n}/cb" for n in range(11)]}, "redirect_uris must name at most 10"),
    ({"redirect_uris": ["https://host.example/" + "a" * 2048]}, "longer than 2048 characters"),
    ({"client_name": "n" * 201}, "client_name must be at most 200 characters"),
    ({"logo_uri": "https://host.example/" + "a" * 2048}, "logo_uri must be at most 2048 characters"),
    ({"software_id": "a\ud800b"}, "'software_id' must not hold NUL characters or lone surrogates"),
    ({"contacts": ["a\x00b"]}, "'contacts' must not hold NUL characters or lone surrogates"),
    ({"redirect_uris": ["https://host.example/cb#frag"]}, "must not have a fragment"),
    ({"token_endpoint_auth_method": "client_secret_post"}, 'only "none" is'),
    ({"token_endpoint_auth_method": "private_key_jwt"}, 'only "none" is'),
    ({"client_secret": "s3cret"}, "must not hold a client_secret"),
    ({"grant_types": ["refresh_token"]}, "grant_types must include authorization_code"),
    ({"grant_types": ["client_credentials"]}, "grant_types must include authorization_code"),
    ({"response_types": ["token"]}, 'response_types must include "code"'),
    ({"logo_uri": "not a url"}, "logo_uri"),
], ids=lambda v: v if isinstance(v, str) else "-".join(f"{k}" for k in v))
async def test_a_document_with_bad_metadata_is_refused_saying_what(docs, documents, path, change, expected):
    docs.serve(path, json_body=docs.document(path, **change))
    assert expected in await refused(documents, docs.url(path))


async def test_a_client_secret_in_the_document_is_never_echoed(docs, documents, path):
    docs.serve(path, json_body=docs.document(path, client_secret="very-secret-value"))
    assert "very-secret-value" not in await refused(documents, docs.url(path))


async def test_an_http_error_status_is_refused_naming_it(docs, documents, path):
    docs.serve(path, status=404, body="gone")
    assert "HTTP status 404" in await refused(documents, docs.url(path))
    other = path.replace("client.json", "other.json")
    assert "HTTP status 404" in await refused(documents, docs.url(other))  # never served


async def test_a_private_address_is_refused_when_private_hosts_are_not_allowed(docs, path):
    documents = ClientDocuments(settings(docs, allow_private=False))
    try:
        for host in ("127.0.0.1", "localhost"):  # an IP literal, and a name resolving to loopback
            url = docs.serve_client(path, host=host)
            message = await refused(documents, url)
            assert "private" in message and "loopback" in message, message
        assert docs.hits(path) == 0  # refused before connecting
    finally:
        await documents.aclose()


@pytest.mark.parametrize("host", ["10.1.2.3", "169.254.169.254", "[::1]", "[::ffff:127.0.0.1]", "[fe80::1]",
                                  "0.0.0.0", "224.0.0.1", "100.64.0.1", "192.168.0.10", "[fc00::1]"])
async def test_an_ip_literal_host_in_a_non_public_range_is_refused(docs, host):
    documents = ClientDocuments(settings(docs, allow_private=False))
    try:
        assert "private" in await refused(documents, f"https://{host}/client.json")
    finally:
        await documents.aclose()


async def test_an_untrusted_certificate_is_refused(docs, path):
    documents = ClientDocuments(settings(docs, trust=False))
    try:
        assert "TLS certificate could not be verified" in await refused(documents, docs.serve_client(path))
    finally:
        await documents.aclose()


def test_an_unreadable_ca_file_is_refused_at_start(tmp_path):
    missing = tmp_path / "missing.pem"
    with pytest.raises(Invalid, match="SWITCHBOARD_OAUTH_CLIENT_METADATA_CA_FILE"):
        ClientDocuments(Settings(oauth_client_metadata_ca_file=str(missing)))


@pytest.mark.parametrize("slow", ["delay", "body_delay"], ids=["slow-headers", "slow-body"])
async def test_a_server_slower_than_the_timeout_is_refused_as_timed_out(docs, path, slow):
    documents = ClientDocuments(settings(docs), timeout=0.5)
    try:
        docs.serve(path, json_body=docs.document(path), **{slow: 5.0})
        start = time.monotonic()
        assert "timed out" in await refused(documents, docs.url(path))
        assert time.monotonic() - start < 0.5 + LOAD_SLACK_SECONDS
    finally:
        await documents.aclose()


# -- caching ------------------------------------------------------------------------------


def _http_date(offset: float) -> str:
    return email.utils.formatdate(time.time() + offset, usegmt=True)


@pytest.mark.parametrize("headers, kept", [
    ({}, 300),
    ({"Cache-Control": "max-age=60"}, 60),
    ({"Cache-Control": "public, max-age=120, must-revalidate"}, 120),
    ({"Cache-Control": "max-age=100", "Age": "40"}, 60),
    ({"Cache-Control": "max-age=999999"}, 24 * 3600),
    ({"Expires": "EXPIRES+600", "Date": "DATE"}, 600),
    ({"Cache-Control": "max-age=30", "Expires": "EXPIRES+600"}, 30),
], ids=["default", "max-age", "directives", "age", "capped", "expires", "max-age-over-expires"])
async def test_a_document_is_kept_as_long_as_its_cache_headers_say(docs, documents, clock, path, headers, kept):
    now = time.time()
    fill = {"EXPIRES+600": email.utils.formatdate(now + 600, usegmt=True),
            "DATE": email.utils.formatdate(now, usegmt=True)}
    url = docs.serve_client(path, headers={k: fill.get(v, v) for k, v in headers.items()})
    await documents.resolve(url)
    assert docs.hits(path) == 1
    clock.now += kept - 2
    await documents.resolve(url)
    assert docs.hits(path) == 1  # still fresh: from the cache
    clock.now += 4
    await documents.resolve(url)
    assert docs.hits(path) == 2  # past its lifetime: fetched again


@pytest.mark.parametrize("cache_control", ["no-store", "no-cache", "max-age=0", "private, no-store"])
async def test_a_document_that_may_not_be_kept_is_fetched_every_time(docs, documents, path, cache_control):
    url = docs.serve_client(path, headers={"Cache-Control": cache_control})
    await documents.resolve(url)
    await documents.resolve(url)
    assert docs.hits(path) == 2


async def test_a_cached_client_is_a_copy_its_caller_cannot_spoil(docs, documents, path):
    url = docs.serve_client(path, client_name="Original")
    first = await documents.resolve(url)
    first.client_name = "Spoiled"
    first.redirect_uris.clear()
    again = await documents.resolve(url)
    assert again.client_name == "Original" and again.redirect_uris
    assert docs.hits(path) == 1


async def test_two_concurrent_resolves_of_one_url_fetch_once(docs, documents, path):
    # no-store: the cache cannot explain one fetch, only sharing the one in flight can.
    docs.serve(path, json_body=docs.document(path, client_name="Shared"), headers={"Cache-Control": "no-store"},
               delay=0.3)
    first, second = await asyncio.gather(documents.resolve(docs.url(path)), documents.resolve(docs.url(path)))
    assert first.client_name == second.client_name == "Shared"
    assert docs.hits(path) == 1
    await documents.resolve(docs.url(path))
    assert docs.hits(path) == 2  # done and not kept: the next resolve fetches


async def test_a_caller_that_gives_up_does_not_cancel_the_shared_fetch(docs, documents, path):
    docs.serve(path, json_body=docs.document(path), delay=0.3)
    quitter = asyncio.create_task(documents.resolve(docs.url(path)))
    stayer = asyncio.create_task(documents.resolve(docs.url(path)))
    await asyncio.sleep(0.05)
    quitter.cancel()
    assert (await stayer).client_id == docs.url(path)
    assert docs.hits(path) == 1


async def test_an_error_is_cached_briefly(docs, documents, clock, path):
    docs.serve(path, json_body=docs.document(path, redirect_uris=None))
    assert "has no redirect_uris" in await refused(documents, docs.url(path))
    docs.serve_client(path)  # fixed, but the refusal is remembered for a while
    clock.now += 25
    assert "has no redirect_uris" in await refused(documents, docs.url(path))
    assert docs.hits(path) == 1
    clock.now += 10
    assert (await documents.resolve(docs.url(path))).client_id == docs.url(path)
    assert docs.hits(path) == 2


async def test_a_timeout_is_cached_briefly_too(docs, clock, path):
    documents = ClientDocuments(settings(docs), timeout=0.3, clock=clock)
    try:
        docs.serve(path, json_body=docs.document(path), body_delay=5.0)
        assert "timed out" in await refused(documents, docs.url(path))
        assert "timed out" in await refused(documents, docs.url(path))
        assert docs.hits(path) == 1
    finally:
        await documents.aclose()


async def test_the_cache_keeps_a_bounded_number_of_urls(docs, clock, path):
    documents = ClientDocuments(settings(docs), max_entries=2, clock=clock)
    try:
        urls = [docs.serve_client(path.replace("client.json", f"{i}.json")) for i in range(3)]
        for url in urls:
            await documents.resolve(url)
        await documents.resolve(urls[2])
        await documents.resolve(urls[1])
        assert [docs.hits(path.replace("client.json", f"{i}.json")) for i in range(3)] == [1, 1, 1]
        await documents.resolve(urls[0])  # the oldest was dropped for the third
        assert docs.hits(path.replace("client.json", "0.json")) == 2
    finally:
        await documents.aclose()


# -- logging ------------------------------------------------------------------------------


async def test_each_fetch_logs_one_line_with_its_host_and_outcome_never_the_document(docs, documents, path, caplog):
    good = docs.serve_client(path, client_name="Secret Name Of The Host")
    bad = path.replace("client.json", "bad.json")
    docs.serve(bad, json_body=docs.document(bad, client_id="https://other.example/x", client_name="Hidden Too"))
    with caplog.at_level(logging.INFO, logger="switchboard.oauth"):
        await documents.resolve(good)
        await documents.resolve(good)  # from the cache: no fetch, no line
        with pytest.raises(ClientDocumentError):
            await documents.resolve(docs.url(bad))
    lines = [r.getMessage() for r in caplog.records if "client metadata document" in r.getMessage()]
    assert len(lines) == 2, lines
    assert "host=127.0.0.1" in lines[0] and "outcome=ok" in lines[0]
    assert "host=127.0.0.1" in lines[1] and "outcome=other_client_id" in lines[1]
    text = "\n".join(lines)
    assert "Secret Name" not in text and "Hidden Too" not in text and "other.example" not in text
