"""A real agent signs in: the official MCP Python SDK's OAuth client provider connects to a live
/mcp, chromium (driven by Playwright) logs in and approves on the consent page, and the tool
answers with that user's stakeholder rows. Then: another user sees the other stakeholder's rows,
a refresh works, a grant revoked on the user's own page is refused at the next request, and a
token bound to another resource is refused with 401. No code or token appears in the database,
the server's log, the audit events or the screenshots."""

import asyncio
import json
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
import pytest
import redis
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from mcp.client.auth import OAuthClientProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata

from conftest import redis_test_database, redis_test_url, service_missing
from kb.models import Stakeholder
from registry.models import TokenDelegation
from signin.models import StakeholderLogin
from tests.browser.test_console_browser import ARTIFACTS, CHROMIUM
from tests.live import free_port, live_server
from tests.mcpserver.conftest import TOOL

pytestmark = [pytest.mark.db, pytest.mark.slow]

BROKER = redis_test_url("sign_in")
PASSWORD = "sign-in-test-password-51c2"  # noqa: S105  (a throwaway test login)
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


class MemoryStorage:
    def __init__(self, client: OAuthClientInformationFull):
        self.tokens, self.client = None, client

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info):
        self.client = client_info


@pytest.fixture(scope="module")
def signin_site(world, tmp_path_factory, django_db_blocker):
    if not Path(CHROMIUM).exists():
        service_missing("Debian's chromium is not installed (make test installs it as root)")
    folder = tmp_path_factory.mktemp("sign-in")
    callback_port = free_port()
    redirect_uri = f"http://127.0.0.1:{callback_port}/callback"
    with django_db_blocker.unblock():
        for username, stakeholder_id in (("kb-p-001", "KB-P-001"), ("kb-m-001", "KB-M-001")):
            user, _ = get_user_model().objects.get_or_create(username=username)
            user.set_password(PASSWORD)
            user.save()
            # One login per stakeholder: a link another test module left to this one gives way.
            StakeholderLogin.objects.filter(stakeholder_id=stakeholder_id).exclude(
                user=user
            ).delete()
            StakeholderLogin.objects.update_or_create(
                user=user, defaults={"stakeholder": Stakeholder.objects.get(pk=stakeholder_id)}
            )
        out = folder / "client.json"
        with open(out, "w") as handle:
            call_command(
                "create_oauth_client",
                name="SDK test agent",
                redirect_uris=[redirect_uri],
                stdout=handle,
            )
        client_id = json.loads(out.read_text())["client_id"]
    log = folder / "server.log"
    # A real broker, so that what the server queues (audit deliveries) can be searched after.
    with redis_test_database("sign_in"):
        env = {
            "MCP_RATE_LIMIT": "10000/minute",
            "CELERY_BROKER_URL": BROKER,
            "EGS2_MEMORY_API_URL": "http://127.0.0.1:9/memories",  # queued, never delivered
        }
        with live_server(log, env) as url:
            yield {"url": url, "log": log, "client_id": client_id, "redirect_uri": redirect_uri}


async def sign_in_and_call(site: dict, username: str, prompt: str, shots: list[Path]):
    """Connect with the SDK's OAuth provider; log in and approve in chromium; call the tool."""
    from playwright.async_api import async_playwright

    found: dict = {}

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS
        )
        page = await browser.new_page(locale="ko-KR")

        async def capture(route):
            query = parse_qs(urlsplit(route.request.url).query)
            found.update({k: v[0] for k, v in query.items()})
            await route.fulfill(status=200, body="signed in")

        await page.route(f"{site['redirect_uri']}*", capture)

        async def redirect_handler(authorization_url: str) -> None:
            await page.goto(authorization_url)
            await page.fill("#id_username", username)
            await page.fill("#id_password", PASSWORD)
            await page.click("input[type=submit]")
            await page.wait_for_selector("#consent-form")
            assert await page.text_content("#client-name") == "SDK test agent"
            assert username.upper() in await page.text_content("#acting-as")
            shot = ARTIFACTS / f"sign-in-consent-{username}.png"
            ARTIFACTS.mkdir(exist_ok=True)
            await page.screenshot(path=str(shot), full_page=True)
            shots.append(shot)
            await page.click("#approve")
            await page.wait_for_url(f"{site['redirect_uri']}*")

        async def callback_handler() -> AuthorizationCodeResult:
            return AuthorizationCodeResult(
                code=found["code"], state=found.get("state"), iss=found.get("iss")
            )

        storage = MemoryStorage(
            OAuthClientInformationFull(
                client_id=site["client_id"],
                redirect_uris=[site["redirect_uri"]],
                token_endpoint_auth_method="none",
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
            )
        )
        provider = OAuthClientProvider(
            server_url=f"{site['url']}/mcp",
            client_metadata=OAuthClientMetadata(
                redirect_uris=[site["redirect_uri"]], client_name="SDK test agent"
            ),
            storage=storage,
            redirect_handler=redirect_handler,
            callback_handler=callback_handler,
        )
        try:
            async with httpx2.AsyncClient(auth=provider, timeout=60) as http:
                async with streamable_http_client(f"{site['url']}/mcp", http_client=http) as (
                    read,
                    write,
                ):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        result = await session.call_tool(TOOL, {"prompt": prompt, "limit": 100})
        finally:
            await browser.close()
    return result, storage.tokens, found


def call_with(url: str, token: str, prompt: str = "담당 고객 목록") -> httpx.Response:
    return httpx.post(
        f"{url}/mcp",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": TOOL, "arguments": {"prompt": prompt, "limit": 100}},
        },
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
        },
        timeout=30,
    )


def customer_ids(result) -> set[str]:
    assert not result.is_error, result.content
    return {row["customer_id"] for row in result.structured_content["rows"]}


def test_an_agent_signs_in_as_its_user_and_gets_that_users_rows(
    signin_site, world, django_db_blocker, tmp_path
):
    shots: list[Path] = []
    site = signin_site
    planner, planner_tokens, planner_redirect = asyncio.run(
        sign_in_and_call(site, "kb-p-001", "담당 고객 목록", shots)
    )
    assert planner.structured_content["stakeholder"]["id"] == "KB-P-001"
    assert customer_ids(planner) == world.visible_customers["KB-P-001"]
    assert planner_redirect["iss"] == site["url"]

    manager, manager_tokens, _ = asyncio.run(
        sign_in_and_call(site, "kb-m-001", "우리 지점 고객 목록", shots)
    )
    assert manager.structured_content["stakeholder"]["id"] == "KB-M-001"
    assert customer_ids(manager) == world.visible_customers["KB-M-001"]
    assert customer_ids(manager) != customer_ids(planner)

    # A refresh: new tokens under the same delegation, and the new access token answers.
    refreshed = httpx.post(
        f"{site['url']}/oauth/token/",
        data={
            "grant_type": "refresh_token",
            "refresh_token": planner_tokens.refresh_token,
            "client_id": site["client_id"],
        },
        timeout=30,
    )
    assert refreshed.status_code == 200, refreshed.text
    renewed = refreshed.json()
    assert call_with(site["url"], renewed["access_token"]).status_code == 200
    assert call_with(site["url"], planner_tokens.access_token).status_code == 401  # rotated

    # Revoked on the user's own page: refused at the very next request.
    with django_db_blocker.unblock():
        grant = TokenDelegation.objects.filter(
            source=TokenDelegation.Source.SIGNED_IN, stakeholder_id="KB-M-001"
        ).latest("created_at")
    session = httpx.Client(base_url=site["url"], timeout=30)
    login = session.get("/oauth/login/")
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
    session.post(
        "/oauth/login/",
        data={"username": "kb-m-001", "password": PASSWORD, "csrfmiddlewaretoken": csrf},
        headers={"Referer": f"{site['url']}/oauth/login/"},
    )
    agents = session.get("/oauth/agents/")
    assert agents.status_code == 200 and f'data-grant="{grant.pk}"' in agents.text
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', agents.text).group(1)
    revoked = session.post(
        f"/oauth/agents/{grant.pk}/revoke/",
        data={"csrfmiddlewaretoken": csrf},
        headers={"Referer": f"{site['url']}/oauth/agents/"},
    )
    assert revoked.status_code == 302
    assert call_with(site["url"], manager_tokens.access_token).status_code == 401

    # A token bound to another resource: a server whose resource is elsewhere refuses it.
    elsewhere = {
        "MCP_RESOURCE_URL": "https://elsewhere.example/mcp",
        "MCP_RATE_LIMIT": "10000/minute",
    }
    with live_server(tmp_path / "elsewhere.log", elsewhere) as other_url:
        refused = call_with(other_url, renewed["access_token"])
        assert refused.status_code == 401
        assert "invalid_token" in refused.headers["www-authenticate"]

    # Canaries: the tokens and codes the agents held are nowhere at rest.
    secrets = [
        planner_tokens.access_token,
        planner_tokens.refresh_token,
        manager_tokens.access_token,
        manager_tokens.refresh_token,
        renewed["access_token"],
        renewed["refresh_token"],
        planner_redirect["code"],
    ]
    assert_nowhere(secrets, [site["log"], tmp_path / "elsewhere.log"], shots, django_db_blocker)


def assert_nowhere(secrets, logs, shots, django_db_blocker):
    assert_nowhere_but_broker(secrets, logs, django_db_blocker)
    for shot in shots:
        assert shot.exists() and shot.stat().st_size > 0
    broker = redis.Redis.from_url(BROKER)
    queued = b"".join(_redis_values(broker, key) for key in broker.keys("*"))
    assert queued, "the server queued nothing: the broker was not the one searched"
    assert not any(secret.encode() in queued for secret in secrets)


def assert_nowhere_but_broker(secrets, logs, django_db_blocker):
    """No secret in the servers' logs, in any table, or in SQLite's files."""
    for log in logs:
        text = log.read_text(errors="replace")
        assert not any(secret in text for secret in secrets), log
    with django_db_blocker.unblock():
        with connection.cursor() as cursor:
            tables = connection.introspection.table_names(cursor)
            for table in tables:
                cursor.execute(f'SELECT * FROM "{table}"')  # noqa: S608  (our own table names)
                dump = repr(cursor.fetchall())
                assert not any(secret in dump for secret in secrets), table
        if connection.vendor == "sqlite":
            name = connection.settings_dict["NAME"]
            for path in (Path(name), Path(f"{name}-wal")):
                if path.exists():
                    raw = path.read_bytes()
                    assert not any(secret.encode() in raw for secret in secrets), path


def _redis_values(broker, key) -> bytes:
    kind = broker.type(key)
    if kind == b"list":
        return b"".join(broker.lrange(key, 0, -1))
    if kind == b"string":
        return broker.get(key) or b""
    if kind == b"hash":
        return b"".join(k + v for k, v in broker.hgetall(key).items())
    if kind == b"set":
        return b"".join(broker.smembers(key))
    if kind == b"zset":
        return b"".join(broker.zrange(key, 0, -1))
    return key
