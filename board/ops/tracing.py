"""Traces over OTLP/HTTP (docs/tracing.md), on when OTEL_EXPORTER_OTLP_ENDPOINT or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; every other OTEL_* variable is the SDK's own.

The spans are the instrumentations': the ASGI middleware's for each request (the Board's and
/mcp's), the MCP SDK's for each JSON-RPC message (named by method and tool, continuing a
`traceparent` in the request's `_meta`), psycopg's for each statement. The one span made here
is the attempt's, from its claim to its close: the claim records its call's traceparent on
the attempt (migration 0019), and the process that closes the attempt reads it back and emits
the span in the claim's trace, its start the claim's time and its end the close's. Its span
id is derived from the trace, the todo and the attempt's seq, so the claim can hand it out
before it exists: the claim's result carries it as `_meta.traceparent`, which
`switchboard work` gives its command as TRACEPARENT.

Unset, nothing here runs: no provider, no instrumentation, and the claim records null.
No span carries a title, payload, summary, artifact, note, token or query string.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import logging
import os
from datetime import datetime
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

    from board.store.store import Store, Transition

log = logging.getLogger("switchboard.tracing")

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
SERVICE_NAME = "switchboard"
# Where a request's query string waits while the ASGI instrumentation looks at the request.
QUERY_KEY = "switchboard.query_string"
# Headers never captured, whatever OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_* asks for.
SECRET_HEADERS = ["authorization", "proxy-authorization", "cookie", "set-cookie", "x-csrf-token"]
# The outcomes that end an attempt in error.
FAILED_OUTCOMES = frozenset({"failed", "reaped", "lease_expired", "revoked"})

# The span id the next span started gets instead of a random one: set only around the
# attempt span's start (_AttemptSpanIds).
_PRESET_SPAN_ID: contextvars.ContextVar[int | None] = contextvars.ContextVar("switchboard_span_id", default=None)


def configured(environ=os.environ) -> bool:
    """Whether traces are to be exported: an OTLP endpoint is named, and the SDK is not
    disabled (OTEL_SDK_DISABLED=true)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def traceparent_of(span_context) -> str | None:
    """A span context as a W3C traceparent, or None when it is not valid."""
    if not span_context.is_valid:
        return None
    return f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{int(span_context.trace_flags):02x}"


def current_traceparent() -> str | None:
    """The current span (the call's) as a W3C traceparent; None outside any traced call."""
    return traceparent_of(trace.get_current_span().get_span_context())


def attempt_span_id(trace_id: int, todo_id: str, seq: int) -> int:
    """The attempt span's id: 64 bits of a hash of its trace, todo and seq (never zero)."""
    digest = hashlib.sha256(f"{trace_id:032x}/{todo_id}/{seq}".encode()).digest()
    return int.from_bytes(digest[:8], "big") or 1


def attempt_traceparent(claim_traceparent: str, todo_id: str, seq: int) -> str:
    """The traceparent of the attempt a claim opened, from the claim's own."""
    _, trace_hex, _, flags = claim_traceparent.split("-")
    return f"00-{trace_hex}-{attempt_span_id(int(trace_hex, 16), todo_id, seq):016x}-{flags}"


def _nanoseconds(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000) * 1000


def new_provider(*exporters: "SpanExporter", batch: bool = True) -> "TracerProvider":
    """A tracer provider with the SDK's environment (sampler, limits, resource), the service
    named switchboard unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name it, and the
    attempt spans' ids; each exporter behind a batch processor (or a simple one, for tests)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class _AttemptSpanIds(RandomIdGenerator):
        """Random ids, except the attempt span's, which its claim handed out already."""

        def generate_span_id(self) -> int:
            preset = _PRESET_SPAN_ID.get()
            return preset if preset is not None else super().generate_span_id()

    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
    provider = TracerProvider(resource=resource, id_generator=_AttemptSpanIds())
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
    return provider


class Tracing:
    """One server process's traces: its provider, the instrumentation of its requests and of
    its pools' connections, and the attempt spans it emits for the closes it committed (a
    store observer)."""

    def __init__(self, provider: "TracerProvider"):
        self.provider = provider
        self.tracer = provider.get_tracer("switchboard")
        self.store: Store | None = None
        self._due: list[tuple[str, int, Any]] = []  # closed attempts: (todo id, seq, the close's span context)
        self._emitting: set[asyncio.Task] = set()

    @classmethod
    def from_environment(cls) -> "Tracing | None":
        """Tracing with the OTLP/HTTP exporter when configured(); else None."""
        if not configured():
            return None
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return cls(new_provider(OTLPSpanExporter()))

    # -- the process ------------------------------------------------------------------------

    def start(self) -> None:
        """The provider made global: the MCP SDK's spans go to the global one."""
        if trace.get_tracer_provider() is not self.provider:
            trace.set_tracer_provider(self.provider)

    def instrument_connection(self, conn) -> None:
        """A pool's new connection, its statements traced by the psycopg instrumentation (per
        connection, not by patching psycopg for the whole process)."""
        from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

        PsycopgInstrumentor.instrument_connection(conn, tracer_provider=self.provider)

    def observe_store(self, store: "Store") -> None:
        """Claims record their call's traceparent; closes emit their attempt's span."""
        self.store = store
        store.trace_context = current_traceparent
        store.observers.append(self.observe)

    async def stop(self) -> None:
        """The attempt spans still being read are emitted, then every span is exported."""
        if self._emitting:
            await asyncio.gather(*self._emitting, return_exceptions=True)
        await asyncio.to_thread(self.provider.force_flush)

    def shutdown(self) -> None:
        self.provider.shutdown()

    # -- requests -----------------------------------------------------------------------------

    def asgi(self, app):
        """The app behind the ASGI instrumentation: a server span per request, continuing a
        traceparent header. The instrumentation sees the request without its query string (a
        Board search's words, an OAuth code or state); the app gets it back. The span is
        named by the route's template once routed (GET /todos/{todo_id:str})."""
        from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

        async def query_restored(scope, receive, send) -> None:
            if QUERY_KEY in scope:
                scope["query_string"] = scope.pop(QUERY_KEY)
            try:
                await app(scope, receive, send)
            finally:
                template = scope.get("path_template")
                if template and scope.get("method"):
                    span = trace.get_current_span()
                    span.update_name(f"{scope['method']} {template}")
                    span.set_attribute("http.route", template)

        traced = OpenTelemetryMiddleware(query_restored, tracer_provider=self.provider, exclude_spans=["receive", "send"],
                                         default_span_details=_span_details,
                                         http_capture_headers_sanitize_fields=SECRET_HEADERS)

        async def query_hidden(scope, receive, send) -> None:
            if scope.get("type") == "http" and scope.get("query_string"):
                scope[QUERY_KEY] = scope["query_string"]
                scope["query_string"] = b""
            await traced(scope, receive, send)

        return query_hidden

    def attempt_meta(self, claimed: Any) -> dict | None:
        """A claim result's `_meta`: the traceparent of the attempt it opened (the first, for a
        batch), for the worker to hand its command. None when nothing was claimed or the
        call is not traced."""
        todo = claimed.get("todo") if isinstance(claimed, dict) else None
        claim = current_traceparent()
        if not todo or claim is None:
            return None
        return {"traceparent": attempt_traceparent(claim, todo["id"], claimed["attempt_seq"])}

    # -- attempt spans --------------------------------------------------------------------------

    def observe(self, t: "Transition") -> None:
        """A store observer: each closed attempt's span is emitted once its row is read (in a
        task of the closing call's context, so the read is a statement of that trace)."""
        if t.closed is None or t.closed.get("seq") is None:
            return
        self._due.append((t.todo_id, int(t.closed["seq"]), trace.get_current_span().get_span_context()))
        if len(self._due) == 1:
            task = asyncio.get_running_loop().create_task(self._emit_due())
            self._emitting.add(task)
            task.add_done_callback(self._emitting.discard)

    async def _emit_due(self) -> None:
        # Started after the closing call's code next waits: every close of its statement is due.
        due, self._due = self._due, []
        try:
            rows = await self.store.attempts_traced([(todo_id, seq) for todo_id, seq, _ in due])
        except Exception:  # a span is never worth an error: the attempt itself is committed
            log.warning("could not read %d closed attempts for their spans", len(due))
            return
        closes = {(todo_id, seq): close for todo_id, seq, close in due}
        for row in rows:
            self._attempt_span(row, closes.get((row["todo_id"], row["seq"])))

    def _attempt_span(self, row: dict, close) -> None:
        from opentelemetry.trace import Link, SpanKind, Status, StatusCode
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        parent = otel_context.Context()  # a claim of no traced call: the attempt starts a trace
        span_id = None
        if row["claim_traceparent"]:
            parent = TraceContextTextMapPropagator().extract({"traceparent": row["claim_traceparent"]})
            claimed_in = trace.get_current_span(parent).get_span_context()
            span_id = attempt_span_id(claimed_in.trace_id, row["todo_id"], row["seq"])
        attributes = {"switchboard.todo.id": row["todo_id"], "switchboard.queue": row["queue"],
                      "switchboard.attempt.seq": row["seq"], "switchboard.attempt.number": row["attempt"],
                      "switchboard.attempt.outcome": row["outcome"], "switchboard.attempt.died": bool(row["died"]),
                      "switchboard.attempt.claimer": row["claimer_kind"]}
        if row["disposition"]:
            attributes["switchboard.attempt.disposition"] = row["disposition"]
        if row["endpoint_id"]:
            attributes["switchboard.endpoint.id"] = row["endpoint_id"]
        if row["agent_id"]:
            attributes["switchboard.agent.id"] = row["agent_id"]
        links = [Link(close)] if close is not None and close.is_valid else []
        preset = _PRESET_SPAN_ID.set(span_id)
        try:
            span = self.tracer.start_span("attempt", context=parent, kind=SpanKind.INTERNAL, attributes=attributes,
                                          links=links, start_time=_nanoseconds(row["claimed_at"]))
        finally:
            _PRESET_SPAN_ID.reset(preset)
        if row["outcome"] in FAILED_OUTCOMES:
            span.set_status(Status(StatusCode.ERROR, row["outcome"]))
        span.end(end_time=_nanoseconds(row["ended_at"]))


def _span_details(scope) -> tuple[str, dict]:
    """A request's span name before routing: its method and path (renamed by the route's
    template once routed)."""
    method = str(scope.get("method", "")).strip()
    path = scope.get("path", "")
    return (f"{method} {path}" if method else path), {}

