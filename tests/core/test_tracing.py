"""Without OTEL_EXPORTER_OTLP_ENDPOINT there is no tracing at all: no SDK imported, no span
objects, one shared null context. With it, an error is kept as its type and a fixed reason, never
its message or stack (the traced server is tested in tests/mcpserver)."""

import os
import subprocess
import sys

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from audit.models import AuditEvent
from core import tracing
from tests.live import ROOT

PROBE = """
import enum, os, sys
import django
django.setup()
from core import tracing
assert tracing.tracing_configure() is False
first, second = tracing.span("a", {"x": 1}), tracing.span("b")
assert first is second, "one shared null context"
with first as entered:
    assert entered is None
tracing.request_started("abc")
assert tracing._request_id.get() == "", "nothing is kept for a trace that is not made"
tracing.span_failed(ValueError("x"), enum.Enum("Reason", {"X": "x"}).X)
assert not any(name.startswith("opentelemetry.sdk") for name in sys.modules), "the SDK was imported"
print("untraced")
"""


@pytest.mark.slow  # a process of its own, so nothing else has loaded the SDK
def test_without_an_endpoint_nothing_is_traced_and_the_sdk_is_never_loaded():
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")} | {
        "DJANGO_SETTINGS_MODULE": "hyperbook.settings.test"
    }
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "untraced"


# What a refusal's message quotes: the words of the question it could not read.
WORDS = "홍길동 010-1234-5678 고객의 청구 내역"


@pytest.fixture
def exported(monkeypatch):
    """Spans of core.tracing, kept in memory (the global tracer provider is left alone)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "_tracer", provider.get_tracer("hyperbook"))
    yield exporter
    provider.shutdown()


def _traced_call():
    @tracing.traced("kb.answer")
    def answer():
        raise ValueError(WORDS)

    answer()


def _span():
    with tracing.span("kb.read_question", {"kb.entity": "customers"}):
        raise ValueError(WORDS)


def _request_span():
    with tracing.request_span("mcp.gate", client_traceparent=""):
        raise ValueError(WORDS)


@pytest.mark.parametrize("run", [_span, _traced_call, _request_span])
def test_an_exception_leaving_a_span_keeps_its_type_and_never_its_message_or_stack(exported, run):
    with pytest.raises(ValueError, match="홍길동"):
        run()

    (span,) = exported.get_finished_spans()
    assert span.attributes[tracing.ERROR_TYPE] == "ValueError"
    assert span.status.status_code is StatusCode.ERROR
    assert not span.status.description
    assert span.events == ()  # no exception event: no message, no stack trace
    assert "홍길동" not in span.to_json() and "010-1234-5678" not in span.to_json()


def test_a_handled_error_is_marked_with_its_type_and_the_audits_reason(exported):
    with tracing.span("kb.tool", {"mcp.tool": "ords.query.kb_select_ai_vpd"}):
        tracing.span_failed(LookupError(WORDS), AuditEvent.Reason.UNREAD_WORDS)

    (span,) = exported.get_finished_spans()
    assert span.attributes[tracing.ERROR_TYPE] == "LookupError"
    assert span.attributes[tracing.REASON] == "unread_words"
    assert span.status.status_code is StatusCode.ERROR and not span.status.description
    assert span.events == ()
    assert "홍길동" not in span.to_json()


def test_an_error_in_an_inner_span_marks_the_outer_one_with_its_type_only(exported):
    with pytest.raises(KeyError), tracing.span("kb.tool"), tracing.span("kb.police"):
        raise KeyError(WORDS)

    inner, outer = exported.get_finished_spans()
    for span in (inner, outer):
        assert span.attributes[tracing.ERROR_TYPE] == "KeyError"
        assert span.events == () and not span.status.description
        assert "홍길동" not in span.to_json()
