"""Optional traces with OpenTelemetry: with OTEL_EXPORTER_OTLP_ENDPOINT set, spans cover the gate,
the tool, each stage of an answer (reading the question, parsing the plan, the policy, the plan's
execution, the answer's shape) and the audit append, each with the request id, exported over
OTLP/HTTP (the exporter reads its own OTEL_* settings: headers, timeout, service name).

A span keeps names of ours only: never the prompt, the words of a question, a row's values or a
token. An error is kept as its type and, where the code names one, a fixed reason code, never as
its message or stack: a refusal's message quotes the words it could not read.

With the variable unset nothing is configured and `span()` hands back one shared null context:
no tracer, no span objects, and the OpenTelemetry SDK is never imported.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import functools
import logging
import os
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")

logger = logging.getLogger("hyperbook.tracing")

_NO_SPAN = contextlib.nullcontext()
_tracer = None
_lock = threading.Lock()
_configured = False
# The request a span belongs to, set by the gate: spans in the database threads it hands work
# to carry it too (asgiref copies the context into them).
_request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")
REQUEST_ID = "hyperbook.request_id"
ERROR_TYPE = "error.type"  # OpenTelemetry's name for it
REASON = "hyperbook.reason"


def tracing_configure() -> bool:
    """Set up the exporter once per process, if OTEL_EXPORTER_OTLP_ENDPOINT asks for it."""
    global _tracer, _configured
    with _lock:
        if _configured:
            return _tracer is not None
        _configured = True
        if not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
            return False
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        service = os.environ.get("OTEL_SERVICE_NAME") or "hyperbook"
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
        _tracer = trace.get_tracer("hyperbook")
        logger.info("tracing: spans are exported over OTLP/HTTP")
        return True


def tracing_shutdown() -> None:
    """Export what is still buffered (called when the server stops)."""
    if _tracer is None:
        return
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    shutdown = getattr(provider, "shutdown", None)
    if shutdown is not None:
        shutdown()


def enabled() -> bool:
    return _tracer is not None


def request_started(request_id: str) -> None:
    """The spans that follow in this context belong to this request (a no-op without tracing)."""
    if _tracer is not None:
        _request_id.set(request_id)


def span(name: str, attributes: dict | None = None):
    """A span around a block when tracing is on; otherwise a null context that costs nothing.

    Attribute values must be str, bool, int or float (or lists of them); never a token or a
    prompt's text. The current request's id is added as `hyperbook.request_id`."""
    if _tracer is None:
        return _NO_SPAN
    attributes = dict(attributes or {})
    request_id = _request_id.get()
    if request_id:
        attributes.setdefault(REQUEST_ID, request_id)
    return _started(name, attributes=attributes)


def traced(name: str) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """A decorator: each call runs inside span(name); without tracing, one check and the call."""

    def decorate(function: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(function)
        def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            if _tracer is None:
                return function(*args, **kwargs)
            with span(name):
                return function(*args, **kwargs)

        return run

    return decorate


def request_span(name: str, attributes: dict | None = None, *, client_traceparent: str = ""):
    """The span of one request from outside: always the root of a trace of ours, linked to the
    client's span when it sent a valid W3C `traceparent`. A client may point at our trace from its
    own; it cannot make our spans part of its trace (nor pick our trace id)."""
    if _tracer is None:
        return _NO_SPAN
    from opentelemetry import context, trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    links = []
    if client_traceparent:
        sent = TraceContextTextMapPropagator().extract({"traceparent": client_traceparent})
        client_span = trace.get_current_span(sent).get_span_context()
        if client_span.is_valid:
            links.append(trace.Link(client_span))
    attributes = dict(attributes or {})
    request_id = _request_id.get()
    if request_id:
        attributes.setdefault(REQUEST_ID, request_id)
    return _started(name, context=context.Context(), attributes=attributes, links=links)


def span_failed(error: BaseException, reason: enum.Enum) -> None:
    """Mark the current span failed: `error`'s type and `reason`'s value (an enum member, so no
    free text can be passed), for an error the code handles inside its span."""
    if _tracer is None:
        return
    from opentelemetry import trace

    _failed(trace.get_current_span(), error, reason)


@contextlib.contextmanager
def _started(name: str, **options):
    # The SDK's defaults would add the exception's message and stack as an event and its message
    # as the status description; an exception leaving the span keeps only its type here.
    assert _tracer is not None
    with _tracer.start_as_current_span(
        name, record_exception=False, set_status_on_exception=False, **options
    ) as current:
        try:
            yield current
        except Exception as error:
            _failed(current, error)
            raise


def _failed(current, error: BaseException, reason: enum.Enum | None = None) -> None:
    from opentelemetry.trace import StatusCode

    current.set_attribute(ERROR_TYPE, type(error).__qualname__)
    if reason is not None:
        current.set_attribute(REASON, str(reason.value))
    current.set_status(StatusCode.ERROR)
