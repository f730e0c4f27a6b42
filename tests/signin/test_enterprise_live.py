"""SEP-990 against a live server: the official MCP Python SDK's IdentityAssertionOAuthProvider,
given an ID-JAG a test enterprise IdP signs, finds hyperbook's token endpoint from its issuer's
metadata, exchanges the ID-JAG with the jwt-bearer grant, and calls the /mcp tool as the
stakeholder the IdP's subject is linked to. An ID-JAG for another audience, or one presented
twice, gets no token; the ID-JAG and the token are nowhere in the server's log or the database."""

import asyncio
import json

import httpx2
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from mcp.client.auth import OAuthTokenError
from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from kb.models import Stakeholder
from registry.models import TokenDelegation
from signin.models import EnterpriseIdp, StakeholderLogin
from tests.live import live_server
from tests.mcpserver.conftest import TOOL
from tests.signin.enterprise_idp import CLIENT_SECRET, TestIdp, confidential_client

pytestmark = [pytest.mark.db, pytest.mark.slow]

LIVE_IDP = "https://idp-live.enterprise.example"
USERNAME = "ent-live-kb-p-001"


class MemoryStorage:
    def __init__(self):
        self.tokens = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens


@pytest.fixture(scope="module")
def enterprise_site(world, tmp_path_factory, django_db_blocker):
    idp = TestIdp(issuer=LIVE_IDP)
    with django_db_blocker.unblock():
        user, _ = get_user_model().objects.get_or_create(username=USERNAME)
        # One login per stakeholder: a link another test module left to this one gives way.
        StakeholderLogin.objects.filter(stakeholder_id="KB-P-001").exclude(user=user).delete()
        StakeholderLogin.objects.update_or_create(
            user=user, defaults={"stakeholder": Stakeholder.objects.get(pk="KB-P-001")}
        )
        agent = confidential_client("SEP-990 test agent")
        row = idp.register(client_ids=[agent.client_id], tools=[TOOL])
    log = tmp_path_factory.mktemp("enterprise") / "server.log"
    env = {"MCP_RATE_LIMIT": "10000/minute", "MCP_AUTH_FAILURE_LIMIT": "10000/minute"}
    try:
        with live_server(log, env) as url:
            yield {"url": url, "log": log, "idp": idp, "client_id": agent.client_id}
    finally:
        with django_db_blocker.unblock():
            EnterpriseIdp.objects.filter(pk=row.pk).delete()
            get_user_model().objects.filter(username=USERNAME).delete()


async def call_tool(site: dict, assertion_for, prompt: str = "담당 고객 목록"):
    seen: dict = {}

    async def assertion_provider(audience: str, resource: str) -> str:
        seen.update(audience=audience, resource=resource)
        seen["assertion"] = assertion_for(audience, resource)
        return seen["assertion"]

    storage = MemoryStorage()
    provider = IdentityAssertionOAuthProvider(
        server_url=f"{site['url']}/mcp",
        storage=storage,
        client_id=site["client_id"],
        client_secret=CLIENT_SECRET,
        issuer=site["url"],
        assertion_provider=assertion_provider,
    )
    async with httpx2.AsyncClient(auth=provider, timeout=60) as http:
        async with streamable_http_client(f"{site['url']}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool(TOOL, {"prompt": prompt, "limit": 100})
    return result, storage.tokens, seen


def test_an_agent_with_an_id_jag_calls_the_tool_as_the_linked_stakeholder(
    enterprise_site, world, django_db_blocker
):
    site, idp = enterprise_site, enterprise_site["idp"]

    def id_jag(audience, resource):
        return idp.id_jag(
            audience=audience, resource=resource, client_id=site["client_id"], subject=USERNAME
        )

    result, tokens, seen = asyncio.run(call_tool(site, id_jag))
    # What the SDK asks the IdP for: our issuer as aud, our /mcp as resource.
    assert seen["audience"] == site["url"]
    assert seen["resource"] == f"{site['url']}/mcp"
    assert not result.is_error, result.content
    assert result.structured_content["stakeholder"]["id"] == "KB-P-001"
    rows = {row["customer_id"] for row in result.structured_content["rows"]}
    assert rows == world.visible_customers["KB-P-001"]
    assert tokens.refresh_token is None

    with django_db_blocker.unblock():
        delegation = TokenDelegation.objects.filter(
            source=TokenDelegation.Source.ENTERPRISE, oauth_client_id=site["client_id"]
        ).get()
        assert delegation.created_by.get_username() == USERNAME
        assert delegation.last_used_at is not None

    # The same ID-JAG again (a captured one): no token.
    with pytest.raises(BaseException) as replayed:  # the SDK's error, inside anyio's group
        asyncio.run(call_tool(site, lambda audience, resource: seen["assertion"]))
    assert "replayed" in _flatten(replayed.value)

    # An ID-JAG for another authorization server: no token either.
    def elsewhere(audience, resource):
        return idp.id_jag(
            audience="https://other-as.example",
            resource=resource,
            client_id=site["client_id"],
            subject=USERNAME,
        )

    with pytest.raises(BaseException) as refused:
        asyncio.run(call_tool(site, elsewhere))
    assert "aud must be" in _flatten(refused.value)

    log = site["log"].read_text(errors="replace")
    assert tokens.access_token not in log and seen["assertion"] not in log
    with django_db_blocker.unblock():
        with connection.cursor() as cursor:
            for table in connection.introspection.table_names(cursor):
                cursor.execute(f'SELECT * FROM "{table}"')  # noqa: S608  (our own table names)
                dump = repr(cursor.fetchall())
                assert tokens.access_token not in dump, table
                assert seen["assertion"] not in dump, table


def _flatten(error: BaseException) -> str:
    """The messages of an error and of every error grouped inside it."""
    if isinstance(error, OAuthTokenError):
        return str(error)
    parts = [str(error)]
    for inner in getattr(error, "exceptions", ()):
        parts.append(_flatten(inner))
    if error.__cause__ is not None:
        parts.append(_flatten(error.__cause__))
    return json.dumps(parts, ensure_ascii=False)
