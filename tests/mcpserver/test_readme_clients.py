"""The README's Python snippets, as a new user pastes them, against a live server: the pasted
token one calls the tool; the sign-in one (a client registered in advance, given to the SDK's
OAuthClientProvider through its storage) logs in and approves, here over plain HTTP where a user
would use the browser, and then calls the tool as that user."""

import html.parser
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urljoin

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from kb.models import Stakeholder
from signin.models import StakeholderLogin

pytestmark = [pytest.mark.db, pytest.mark.slow]

README = Path(__file__).resolve().parents[2] / "README.md"
README_URL = "http://127.0.0.1:8000/mcp"
PASSWORD = "readme-test-password-7d1e"  # noqa: S105  (a throwaway test login)


SNIPPETS = {"readme-python-token": 0, "readme-python-oauth": 1}


def readme_snippet(name: str) -> str:
    """The README's Python snippets under **From Python**: the pasted token one, then the one
    that signs in."""
    text = README.read_text(encoding="utf-8").split("**From Python**", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 2, "README.md: no Python snippets under **From Python**"
    return blocks[SNIPPETS[name]]


def signing_in_script(client_id: str, url: str) -> str:
    """The token snippet with its last line replaced by the sign-in one, as the README says."""
    token = readme_snippet("readme-python-token").rstrip().splitlines()
    assert token[-1].startswith("asyncio.run(main(headers=")
    code = "\n".join(token[:-1]) + "\n" + readme_snippet("readme-python-oauth")
    assert README_URL in code and 'CLIENT_ID = "…"' in code
    return code.replace(README_URL, url).replace('"…"', json.dumps(client_id))


def test_the_readme_snippets_are_python():
    compile(readme_snippet("readme-python-token"), "readme-python-token", "exec")
    compile(signing_in_script("client-id", README_URL), "readme-python-oauth", "exec")


def test_the_readme_token_snippet_calls_the_tool(server, world, tmp_path):
    code = readme_snippet("readme-python-token")
    assert README_URL in code
    script = tmp_path / "readme_token.py"
    script.write_text(code.replace(README_URL, server.mcp), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script)],
        env={**os.environ, "HYPERBOOK_TOKEN": world.tokens["KB-P-001"]},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "KB-P-001" in result.stdout  # the answer names the asker's scope


class _Inputs(html.parser.HTMLParser):
    """The named inputs of a page's form, as a browser would post them (checked boxes only)."""

    def __init__(self):
        super().__init__()
        self.fields: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        values = dict(attrs)
        if tag != "input" or not values.get("name") or values.get("type") == "submit":
            return
        if values.get("type") == "checkbox" and "checked" not in values:
            return
        self.fields.append((values["name"], values.get("value") or ""))


def form_fields(page: str) -> list[tuple[str, str]]:
    parser = _Inputs()
    parser.feed(page)
    return parser.fields


@pytest.fixture
def registered_client(world, django_db_blocker, tmp_path):
    """A login for KB-P-002 and a client registered in advance, as the README says."""
    with django_db_blocker.unblock():
        user, _ = get_user_model().objects.get_or_create(username="readme-user")
        user.set_password(PASSWORD)
        user.save()
        StakeholderLogin.objects.filter(stakeholder_id="KB-P-002").exclude(user=user).delete()
        StakeholderLogin.objects.update_or_create(
            user=user, defaults={"stakeholder": Stakeholder.objects.get(pk="KB-P-002")}
        )
        out = tmp_path / "client.json"
        with open(out, "w") as handle:
            call_command(
                "create_oauth_client",
                name="README <agent>",
                redirect_uris=["http://127.0.0.1:8765/callback"],
                stdout=handle,
            )
    return json.loads(out.read_text())["client_id"]


def test_the_readme_sign_in_snippet_signs_in_with_a_client_registered_in_advance(
    server, registered_client, monkeypatch, capsys
):
    code = signing_in_script(registered_client, server.mcp)
    landed: dict[str, str] = {}
    seen: dict[str, str] = {}

    def browser(authorization_url: str) -> bool:
        """What the user does in the browser: log in, approve; the address it lands on."""
        with httpx.Client(timeout=30) as web:
            login = web.get(authorization_url, follow_redirects=True)
            seen["login"] = login.text
            csrf = dict(form_fields(login.text))["csrfmiddlewaretoken"]
            consent = web.post(
                str(login.url),
                data={"username": "readme-user", "password": PASSWORD, "csrfmiddlewaretoken": csrf},
                follow_redirects=True,
            )
            assert 'id="consent-form"' in consent.text, consent.text[:2000]
            seen["consent_cache"] = consent.headers.get("cache-control", "")
            data: dict[str, list[str]] = {"allow": ["1"]}
            for name, value in form_fields(consent.text):
                data.setdefault(name, []).append(value)
            approved = web.post(str(consent.url), data=data)
            assert approved.status_code == 302, approved.text[:2000]
            landed["url"] = urljoin(str(consent.url), approved.headers["location"])
        return True

    monkeypatch.setattr("webbrowser.open", browser)
    namespace = {"__name__": "readme", "input": lambda prompt="": landed["url"]}
    exec(compile(code, "readme-python-oauth", "exec"), namespace)  # noqa: S102  (our README)
    # It signed in as the login's stakeholder and printed that user's answer.
    assert "KB-P-002" in capsys.readouterr().out
    # The login page named the agent that asked, escaped; the consent page was not cacheable.
    assert "README &lt;agent&gt;" in seen["login"] and "README <agent>" not in seen["login"]
    assert "no-store" in seen["consent_cache"]
