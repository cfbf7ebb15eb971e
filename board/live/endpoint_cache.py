"""Authenticated endpoints, cached in the process so that an MCP call costs no token lookup.

An entry maps a bearer token's SHA-256 (never the token) to its endpoint. It is dropped
when the endpoint is revoked (or changed: an OAuth grant consented to again, whose earlier
tokens end), through the process's LISTEN fan-out: the revocation's
transaction notifies `endpoint_revoked`, which every server process receives at commit, so
a revoked token stops working in every process as soon as its LISTEN connection delivers
that (milliseconds; a call racing the delivery can still pass), and in the revoking process
itself at once, through the store's control observers. Three rules keep a missed
notification from leaving a revoked token usable:

- while the LISTEN connection is down, the cache is bypassed (every call looks up);
- after it reconnects, the cache is emptied (a revocation may have passed meanwhile);
- a lookup that a revocation overtook (the generation moved) is not stored.

Entries also expire after `ttl` seconds, which bounds how stale `last_used_at` can be, and
an OAuth access token's entry is not used past the token's own expiry.
While the database cannot be reached, a token this process has verified before (and has
not seen revoked) still authenticates, so its tool call is answered with the `unavailable`
tool error; any other token raises Unavailable, which /mcp answers with 503 and Retry-After.
"""

from __future__ import annotations

import time

from board.errors import Unavailable
from board.live.fanout import Fanout
from board.store.store import Agent, Store, hash_token


def _expired(agent: Agent) -> bool:
    """An OAuth access token past its expiry (a vended token does not expire)."""
    return agent.expires_at is not None and agent.expires_at <= time.time()


class EndpointCache:
    def __init__(self, store: Store, fanout: Fanout, *, ttl: float = 60.0, max_entries: int = 10_000):
        self.store = store
        self.fanout = fanout
        self.ttl = ttl
        self.max_entries = max_entries
        self._entries: dict[bytes, tuple[Agent, float]] = {}
        # Every token this process has verified, kept across resyncs but not revocations:
        # used only to answer a call while the database cannot be reached.
        self._known: dict[bytes, Agent] = {}
        self._generation = 0
        fanout.on_control(self.on_control)
        store.control_observers.append(self.on_control)  # this process's own revocations, at once

    async def authenticate(self, token: str) -> Agent | None:
        """The live endpoint behind a bearer token, or None (unknown or revoked)."""
        if not token:
            return None
        key = hash_token(token)
        now = time.monotonic()
        live = self.fanout.connected.is_set()
        hit = self._entries.get(key)
        if hit is not None and live and hit[1] > now and not _expired(hit[0]):
            return hit[0]
        generation = self._generation
        try:
            agent = await self.store.endpoint_authenticate(token)
        except Unavailable:
            known = self._known.get(key)
            if known is None or _expired(known):
                raise
            # The database is away, so nothing can be revoked meanwhile, and the call this
            # authenticates needs the database too: it is answered unavailable, not 401/503.
            return known
        if agent is None:
            self._entries.pop(key, None)
            self._known.pop(key, None)
            return None
        if generation == self._generation:  # not overtaken by a revocation
            if len(self._known) >= self.max_entries and key not in self._known:
                self._known.pop(next(iter(self._known)))
            self._known[key] = agent
        if live and generation == self._generation and self.fanout.connected.is_set():
            if len(self._entries) >= self.max_entries:
                self._entries.pop(next(iter(self._entries)))  # the oldest insertion
            self._entries[key] = (agent, now + self.ttl)
        return agent

    def on_control(self, event: dict) -> None:
        kind = event.get("kind")
        if kind in ("endpoint_revoked", "endpoint_changed"):  # changed: an OAuth grant consented to again
            self._generation += 1
            endpoint = event.get("endpoint")
            for key in [k for k, (agent, _) in self._entries.items() if agent.endpoint_id == endpoint]:
                del self._entries[key]
            for key in [k for k, agent in self._known.items() if agent.endpoint_id == endpoint]:
                del self._known[key]
        elif kind == "resync":
            self._generation += 1
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
