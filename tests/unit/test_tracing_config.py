"""When traces are exported, and what the service is called (docs/tracing.md): the standard
OpenTelemetry variables decide, with `switchboard` as the service name none of them gives."""

from __future__ import annotations

import pytest

from board.ops.tracing import ENDPOINT_VARIABLES, Tracing, attempt_span_id, attempt_traceparent, configured, new_provider


@pytest.mark.parametrize("environ, on", [
    ({}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}, False),
    ({"OTEL_SERVICE_NAME": "board", "OTEL_TRACES_SAMPLER": "always_on"}, False),
])
def test_traces_are_exported_only_when_an_otlp_endpoint_is_named(environ, on):
    assert configured(environ) is on


@pytest.mark.parametrize("environ, name", [
    ({}, "switchboard"),
    ({"OTEL_SERVICE_NAME": "queue-prod"}, "queue-prod"),
    ({"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attributes,deployment.environment=prod"}, "from-attributes"),
])
def test_the_service_is_switchboard_unless_the_environment_names_it(monkeypatch, environ, name):
    for key in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"):
        monkeypatch.delenv(key, raising=False)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    provider = new_provider()
    try:
        assert provider.resource.attributes["service.name"] == name
    finally:
        provider.shutdown()


def test_an_attempts_traceparent_keeps_the_claims_trace_and_flags_and_names_its_own_span():
    claim = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    theirs = attempt_traceparent(claim, "todo-1", 2)
    assert theirs == f"00-0af7651916cd43dd8448eb211c80319c-{attempt_span_id(0x0af7651916cd43dd8448eb211c80319c, 'todo-1', 2):016x}-01"
    assert theirs != attempt_traceparent(claim, "todo-1", 3) != attempt_traceparent(claim, "todo-2", 2)


def test_unset_the_server_makes_no_tracing_at_all(monkeypatch):
    """create_app installs nothing when the environment names no endpoint (board/app.py)."""
    for key in ENDPOINT_VARIABLES:
        monkeypatch.delenv(key, raising=False)
    assert Tracing.from_environment() is None
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    made = Tracing.from_environment()
    try:
        assert made is not None and made.provider.resource.attributes["service.name"]
    finally:
        made.shutdown()
