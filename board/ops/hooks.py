"""Hooks: committed-transition hooks in process, and durable notify hooks over HTTP.

Committed-transition hooks (REQ-15): `TransitionHooks.register(fn)`; fn(payload) runs after
commit, once per committed transition, never for a rolled-back one. A dead-letter payload
carries the closing attempt's seq, outcome, died, summary and artifact and the todo's
attempts_total; terminal payloads (done, dead-lettered, canceled) also carry the exact
attempt summary (counts by outcome over the whole history, recent outcome tokens, omitted).

Notify hooks (SPEC-0024): the transitions themselves write `todo.ready`,
`todo.dead_lettered`, and (an interrupt) `todo.input_required` or `todo.auth_required` rows
to hook_events in their own transaction (board/store/sql/*.sql); `HookDelivery` POSTs them,
signed, to the configured URLs from any server process and retries with backoff until a
2xx, so an event is delivered at least once and carries a stable id
(`X-Switchboard-Event-Id`, and `id` in the body) to de-duplicate on.

Every body is {id, event, occurred_at, todo: {id, queue, title, state, attempt,
max_attempts, attempts_total, endpoint_id, priority, after, schedule_id}}; a dead letter adds the closing attempt and the
attempt summary; an interrupt adds question ({text, choices, expires_at}, or null when it
asks nothing) and board_url (SWITCHBOARD_PUBLIC_URL + "/todos/{id}", or null when that is
unset: a delivery has no request to take a host from). No event carries a token or an
answer. docs/hooks.md lists them for receivers.

Signature: `X-Switchboard-Signature: t=<unix seconds>,v1=<hex>` where hex is
HMAC-SHA256(secret, f"{t}.{body}") over the exact request body bytes.

A2A pushes (migration 0021) ride the same outbox: a status change of a task with push configs
writes an `a2a.task_status` row per config; the A2A surface hands a builder of its body (the
A2A StreamResponse JSON) in `bodies`, and the config's token and authentication go with it as
`X-A2A-Notification-Token` and `Authorization`, besides the same signature.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import inspect
import json
import logging
import random
import time
from typing import Any, Callable, Mapping

import httpx2

from board import logs
from board.config import Settings
from board.errors import Unavailable
from board.store.store import Store, Transition
from board.tasks import cancel_and_wait

log = logging.getLogger("switchboard.hooks")

def transition_payload(t: Transition) -> dict:
    """The committed-transition payload: ids, states, and the closing attempt's seq and
    outcome. Summary and artifact only for a dead letter (REQ-15)."""
    payload: dict[str, Any] = {
        "kind": t.kind, "todo_id": t.todo_id, "endpoint_id": t.endpoint_id, "queue": t.queue,
        "state": t.state, "dead_letter": t.dead_letter, "attempts_total": t.attempts_total,
    }
    if t.opened_seq is not None:
        payload["opened_seq"] = t.opened_seq
    if t.closed is not None:
        attempt = {"seq": t.closed["seq"], "outcome": t.closed["outcome"],
                   "died": t.closed["died"]}
        if t.dead_letter:
            attempt["summary"] = t.closed.get("summary")
            attempt["artifact"] = t.closed.get("artifact")
        payload["attempt"] = attempt
    return payload


def is_terminal(t: Transition) -> bool:
    return t.dead_letter or t.state in ("done", "canceled")


class TransitionHooks:
    """In-process committed-transition hooks, fed by the store's observers."""

    def __init__(self, store: Store):
        self.store = store
        self._handlers: list[Callable[[dict], Any]] = []
        self._tasks: set[asyncio.Task] = set()
        store.observers.append(self._observe)

    def register(self, handler: Callable[[dict], Any]) -> None:
        self._handlers.append(handler)

    def _observe(self, t: Transition) -> None:
        if not self._handlers or t.kind == "deleted":
            return
        task = asyncio.get_running_loop().create_task(self._dispatch(t))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _dispatch(self, t: Transition) -> None:
        payload = transition_payload(t)
        if is_terminal(t):
            payload["attempts"] = await self.store.todo_attempt_summary(t.todo_id)
        for handler in self._handlers:
            try:
                result = handler(payload)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("transition hook failed for %s of todo %s", t.kind, logs.field(t.todo_id))

    async def drain(self) -> None:
        """Wait for dispatches in flight (shutdown, tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


def sign(secret: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify(secret: str, header: str, body: bytes, *, tolerance: float = 300, now: float | None = None) -> bool:
    """Check an X-Switchboard-Signature header (what a receiver does)."""
    try:
        parts = dict(item.split("=", 1) for item in header.split(","))
        timestamp = int(parts["t"])
    except (ValueError, KeyError):
        return False
    if abs((now or time.time()) - timestamp) > tolerance:
        return False
    return hmac.compare_digest(sign(secret, timestamp, body), header)


class HookDelivery:
    """Delivers hook_events rows. Safe in every process at once: rows are leased.

    `bodies` maps an event to the builder of its JSON body from its row (the A2A pushes');
    any other event's body is {id, **payload}."""

    def __init__(self, store: Store, settings: Settings, *, client: httpx2.AsyncClient | None = None,
                 bodies: Mapping[str, Callable[[dict], dict]] | None = None):
        self.store = store
        self.settings = settings
        self._client = client
        self._bodies = dict(bodies or {})
        self._task: asyncio.Task | None = None
        self._wake = asyncio.Event()

    def start(self) -> None:
        if self.settings.hook_urls or self._bodies:
            self._task = asyncio.create_task(self._run(), name="switchboard-hooks")

    def wake(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        self._task = None

    async def _run(self) -> None:
        async with (self._client or httpx2.AsyncClient(timeout=10.0, follow_redirects=False)) as client:
            while True:
                try:
                    while await self.deliver_due(client) > 0:
                        pass
                except asyncio.CancelledError:
                    raise
                except Unavailable:  # logged by the store; delivery resumes when the database is back
                    pass
                except Exception:
                    log.exception("hook delivery pass failed; retrying")
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=self.settings.hook_poll_seconds)

    async def deliver_due(self, client: httpx2.AsyncClient) -> int:
        events = await self.store.hook_events_lease(limit=20, lease_seconds=30.0)
        await asyncio.gather(*(self._deliver(client, e) for e in events))
        return len(events)

    async def _deliver(self, client: httpx2.AsyncClient, event: dict) -> None:
        build = self._bodies.get(event["event"])
        try:
            document = build(event) if build else {"id": event["id"], **event["payload"]}
        except Exception:  # a row its builder cannot read: kept, retried, and logged (a bug)
            log.exception("hook %s %s: its body could not be built", event["event"], event["id"])
            await self.store.hook_event_retry(event["id"], delay=self.settings.hook_retry_max_seconds,
                                              error="body not built")
            return
        body = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
        timestamp = int(time.time())
        headers = {
            "content-type": "application/json",
            "user-agent": "switchboard-hooks/1",
            "x-switchboard-event": event["event"],
            "x-switchboard-event-id": event["id"],
            "x-switchboard-signature": sign(self.settings.hook_secret or "", timestamp, body),
        }
        # An A2A push config's own token and authentication (the A2A SDK's push sender's headers).
        if event.get("push_token"):
            headers["x-a2a-notification-token"] = event["push_token"]
        if event.get("push_auth_scheme") and event.get("push_auth_credentials"):
            headers["authorization"] = f"{event['push_auth_scheme']} {event['push_auth_credentials']}"
        try:
            response = await client.post(event["url"], content=body, headers=headers)
            if 200 <= response.status_code < 300:
                await self.store.hook_event_delivered(event["id"])
                log.info("hook %s %s delivered (try %d)", event["event"], event["id"], event["tries"])
                return
            error = f"HTTP {response.status_code}"
        except httpx2.HTTPError as err:
            error = type(err).__name__
        delay = min(self.settings.hook_retry_max_seconds,
                    self.settings.hook_retry_base_seconds * 2 ** min(event["tries"] - 1, 20))
        delay *= 0.5 + random.random() * 0.5
        log.warning("hook %s %s failed (%s, try %d); retrying in %.1f s", event["event"], event["id"], error,
                    event["tries"], delay)
        await self.store.hook_event_retry(event["id"], delay=delay, error=error)
