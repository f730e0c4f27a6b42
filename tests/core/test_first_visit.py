"""What an operator sees on a first visit: a front door at `/`, a header that says hyperbook,
list titles in plain Korean, refusal reasons and the chain check in words, marks that are
images rather than emoji (the installed fonts have none)."""

import re

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from audit.models import AuditEvent
from audit.services import audit_events_append
from core.groups import ensure_default_groups

pytestmark = pytest.mark.django_db

EMOJI = re.compile("[\U0001f300-\U0001faff\u2600-\u27bf]")


@pytest.fixture
def auditor():
    ensure_default_groups()
    user = User.objects.create_user("first-auditor", password="pw-for-tests", is_staff=True)
    user.groups.add(Group.objects.get(name="auditors"))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def refusal():
    audit_events_append(
        events=[
            {
                "action": AuditEvent.Action.MCP_TOOLS_CALL,
                "outcome": AuditEvent.Outcome.UNAUTHENTICATED,
                "detail": "malformed_token",
                "request_id": "req-first-visit",
                "occurred_at": timezone.now(),
            }
        ]
    )
    return AuditEvent.objects.get(request_id="req-first-visit")


def test_the_root_leads_to_the_admin(client):
    response = client.get("/")
    assert response.status_code == 302 and response["Location"] == "/admin/"


def test_the_header_says_hyperbook_and_view_site_leads_somewhere(auditor):
    body = auditor.get("/admin/").content.decode()
    assert "Django" not in re.search(r"<title>(.*?)</title>", body).group(1)
    assert re.search(r'id="site-name"><a href="/admin/">hyperbook</a>', body)
    view_site = re.search(r'<a href="([^"]+)">사이트 보기</a>', body).group(1)
    assert auditor.get(view_site).status_code == 200


@pytest.mark.parametrize(
    ("language", "title"), [("ko", "감사 이벤트 목록"), ("en", "Select Audit event to view")]
)
def test_a_view_only_list_is_titled_in_plain_words(auditor, language, title):
    body = auditor.get("/admin/audit/auditevent/", HTTP_ACCEPT_LANGUAGE=language).content.decode()
    heading = re.search(r"<h1>(.*?)</h1>", body).group(1)
    assert heading == title
    assert "보기위한" not in body and "를(을)" not in body


@pytest.mark.parametrize(("language", "words"), [("ko", "형식이 잘못된 토큰"), ("en", "Malformed")])
def test_a_refusal_reason_is_named_in_words(auditor, refusal, language, words):
    overview = auditor.get(
        "/admin/audit/auditevent/overview/", HTTP_ACCEPT_LANGUAGE=language
    ).content.decode()
    row = re.search(r'<tr data-reason="malformed_token">(.*?)</tr>', overview, re.S).group(1)
    assert words in row
    filtered = auditor.get(
        "/admin/audit/auditevent/?reason=malformed_token", HTTP_ACCEPT_LANGUAGE=language
    ).content.decode()
    assert words in filtered
    event = auditor.get(
        f"/admin/audit/auditevent/{refusal.pk}/change/", HTTP_ACCEPT_LANGUAGE=language
    ).content.decode()
    assert words in event


def test_the_chain_check_speaks_korean_with_an_image_for_its_mark(auditor, refusal):
    from audit.verification import verify_and_record

    verify_and_record()
    for page in ("/admin/audit/auditevent/", "/admin/audit/auditevent/overview/"):
        body = auditor.get(page, HTTP_ACCEPT_LANGUAGE="ko").content.decode()
        assert "chain intact" not in body
        assert "체인이 온전합니다" in body
        assert re.search(r'<img src="[^"]*admin/img/icon-yes\.svg" alt="정상"', body)
        assert not EMOJI.search(body), EMOJI.search(body)
