"""Without OTEL_EXPORTER_OTLP_ENDPOINT there is no tracing at all: no SDK imported, no span
objects, one shared null context (the traced server is tested in tests/mcpserver)."""

import os
import subprocess
import sys

import pytest

from tests.live import ROOT

pytestmark = pytest.mark.slow  # a process of its own, so nothing else has loaded the SDK

PROBE = """
import os, sys
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
assert not any(name.startswith("opentelemetry.sdk") for name in sys.modules), "the SDK was imported"
print("untraced")
"""


def test_without_an_endpoint_nothing_is_traced_and_the_sdk_is_never_loaded():
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")} | {
        "DJANGO_SETTINGS_MODULE": "hyperbook.settings.test"
    }
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "untraced"
