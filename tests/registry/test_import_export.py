import json

import pytest
from django.core.management import CommandError, call_command

from registry.models import AllowedTool, McpServer
from tests.registry.conftest import custom_python_declaration, kb_declaration, vector_declaration

pytestmark = pytest.mark.django_db


def write(tmp_path, rows) -> str:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"servers": rows}), encoding="utf-8")
    return str(path)


def database_snapshot():
    servers = list(McpServer.objects.order_by("server_id").values())
    tools = list(AllowedTool.objects.order_by("server_id", "tool_name").values_list())
    return servers, tools


def test_the_project_config_imports_all_three_servers(settings):
    call_command("import_mcp_servers", str(settings.MCP_SERVERS_FILE))
    assert set(McpServer.objects.values_list("server_id", flat=True)) == {
        "kb_mcp",
        "kb_vector_mcp",
        "local_rag_8500",
    }
    kb = McpServer.objects.get(server_id="kb_mcp")
    assert kb.endpoint_url == "" and kb.token_env == ""
    assert list(kb.allowed_tools.values_list("tool_name", flat=True)) == [
        "ords.query.kb_select_ai_vpd"
    ]


def test_import_is_idempotent(tmp_path, capsys):
    path = write(tmp_path, [kb_declaration(), vector_declaration()])
    call_command("import_mcp_servers", path)
    first = database_snapshot()
    call_command("import_mcp_servers", path)
    assert database_snapshot() == first
    assert "unchanged 2" in capsys.readouterr().out


def test_one_bad_row_leaves_the_database_unchanged(tmp_path):
    call_command("import_mcp_servers", write(tmp_path, [vector_declaration()]))
    before = database_snapshot()
    changed_vector = vector_declaration(description="changed")
    bad_kb = kb_declaration(token_env="KB_TOKEN")
    with pytest.raises(CommandError, match="nothing was imported"):
        call_command(
            "import_mcp_servers",
            write(tmp_path, [changed_vector, custom_python_declaration(), bad_kb]),
        )
    assert database_snapshot() == before


def test_every_invalid_row_is_reported_with_its_id_and_field(tmp_path, capsys):
    rows = [
        kb_declaration(endpoint_url="https://x/mcp"),
        vector_declaration(endpoint_url="http://remote.example/mcp"),
        custom_python_declaration(),
    ]
    with pytest.raises(CommandError):
        call_command("import_mcp_servers", write(tmp_path, rows))
    err = capsys.readouterr().err
    assert "kb_mcp: endpoint_url" in err
    assert "kb_vector_mcp: endpoint_url" in err
    assert "local_rag_8500" not in err
    assert McpServer.objects.count() == 0


def test_a_duplicate_id_in_one_file_is_refused(tmp_path):
    with pytest.raises(CommandError):
        call_command("import_mcp_servers", write(tmp_path, [kb_declaration(), kb_declaration()]))
    assert McpServer.objects.count() == 0


def test_a_file_that_is_not_json_is_a_clear_error(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(CommandError, match="not valid JSON"):
        call_command("import_mcp_servers", str(path))


def test_import_updates_an_allowlist(tmp_path):
    call_command("import_mcp_servers", write(tmp_path, [vector_declaration()]))
    widened = vector_declaration(
        tool_allowlist=["kb.vector.search", "kb.vector.fetch"], router_mode="llm"
    )
    call_command("import_mcp_servers", write(tmp_path, [widened]))
    tools = McpServer.objects.get(server_id="kb_vector_mcp").allowed_tools
    assert set(tools.values_list("tool_name", flat=True)) == {"kb.vector.search", "kb.vector.fetch"}


def test_export_round_trips_through_import(tmp_path, capsys):
    rows = [kb_declaration(), vector_declaration(), custom_python_declaration()]
    call_command("import_mcp_servers", write(tmp_path, rows))
    capsys.readouterr()
    call_command("export_mcp_servers")
    exported = json.loads(capsys.readouterr().out)
    assert {row["id"] for row in exported["servers"]} == {r["id"] for r in rows}
    kb_row = next(row for row in exported["servers"] if row["id"] == "kb_mcp")
    assert kb_row == kb_declaration()
    before = database_snapshot()
    path = tmp_path / "exported.json"
    path.write_text(json.dumps(exported), encoding="utf-8")
    call_command("import_mcp_servers", str(path))
    assert database_snapshot() == before
