"""A real `switchboard serve`, started with OTEL_EXPORTER_OTLP_ENDPOINT, exports its spans over
OTLP/HTTP to a receiver in this test: a small HTTP server parsing each POST to /v1/traces as
the collector would, with opentelemetry-proto (docs/tracing.md)."""

from __future__ import annotations

import asyncio
import gzip
import http.server
import os
import signal
import subprocess
import sys
import threading
from types import SimpleNamespace

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.acceptance.mcp_helpers import connect, vend
from tests.acceptance.test_serve import serve_ready
from tests.conftest import ROOT, free_port, until


class Receiver(http.server.ThreadingHTTPServer):
    """Collects (service name, scope name, span) for every span posted to /v1/traces."""

    def __init__(self):
        self.spans: list[tuple[str, str, object]] = []
        self.paths: list[str] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest.FromString(body)
        self.server.paths.append(self.path)
        for resource_spans in request.resource_spans:
            service = next(a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name")
            for scope_spans in resource_spans.scope_spans:
                self.server.spans.extend((service, scope_spans.scope.name, s) for s in scope_spans.spans)
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args) -> None:
        pass


def attributes(span) -> dict:
    return {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in span.attributes}


async def test_serve_exports_every_request_call_statement_and_attempt_to_an_otlp_http_receiver(db_url, store):
    receiver = Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWITCHBOARD_", "OTEL_")) and k != "DATABASE_URL"}
    env.update(DATABASE_URL=db_url, SWITCHBOARD_SECRET_KEY="otlp-test-secret-0123456789",
               OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_BSP_SCHEDULE_DELAY="50")
    proc = subprocess.Popen([sys.executable, "-m", "board", "serve", "--port", str(port)], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        server = SimpleNamespace(url=f"http://127.0.0.1:{port}")
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            await serve_ready(client, proc)
        ep = await vend(store, agent_id="otlp-agent", queues=("otlp-q",))
        async with connect(server, ep.token) as client:
            added = (await client.call_tool("add_todo", {"queue": "otlp-q", "title": "t"})).structured_content
            claimed = (await client.call_tool("claim_next", {"require_fence": True})).structured_content
            await client.call_tool("complete", {"id": added["id"], "lease_token": claimed["lease_token"]})

        def attempt():
            return next((s for _, _, s in receiver.spans if s.name == "attempt"
                         and attributes(s)["switchboard.todo.id"] == added["id"]), None)

        await until(lambda: attempt() is not None, "the attempt's span at the receiver", timeout=30)
        span = attempt()
        assert (attributes(span)["switchboard.attempt.outcome"], attributes(span)["switchboard.agent.id"]) \
            == ("completed", "otlp-agent")
        [claim_call] = [s for _, scope, s in receiver.spans
                        if s.name == "tools/call claim_next" and s.trace_id == span.trace_id]
        assert span.parent_span_id == claim_call.span_id
        # The HTTP requests (in the claim's trace unless this process's MCP client traces, when
        # the call continues the client's trace from its _meta), and the calls' statements.
        assert ("opentelemetry.instrumentation.asgi", "POST /mcp") in {(scope, s.name) for _, scope, s in receiver.spans}
        assert any(scope == "opentelemetry.instrumentation.psycopg" and s.trace_id == span.trace_id
                   and s.parent_span_id == claim_call.span_id for _, scope, s in receiver.spans)
        assert {service for service, _, _ in receiver.spans} == {"switchboard"}
        assert set(receiver.paths) == {"/v1/traces"}
        proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.to_thread(proc.communicate, timeout=30)
        assert "Application shutdown complete" in out, out
    finally:
        if proc.poll() is None:
            proc.kill()
        receiver.shutdown()
