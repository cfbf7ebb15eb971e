"""A bounded fuzz of every MCP tool, through the SDK's client (both protocol generations) over
HTTP against a real `switchboard serve`.

Hypothesis draws the calls (derandomized, so CI runs the same ones every time): for each
argument a value of any JSON type, a plausible one, a huge string or a deeply nested value;
ids of the caller's todos in every state, of another endpoint's todos and never minted;
lease tokens that are right, another attempt's, another endpoint's, stale, made up, or a
bearer token. References are resolved when the call is made, against todos prepared in the
state asked for. Every string that is neither an id nor a claimant carries a unique marker.

Checked: no HTTP 5xx, no `internal` tool error and no JSON-RPC -32603; an error call
changes nothing (a checksum of the todos and attempts tables, before and after); and, at
the end, no marker and no token appears anywhere in the server's log."""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import re
import secrets
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx
import hypothesis.strategies as st
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from board.mcp.tools import SPECS
from board.store.vocabulary import STATES
from tests.faults import harness as h

TOOLS = {spec.name: spec for spec in SPECS}
UNMARKED = {"id", "claimant"}  # ids and claimants may be logged (capped, escaped); nothing else may
MARKER = re.compile(r"zqmk\d{6}")
KEEP = set(STATES) | {"input_required", "auth_required", "q", "r"}  # valid constants left as they are
# The SDK's client's -32603 for an HTTP error whose body is not JSON-RPC (such as the 413 its
# server gives a body over 4 MiB) is judged by the HTTP status it stands for.
STAND_IN = h.STAND_IN
KINDS = ("pending", "claimed", "fenced", "interrupted", "done", "retrying", "dead", "canceled")


@dataclass(frozen=True)
class Ref:
    """A todo id or a lease token, resolved against live fixtures when the call is made."""

    what: str  # "id" | "token"
    kind: str


# -- strategies --------------------------------------------------------------------------

def nested(depth: int, leaf: Any, as_object: bool) -> Any:
    value = leaf
    for i in range(depth):
        value = {f"k{i % 3}": value} if as_object else [value]
    return value


@functools.cache
def json_values(bad_unicode: bool) -> st.SearchStrategy:
    text = strings(bad_unicode)
    scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
               | st.floats(allow_nan=False, allow_infinity=False) | text)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(text, inner, max_size=4), max_leaves=12)


def huge(chars: st.SearchStrategy) -> st.SearchStrategy:
    return st.builds(lambda c, n: c * n, chars, st.sampled_from([3000, 70_000, 600_000]))


def deep(leaves: st.SearchStrategy) -> st.SearchStrategy:
    # The SDK's client refuses to serialize values nested about 250 deep, so this is as deep as
    # a call through it goes (past the 200 levels a JSON parser commonly allows).
    return st.builds(nested, st.sampled_from([40, 150, 240]), leaves, st.booleans())


@functools.cache
def strings(bad_unicode: bool) -> st.SearchStrategy:
    """Text; with bad_unicode, NUL characters and lone surrogates are always in it somewhere."""
    if not bad_unicode:
        plain = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=40)
        return plain | st.sampled_from(["", " ", "\n\r\t", "\x1b[31mred", "\u202eevil", "../../etc/passwd",
                                        "'; DROP TABLE todos; --", "%00", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "null", "0"])
    bad = st.sampled_from(["\x00", "\ud800", "\udfff", "a\x00b", "\udc80x", "\x00\ud800"])
    return st.builds(lambda a, b, c: a + b + c, st.text(max_size=8), bad, st.text(max_size=8))


@functools.cache
def id_values(bad_unicode: bool) -> st.SearchStrategy:
    refs = st.builds(Ref, st.just("id"), st.sampled_from(
        [f"own_{k}" for k in KINDS] + ["foreign_pending", "foreign_fenced", "never_minted"]))
    return refs | strings(bad_unicode) | st.sampled_from(["", "x" * 65, str(uuid.uuid4())])


@functools.cache
def token_values(bad_unicode: bool) -> st.SearchStrategy:
    return st.builds(Ref, st.just("token"), st.sampled_from(
        ["right", "other", "foreign", "stale", "made_up", "bearer"])) | strings(bad_unicode)


def artifacts() -> st.SearchStrategy:
    return st.sampled_from(["mcp://cairn/{m}", "https://example.com/{m}", "https://{m}.example/x?y=1",
                            "http://example.com/{m}", "mcp://cairn/{m}/../x", "javascript:{m}",
                            "https://example.com/" + "a" * 600 + "{m}"])


@functools.cache
def plausible(name: str) -> st.SearchStrategy:
    """Values close to what the argument takes."""
    if name in ("limit", "attempts_limit", "max_attempts"):
        return st.integers(-5, 1005)
    if name == "lease_seconds":
        return st.one_of(st.integers(-10, 10**7), st.floats(-1, 1e6, allow_nan=False))
    if name in ("require_fence", "dead_letter"):
        return st.booleans()
    if name == "state":
        return st.sampled_from(list(STATES) + ["PENDING", "resumed"])
    if name == "queue":
        return st.sampled_from(["q", "r", "work", "a" * 65, "q r", "{m}"])
    if name == "artifact":
        return artifacts()
    if name in ("payload", "routing", "result"):
        return st.dictionaries(st.text(max_size=8), json_values(False), max_size=4)
    return strings(False)


@functools.cache
def valid(name: str) -> st.SearchStrategy:
    """A value the argument accepts (the call may still fail on the todo's state)."""
    ranges = {"limit": (1, 200), "attempts_limit": (1, 50), "max_attempts": (1, 1000)}
    if name in ranges:
        return st.integers(*ranges[name])
    if name == "lease_seconds":
        return st.integers(1, 3600) | st.floats(1, 3600)
    if name == "id":
        return st.builds(Ref, st.just("id"), st.sampled_from(
            [f"own_{k}" for k in KINDS] + ["foreign_pending", "foreign_fenced", "never_minted"]))
    if name == "lease_token":
        return st.builds(Ref, st.just("token"), st.sampled_from(["right", "right", "other", "stale", "made_up"]))
    if name == "state":
        return st.sampled_from(STATES)
    if name == "queue":
        return st.sampled_from(["q", "r"])
    if name == "artifact":
        return st.sampled_from(["mcp://cairn/{m}", "https://example.com/{m}"])
    if name in ("payload", "routing", "result"):
        return st.dictionaries(st.text(max_size=8), json_values(False), max_size=4)
    if name == "title":
        return st.text(st.characters(exclude_categories=["Cs", "Cc"]), min_size=1, max_size=40)
    return plausible(name)


@functools.cache
def argument(name: str, bad_unicode: bool) -> st.SearchStrategy:
    text = strings(bad_unicode)
    if name == "id":
        specific = id_values(bad_unicode)
    elif name == "lease_token":
        specific = token_values(bad_unicode)
    else:
        specific = plausible(name) if not bad_unicode else text
    anything = json_values(bad_unicode)
    big = huge(st.sampled_from(["a", "é", "😀", "\x00" if bad_unicode else "b"]))
    nest = deep(text | st.integers())
    # Mostly plausible values, so that calls get past the first check and reach the store.
    return st.integers(0, 19).flatmap(lambda k: specific if k < 14 else anything if k < 17 else big if k < 19
                                      else nest)


@st.composite
def tool_calls(draw, bad_unicode: bool = False):
    if draw(st.integers(0, 99)) == 0:
        return "no_such_tool", {"id": draw(id_values(bad_unicode))}
    name = draw(st.sampled_from(sorted(TOOLS)))
    spec = TOOLS[name]
    # Some calls are well formed throughout, so they reach the todo (and the state checks).
    clean = not bad_unicode and draw(st.integers(0, 9)) < 4
    args = {}
    for arg in spec.arguments:
        required = arg in spec.required
        if required and not clean and draw(st.integers(0, 19)) == 0:
            continue  # a required argument left out
        if not required and draw(st.booleans()):
            continue
        args[arg] = draw(valid(arg) if clean else argument(arg, bad_unicode))
    if not clean and draw(st.integers(0, 9)) == 0:
        args[draw(strings(bad_unicode))] = draw(json_values(bad_unicode))  # an argument it does not take
    if bad_unicode and not any(_has_bad(v) for v in args.values()):
        args["id"] = draw(strings(True))
    return name, args


def _has_bad(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value or any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, dict):
        return any(_has_bad(k) or _has_bad(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_bad(v) for v in value)
    return False


def draw_calls(n: int, bad_unicode: bool) -> list[tuple[str, dict]]:
    """n calls, the same ones on every run."""
    return h.drawn(tool_calls(bad_unicode), n)


# -- fixtures in every state, made through the store -------------------------------------

class Fixtures:
    """Todos of the fuzzed endpoint in every state, and another endpoint's; made on demand
    through the test process's store whenever the one on hand has moved on."""

    def __init__(self, store, db):
        self.store, self.db = store, db
        self.ids: dict[str, str] = {}
        self.tokens: dict[str, str] = {}  # todo id -> its open attempt's lease token
        self.stale: list[str] = []  # tokens of attempts closed since
        self.secrets: set[str] = set()  # every real token; none may reach the log

    async def setup(self) -> None:
        user = (await self.store.user_insert("fuzzer", "not-a-real-hash"))["id"]
        self.token, self.agent = await h.vend(self.store, user_id=user, queues=("q", "r"), agent_id="fuzzer")
        self.other_token, self.other = await h.vend(self.store, queues=("q",), agent_id="other")
        self.secrets |= {self.token, self.other_token}

    async def _make(self, kind: str) -> str:
        s = self.store
        agent = self.other if kind.startswith("foreign_") else self.agent
        kind = kind.removeprefix("own_").removeprefix("foreign_")
        todo = await s.todo_add(agent, queue="q", title=f"fixture {kind}", max_attempts=1 if kind == "dead" else 5)
        tid = todo["id"]
        if kind == "pending":
            return tid
        if kind == "canceled":
            await s.todo_cancel(agent, tid)
            return tid
        claim = await s.todo_claim(agent, tid, require_fence=kind in ("fenced", "interrupted", "done"))
        token = claim.get("lease_token")
        if token:
            self.secrets.add(token)
        if kind in ("fenced", "interrupted"):
            self.tokens[tid] = token
        if kind == "interrupted":
            await s.todo_interrupt(agent, tid, state="input_required", lease_token=token)
        elif kind == "done":
            await s.todo_complete(agent, tid, lease_token=token)
            self.stale.append(token)
        elif kind in ("retrying", "dead"):
            await s.todo_fail(agent, tid)
        return tid

    async def _state(self, tid: str) -> tuple[str, bool] | None:
        found = await h.rows(self.db, "SELECT state::text AS state, next_retry_at IS NOT NULL AS retry, "
                                       "(SELECT count(*) FROM attempts a WHERE a.todo_id = t.id AND a.ended_at IS NULL) "
                                       "AS open FROM todos t WHERE id = %s", (tid,))
        return found[0] if found else None

    async def id_of(self, kind: str) -> str:
        if kind == "never_minted":
            return str(uuid.uuid4())
        want = kind.removeprefix("own_").removeprefix("foreign_")
        tid = self.ids.get(kind)
        if tid is not None:
            row = await self._state(tid)
            expected = {"pending": ("pending", False), "claimed": ("claimed", False), "fenced": ("claimed", False),
                        "interrupted": ("input_required", False), "done": ("done", False),
                        "retrying": ("failed", True), "dead": ("failed", False), "canceled": ("canceled", False)}[want]
            if row is None or (row["state"], row["retry"]) != expected:
                tid = None
        if tid is None:
            tid = self.ids[kind] = await self._make(kind)
        return tid

    async def token_of(self, kind: str, todo_id: str | None) -> str:
        if kind == "right" and todo_id in self.tokens:
            return self.tokens[todo_id]
        if kind in ("right", "other"):
            other = await self.id_of("own_fenced")
            return self.tokens.get(other) or "made-up"
        if kind == "foreign":
            return self.tokens.get(await self.id_of("foreign_fenced"), "made-up")
        if kind == "stale":
            if not self.stale:
                await self.id_of("own_done")
            return self.stale[-1]
        if kind == "bearer":
            return self.other_token
        return "{m}" + secrets.token_urlsafe(24)  # made up, in the shape of a real one

    async def resolve(self, args: dict) -> dict:
        out = dict(args)
        if isinstance(out.get("id"), Ref):
            out["id"] = await self.id_of(out["id"].kind)
        for key, value in out.items():
            if isinstance(value, Ref) and value.what == "token":
                out[key] = await self.token_of(value.kind, out.get("id") if isinstance(out.get("id"), str) else None)
            elif isinstance(value, Ref):
                out[key] = await self.id_of(value.kind)
        return out


class Markers:
    """Plants a unique marker in every string of the arguments that may not be logged."""

    def __init__(self):
        self.planted: set[str] = set()
        self._n = itertools.count(1)

    def _new(self) -> str:
        marker = f"zqmk{next(self._n):06d}"
        self.planted.add(marker)
        return marker

    def _mark_text(self, value: str, secrets_: set[str]) -> str:
        if value in KEEP or value in secrets_:
            return value
        if "{m}" in value:
            return value.replace("{m}", self._new())
        return value + " " + self._new() if len(value) < 100_000 else self._new() + value

    def _mark(self, value: Any, secrets_: set[str]) -> Any:
        """Marks every string in value, dict keys included; in place, without recursion (the
        values nest thousands deep)."""
        if isinstance(value, str):
            return self._mark_text(value, secrets_)
        stack = [value]
        while stack:
            node = stack.pop()
            if isinstance(node, list):
                for i, item in enumerate(node):
                    if isinstance(item, str):
                        node[i] = self._mark_text(item, secrets_)
                    elif isinstance(item, (list, dict)):
                        stack.append(item)
            elif isinstance(node, dict):
                items = list(node.items())
                node.clear()
                for k, item in items:
                    if isinstance(item, str):
                        item = self._mark_text(item, secrets_)
                    elif isinstance(item, (list, dict)):
                        stack.append(item)
                    node[self._mark_text(k, secrets_) if isinstance(k, str) else k] = item
        return value

    def plant(self, args: dict, secrets_: set[str]) -> dict:
        """Argument names the tools know stay as they are; any other name is marked too."""
        return {(k if k in ARGUMENT_NAMES else self._mark(k, secrets_)): (v if k in UNMARKED else self._mark(v, secrets_))
                for k, v in args.items()}


ARGUMENT_NAMES = {arg for spec in SPECS for arg in spec.arguments}


# -- the run -----------------------------------------------------------------------------

@dataclass
class Findings:
    calls: int = 0
    errors: int = 0
    internal: list = None
    changed: list = None
    by_outcome: Counter = None

    def __post_init__(self):
        self.internal, self.changed, self.by_outcome, self.slowest = [], [], Counter(), []


async def fuzz(db_url: str, store, tmp_path, calls: list[tuple[str, dict]]) -> tuple[Findings, h.Statuses, list, int]:
    async with await h.reader(db_url) as db:
        return await _fuzz(db_url, db, store, tmp_path, calls)


async def _fuzz(db_url: str, db, store, tmp_path, calls) -> tuple[Findings, h.Statuses, list, int]:
    fixtures = Fixtures(store, db)
    await fixtures.setup()
    markers = Markers()
    statuses = h.Statuses()
    found = Findings()
    env = {"SWITCHBOARD_REAPER_INTERVAL_SECONDS": "0", "SWITCHBOARD_RETRY_INTERVAL_SECONDS": "0",
           "SWITCHBOARD_RETRY_BASE_SECONDS": "60", "SWITCHBOARD_RETRY_MAX_SECONDS": "600"}
    async with h.serving(db_url, tmp_path / "server.log", **env) as server:
        async with h.mcp_client(server.url, fixtures.token, "modern", statuses=statuses) as modern, \
                h.mcp_client(server.url, fixtures.token, "legacy", statuses=statuses) as legacy, \
                httpx.AsyncClient(base_url=server.url, timeout=60, event_hooks={"response": [statuses.hook]},
                                  headers={"Authorization": f"Bearer {fixtures.token}"}) as raw:
            for i, (tool, drawn) in enumerate(calls):
                args = markers.plant(await fixtures.resolve(drawn), fixtures.secrets)
                before = await h.tables_checksum(db)
                statuses.recent.clear()
                started = time.monotonic()
                if _has_surrogate(args):  # the SDK's client cannot encode these at all
                    outcome, internal = await send_raw(raw, tool, args, i)
                else:
                    outcome, internal = await send_sdk((modern, legacy)[i % 2], tool, args, statuses)
                found.calls += 1
                found.by_outcome[outcome] += 1
                found.slowest = sorted(found.slowest + [(round(time.monotonic() - started, 3), tool,
                                                         _short(args)[:120])])[-5:]
                if internal:
                    found.internal.append((tool, _short(args), internal))
                if outcome != "ok":
                    found.errors += 1
                    if await h.tables_checksum(db) != before:
                        found.changed.append((tool, _short(args), outcome))
        log = server.log_text()
    leaked = sorted(set(MARKER.findall(log)) & markers.planted)
    leaked += [f"token {t[:6]}..." for t in fixtures.secrets if t in log]
    return found, statuses, leaked, len(markers.planted)


async def send_sdk(client, tool: str, args: dict, statuses: h.Statuses) -> tuple[str, str | None]:
    """One call through the SDK's client: (outcome, what was internal about it, if anything)."""
    try:
        result = await asyncio.wait_for(client.call_tool(tool, args), 60)
    except MCPError as err:
        refused = [s for s in statuses.recent if 400 <= s < 500]
        if err.code == types.INTERNAL_ERROR and STAND_IN in str(err) and refused:
            return f"http {refused[0]}", None  # the client's stand-in for a plain HTTP refusal
        return f"jsonrpc {err.code}", str(err)[:200] if err.code == types.INTERNAL_ERROR else None
    if not result.is_error:
        return "ok", None
    code = h.error_of(result).get("code", "?")
    return code, "internal tool error" if code == "internal" else None


# The envelope a 2026-07-28 request carries (as the SDK's client sends it).
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "faults", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}}


async def send_raw(http, tool: str, args: dict, n: int) -> tuple[str, str | None]:
    """One 2026-07-28 tools/call as the SDK's client sends it, but with the JSON ASCII-escaped,
    so that a lone surrogate travels as \\udXXX (the SDK's client refuses to encode one)."""
    body = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": tool, "arguments": args, "_meta": META}}
    r = await http.post("/mcp", content=json.dumps(body).encode(), headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream",
        "mcp-protocol-version": META["io.modelcontextprotocol/protocolVersion"], "mcp-method": "tools/call",
        "mcp-name": tool})
    if r.status_code >= 500:
        return f"http {r.status_code}", f"HTTP {r.status_code}"
    try:
        reply = r.json()
    except ValueError:
        return f"http {r.status_code}", None
    if "error" in reply:
        code = reply["error"].get("code")
        return f"jsonrpc {code}", f"JSON-RPC {code}" if code == types.INTERNAL_ERROR else None
    result = reply.get("result") or {}
    if not result.get("isError"):
        return "ok", None
    code = json.loads(result["content"][0]["text"]).get("error", {}).get("code", "?")
    return code, "internal tool error" if code == "internal" else None


def _has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    stack = [value]
    while stack:
        node = stack.pop()
        items = list(node.items()) if isinstance(node, dict) else list(enumerate(node)) if isinstance(node, list) else []
        for k, v in items:
            if isinstance(k, str) and _has_surrogate(k) or isinstance(v, str) and _has_surrogate(v):
                return True
            if isinstance(v, (dict, list)):
                stack.append(v)
    return False


def _short(args: dict) -> str:
    text = repr(args)
    return text if len(text) < 300 else text[:300] + f"... ({len(text)} chars)"


def check(found: Findings, statuses: h.Statuses, leaked: list) -> None:
    assert statuses.counts and all(status < 500 for status in statuses.counts), statuses.counts
    assert found.internal == [], found.internal[:5]
    assert found.changed == [], found.changed[:5]
    assert leaked == [], leaked[:10]


async def test_every_tool_fuzzed_gives_no_5xx_no_internal_error_changes_nothing_on_error_and_logs_no_marker(
        db_url, store, size, tmp_path):
    started = time.monotonic()
    calls = draw_calls(size.fuzz_calls, bad_unicode=False)
    found, statuses, leaked, planted = await fuzz(db_url, store, tmp_path, calls)
    h.report("MCP fuzz", size, calls=found.calls, error_calls=found.errors, markers=planted, http_5xx=sum(n for s, n in statuses.counts.items() if s >= 500),
             internal=len(found.internal), changed=len(found.changed), leaked=len(leaked),
             seconds=round(time.monotonic() - started, 1))
    print(f"[faults] fuzz outcomes: {dict(found.by_outcome.most_common())}")
    print(f"[faults] slowest calls: {found.slowest}")
    check(found, statuses, leaked)
    assert found.calls >= 0.9 * len(calls)
    assert {"ok", "invalid", "not_found", "conflict"} <= set(found.by_outcome), found.by_outcome


async def test_every_tool_fuzzed_with_nul_and_lone_surrogates_answers_invalid_and_changes_nothing(
        db_url, store, size, tmp_path):
    started = time.monotonic()
    calls = draw_calls(size.bad_input_calls, bad_unicode=True)
    found, statuses, leaked, planted = await fuzz(db_url, store, tmp_path, calls)
    h.report("MCP fuzz, NUL and surrogates", size, calls=found.calls, error_calls=found.errors,
             markers=planted,
             http_5xx=sum(n for s, n in statuses.counts.items() if s >= 500), internal=len(found.internal),
             changed=len(found.changed), leaked=len(leaked), seconds=round(time.monotonic() - started, 1))
    print(f"[faults] fuzz outcomes: {dict(found.by_outcome.most_common())}")
    check(found, statuses, leaked)
    assert found.calls >= 0.9 * len(calls)
