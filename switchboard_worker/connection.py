"""One MCP connection to a Switchboard server that outlives the server going away.

A supervisor task owns the official MCP Python SDK client (Streamable HTTP, the 2026-07-28
protocol) and its `subscriptions/listen` stream on `switchboard://todos`, the doorbell. When
the server goes away it reconnects with jittered backoff, and counts the new connection as a
ring (work may have been added meanwhile). A tool call runs in a task of its own (the SDK
cancels the task that holds the client when the server dies mid-call); a call whose reply
never comes is sent again on the next connection, with the same arguments, so a fenced close
is replayed with its lease token. `unavailable` and `rate_limited` answers are retried after a
pause, as docs/mcp.md says; every other tool error is raised as ToolError."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from typing import Any

log = logging.getLogger("switchboard_worker")

TODOS_URI = "switchboard://todos"
CALL_TIMEOUT = 30.0  # a call that takes longer is taken for lost (the server hung)
RECONNECT_FIRST, RECONNECT_MAX = 0.1, 5.0
RETRY_CODES = {"unavailable": 1.0, "rate_limited": 2.0}  # tool errors worth repeating, and the pause before


class ToolError(Exception):
    """A tool answered with an error the caller should read: code is `invalid`, `not_found`,
    `conflict`, `forbidden` (docs/mcp.md); argument names the input at fault, when one is."""

    def __init__(self, tool: str, code: str, message: str, argument: str | None = None):
        super().__init__(f"{tool}: {code}: {message}" + (f" ({argument})" if argument else ""))
        self.tool, self.code, self.message, self.argument = tool, code, message, argument


class Lost(Exception):
    """A call's reply never came (the server went away) and the call is not to be repeated."""


class Closed(Exception):
    """The connection was closed while a call waited for it."""


class Refused(Closed):
    """The server refused the credential (HTTP 401 or 403): reconnecting cannot help."""


def _status_of(exc: BaseException) -> int | None:
    """The HTTP status behind a connect failure, looked for through exception groups and causes."""
    seen: set[int] = set()
    stack = [exc]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        response = getattr(e, "response", None)
        status = getattr(response, "status_code", None)
        if isinstance(status, int):
            return status
        if isinstance(e, BaseExceptionGroup):
            stack.extend(e.exceptions)
        for nxt in (e.__cause__, e.__context__):
            if nxt is not None:
                stack.append(nxt)
    return None


class Connection:
    """`await conn.start()`, then `await conn.call(tool, args)` from any task; `conn.rings`
    counts doorbell rings (and reconnects), `await conn.wait_ring(seen, timeout)` waits for one."""

    def __init__(self, url: str, token: str, *, call_timeout: float = CALL_TIMEOUT, protocol: str = "modern"):
        if protocol not in ("modern", "legacy"):
            raise ValueError("protocol must be modern (2026-07-28) or legacy (2025-11-25)")
        self.protocol = protocol
        self.mcp_url = url.rstrip("/") + ("" if url.rstrip("/").endswith("/mcp") else "/mcp")
        self._token = token  # never logged, never printed
        self.call_timeout = call_timeout
        self.rings = 0
        self.connects = 0
        self.lost_calls = 0
        self._ringing = asyncio.Condition()
        self._up = asyncio.Event()
        self._broken = asyncio.Event()
        self._client: Any = None
        self._closed = False
        self._fatal: BaseException | None = None
        self._supervisor: asyncio.Task | None = None
        self._rng = random.Random()
        self._refused_status: int | None = None  # 401 or 403 seen: the SDK reports it as a generic error

    def __repr__(self) -> str:  # the token stays out of any repr
        return f"Connection({self.mcp_url!r}, connects={self.connects})"

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self, timeout: float | None = None) -> None:
        """Start the supervisor (once) and wait for the first connection (or a refused token);
        asyncio.TimeoutError after `timeout` seconds, the supervisor still trying."""
        if self._supervisor is None:
            self._supervisor = asyncio.create_task(self._supervise(), name="switchboard-connection")
        await self._wait_up(timeout)

    async def close(self) -> None:
        self._closed = True
        self._broken.set()
        self._up.set()  # wake waiting callers; they see _closed
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._supervisor

    async def _supervise(self) -> None:
        backoff = RECONNECT_FIRST
        while not self._closed:
            connects_before = self.connects
            inner = asyncio.create_task(self._session(), name="switchboard-session")
            try:
                await asyncio.wait({inner})
            except asyncio.CancelledError:
                inner.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await inner
                raise
            self._up.clear()
            self._client = None
            error = None if inner.cancelled() else inner.exception()
            # The SDK cancels the task holding the client when the transport dies: that is a
            # lost connection, like any error, unless the server refused the credential.
            status = self._refused_status or (_status_of(error) if error is not None else None)
            if status in (401, 403):
                self._fatal = Refused(f"the server refused the token (HTTP {status})" if status == 401 else
                                      "the server refused the connection (HTTP 403): check the token, and that "
                                      "the server allows this host name (SWITCHBOARD_ALLOWED_HOSTS)")
                self._up.set()
                return
            if self._closed:
                return
            if self.connects and error is not None:
                log.debug("connection lost: %s", type(error).__name__)
            if self.connects > connects_before:  # it was up: start the backoff over
                backoff = RECONNECT_FIRST
            delay = backoff * (0.5 + self._rng.random() / 2)
            backoff = min(backoff * 2, RECONNECT_MAX)
            await asyncio.sleep(delay)

    async def _session(self) -> None:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        headers = {"Authorization": f"Bearer {self._token}"}

        async def seen(response: Any) -> None:
            if response.status_code in (401, 403):
                self._refused_status = response.status_code

        # No read timeout: the listen stream is quiet until a todo is ready; calls carry
        # deadlines of their own.
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(15.0, read=None),
                                      event_hooks={"response": [seen]}) as http:
            # Rings arrive on the listen stream (2026-07-28) or, on a 2025-11-25 session, as
            # notifications/resources/updated on its GET stream, which the handler hears.
            kwargs: dict[str, Any] = {"message_handler": self._message}
            if self.protocol == "legacy":
                kwargs["mode"] = "legacy"
            async with Client(streamable_http_client(self.mcp_url, http_client=http), **kwargs) as client:
                self._broken = asyncio.Event()
                self._client = client
                self.connects += 1
                self._up.set()
                await self._ring()  # a reconnect is a ring: work may have been added meanwhile
                listener = asyncio.create_task(self._listen(client), name="switchboard-doorbell")
                breaker = asyncio.create_task(self._broken.wait())
                try:
                    await asyncio.wait({listener, breaker}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    self._up.clear()
                    for t in (listener, breaker):
                        t.cancel()
                    for t in (listener, breaker):
                        with contextlib.suppress(asyncio.CancelledError, Exception):
                            await t

    async def _message(self, message: Any) -> None:
        import mcp_types

        if isinstance(message, mcp_types.ResourceUpdatedNotification):
            await self._ring()

    async def _listen(self, client: Any) -> None:
        from mcp.client.subscriptions import ListenNotSupportedError

        if self.protocol == "legacy":  # rings come through _message
            await asyncio.Event().wait()
        try:
            async with client.listen(resource_subscriptions=[TODOS_URI]) as sub:
                async for _event in sub:
                    await self._ring()
        except ListenNotSupportedError:  # an older server: its session rings through _message
            await asyncio.Event().wait()

    async def _ring(self) -> None:
        async with self._ringing:
            self.rings += 1
            self._ringing.notify_all()

    async def wait_ring(self, seen: int, timeout: float) -> bool:
        """Wait until a ring newer than `seen` (a value of `rings`), or `timeout` seconds."""
        async with self._ringing:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._ringing.wait_for(lambda: self.rings > seen), timeout)
            return self.rings > seen

    async def _wait_up(self, timeout: float | None = None) -> Any:
        while True:
            if self._fatal is not None:
                raise self._fatal
            if self._closed:
                raise Closed("the connection is closed")
            if self._up.is_set() and self._client is not None:
                return self._client
            await asyncio.wait_for(self._up.wait(), timeout)
            if self._client is None and not self._closed and self._fatal is None:
                await asyncio.sleep(0.01)

    # -- calls ---------------------------------------------------------------------------

    async def call(self, tool: str, args: dict | None = None, *, repeat: bool = True) -> dict:
        """Call a tool; returns its structured content. A lost reply is sent again on the next
        connection when `repeat` (else raises Lost); retryable tool errors are repeated."""
        return (await self.call_with_meta(tool, args, repeat=repeat))[0]

    async def call_with_meta(self, tool: str, args: dict | None = None, *,
                             repeat: bool = True) -> tuple[dict, dict]:
        """call, with the result's `_meta` beside its structured content (a claim's carries the
        attempt's traceparent when the server traces)."""
        args = {k: v for k, v in (args or {}).items() if v is not None}
        while True:
            result = await self._send(tool, lambda client: client.call_tool(tool, args), repeat=repeat)
            if not result.is_error:
                return result.structured_content or {}, result.meta or {}
            err = _error_of(result)
            code = err.get("code", "error")
            if code in RETRY_CODES:
                await asyncio.sleep(RETRY_CODES[code] * (0.75 + self._rng.random() / 2))
                continue
            raise ToolError(tool, code, err.get("message", ""), err.get("argument"))

    async def tools(self) -> set[str]:
        """The names of the tools the server lists for this credential: the server lists only
        the verbs its scope grants (docs/mcp.md), so these are what it may do."""
        names: set[str] = set()
        cursor: str | None = None
        while True:
            listed = await self._send("tools/list", lambda client: client.list_tools(cursor=cursor))
            names.update(tool.name for tool in listed.tools)
            cursor = listed.next_cursor
            if not cursor:
                return names

    async def _send(self, what: str, send: Any, *, repeat: bool = True) -> Any:
        """send(client)'s reply. When none comes (the server went away, or hung for
        call_timeout), drop this connection and send it again on the next (else raise Lost)."""
        while True:
            client = await self._wait_up()
            broken = self._broken
            call = asyncio.create_task(send(client))
            breaker = asyncio.create_task(broken.wait())
            try:
                done, _ = await asyncio.wait({call, breaker}, timeout=self.call_timeout,
                                             return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:
                call.cancel()
                breaker.cancel()
                raise
            breaker.cancel()
            if call in done and not call.cancelled() and call.exception() is None:
                return call.result()
            # No reply: the server went away (or hung). Drop this connection and go again.
            if call not in done:
                call.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await call
            self.lost_calls += 1
            broken.set()
            if broken is self._broken:
                self._up.clear()
            if not repeat:
                raise Lost(what)


def _error_of(result: Any) -> dict:
    try:
        return json.loads(result.content[0].text).get("error") or {}
    except (IndexError, AttributeError, ValueError, TypeError):
        return {}
