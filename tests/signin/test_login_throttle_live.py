"""The login throttle through a real server (uvicorn, as bin/serve runs it: no proxy trusted): an
X-Forwarded-For a client makes up does not give it a fresh address, and the lockout page comes
through the ASGI stack whole, with Retry-After and in the browser's language."""

import re

import httpx
import pytest
from axes.models import AccessAttempt
from django.contrib.auth import get_user_model

from audit.models import AuditEvent
from tests.live import live_server

pytestmark = [pytest.mark.db, pytest.mark.slow]

PASSWORD = "live-Password-3307"
CANARY = "Live-Canary-Secret-94x!"


def test_a_made_up_forwarded_for_gets_no_fresh_address_from_a_real_server(
    tmp_path, django_db_blocker
):
    with django_db_blocker.unblock():
        get_user_model().objects.create_user("live-ops", password=PASSWORD, is_staff=True)
    log = tmp_path / "server.log"
    with live_server(log) as url, httpx.Client(base_url=url, timeout=30) as http:

        def log_in(username, password, forwarded_for):
            page = http.get("/admin/login/")
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
            return http.post(
                "/admin/login/",
                data={"username": username, "password": password, "csrfmiddlewaretoken": token},
                headers={"X-Forwarded-For": forwarded_for, "Accept-Language": "en"},
            )

        answers = [log_in(f"guess-{n}", CANARY, f"198.51.100.{n}") for n in range(5)]
        assert [a.status_code for a in answers] == [200, 200, 200, 200, 429]
        locked = answers[-1]
        assert 14 * 60 < int(locked.headers["retry-after"]) <= 15 * 60
        assert "Try again in 15 minutes" in locked.text
        assert "no-store" in locked.headers["cache-control"]
        assert "content-security-policy" in locked.headers  # the page's own headers are kept

        refused = log_in("live-ops", PASSWORD, "203.0.113.5")
        assert refused.status_code == 429 and "sessionid" not in http.cookies

    with django_db_blocker.unblock():
        addresses = set(AccessAttempt.objects.values_list("ip_address", flat=True))
        recorded = set(
            AuditEvent.objects.filter(
                action__in=[AuditEvent.Action.AUTH_LOGIN_FAILED, AuditEvent.Action.AUTH_LOCKED_OUT]
            ).values_list("client_address", flat=True)
        )
    assert addresses == recorded == {"127.0.0.1"}
    assert CANARY not in log.read_text()
