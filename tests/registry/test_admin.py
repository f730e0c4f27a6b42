import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command

from registry.models import McpServer

pytestmark = pytest.mark.django_db


@pytest.fixture
def servers(settings):
    call_command("import_mcp_servers", str(settings.MCP_SERVERS_FILE))


@pytest.fixture
def admin_client(client):
    user = User.objects.create_superuser("root", password="pw-for-tests-only")
    client.force_login(user)
    return client


def change_form_data(server: McpServer, tools: list[str], **overrides) -> dict:
    existing = list(server.allowed_tools.order_by("tool_name"))
    data = {
        "enabled": "on" if server.enabled else "",
        "provider": server.provider,
        "transport": server.transport,
        "description": server.description,
        "base_url_env": server.base_url_env,
        "endpoint_path": server.endpoint_path,
        "auth_delivery": server.auth_delivery,
        "endpoint_url": server.endpoint_url,
        "token_env": server.token_env,
        "default_tool": server.default_tool,
        "router_mode": server.router_mode,
        "timeout_seconds_env": server.timeout_seconds_env,
        "timeout_seconds": "",
        "allowed_tools-TOTAL_FORMS": str(len(tools)),
        "allowed_tools-INITIAL_FORMS": str(len(existing)),
        "allowed_tools-MIN_NUM_FORMS": "0",
        "allowed_tools-MAX_NUM_FORMS": "1000",
    }
    for index, name in enumerate(tools):
        data[f"allowed_tools-{index}-tool_name"] = name
        data[f"allowed_tools-{index}-server"] = str(server.pk)
        if index < len(existing):
            data[f"allowed_tools-{index}-id"] = str(existing[index].pk)
    data.update(overrides)
    return data


def test_the_admin_lists_the_three_servers_in_korean(servers, admin_client):
    response = admin_client.get("/admin/registry/mcpserver/")
    body = response.content.decode()
    assert response.status_code == 200
    assert "MCP 서버" in body
    for server_id in ("kb_mcp", "kb_vector_mcp", "local_rag_8500"):
        assert server_id in body


def test_an_admin_can_edit_an_allowlist(servers, admin_client):
    server = McpServer.objects.get(server_id="kb_vector_mcp")
    data = change_form_data(server, ["kb.vector.search", "kb.vector.fetch"], router_mode="llm")
    response = admin_client.post(f"/admin/registry/mcpserver/{server.pk}/change/", data)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert set(server.allowed_tools.values_list("tool_name", flat=True)) == {
        "kb.vector.search",
        "kb.vector.fetch",
    }


def test_the_form_shows_which_field_broke_the_kb_contract(servers, admin_client):
    server = McpServer.objects.get(server_id="kb_mcp")
    data = change_form_data(
        server, ["ords.query.kb_select_ai_vpd"], endpoint_url="https://elsewhere.example/mcp"
    )
    response = admin_client.post(f"/admin/registry/mcpserver/{server.pk}/change/", data)
    assert response.status_code == 200
    assert "endpoint_url" in response.content.decode()
    server.refresh_from_db()
    assert server.endpoint_url == ""


def test_a_default_tool_outside_the_allowlist_is_refused_on_the_form(servers, admin_client):
    server = McpServer.objects.get(server_id="kb_mcp")
    data = change_form_data(server, ["ords.query.kb_select_ai_vpd"], default_tool="other.tool")
    response = admin_client.post(f"/admin/registry/mcpserver/{server.pk}/change/", data)
    assert response.status_code == 200
    assert "default_tool" in response.content.decode()
    server.refresh_from_db()
    assert server.default_tool == "ords.query.kb_select_ai_vpd"


def test_the_operator_groups_exist_with_fitting_permissions():
    admins = Group.objects.get(name="mcp_admins")
    auditors = Group.objects.get(name="auditors")
    admin_perms = set(admins.permissions.values_list("codename", flat=True))
    auditor_perms = set(auditors.permissions.values_list("codename", flat=True))
    assert {"add_mcpserver", "change_mcpserver", "change_allowedtool"} <= admin_perms
    assert "view_mcpserver" in auditor_perms
    assert {p for p in auditor_perms if not p.startswith("view_")} == {"explain_access"}


def test_the_demo_registrations_that_point_at_nothing_are_disabled_examples(servers, admin_client):
    examples = McpServer.objects.filter(server_id__in=["kb_vector_mcp", "local_rag_8500"])
    assert examples.count() == 2
    for server in examples:
        assert not server.enabled
        assert server.description.startswith("Example registration")
    assert McpServer.objects.get(server_id="kb_mcp").enabled
    body = admin_client.get("/admin/registry/mcpserver/?enabled__exact=1").content.decode()
    assert "kb_mcp" in body and "kb_vector_mcp" not in body and "local_rag_8500" not in body
