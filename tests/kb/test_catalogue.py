"""The entity catalogue is the one source: every view of the entities is derived from it."""

import subprocess
import sys

import pytest

from kb import catalogue
from kb.answers import ANSWER_JSON_SCHEMA
from kb.plans import ENTITIES
from kb.policy import ENTITY_COLUMNS
from kb.selectai.parser import FIELDS, IDENTITY_FIELDS
from mcpserver import tool
from registry import declarations
from registry.mcp import contract


@pytest.mark.slow
def test_the_catalogue_imports_nothing_from_django():
    code = (
        "import sys, kb.catalogue, kb.selectai.wording;"
        " print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"


def test_plans_policy_and_parser_see_the_same_entities_and_fields():
    assert ENTITIES is catalogue.ENTITIES
    for name, spec in catalogue.ENTITIES.items():
        assert ENTITY_COLUMNS[name] == set(spec.fields) == FIELDS[name]
        assert IDENTITY_FIELDS[name] == list(spec.identity)
        assert set(spec.defaults) | set(spec.identity) | {spec.key} <= set(spec.fields)
        assert spec.date_field in spec.fields


def test_the_tool_name_and_limits_have_one_source():
    assert tool.TOOL_NAME == declarations.KB_TOOL_NAME == catalogue.TOOL_NAME
    assert (tool.LIMIT_MIN, tool.LIMIT_MAX) == (catalogue.MIN_LIMIT, catalogue.MAX_LIMIT)
    assert (contract.LIMIT_MIN, contract.LIMIT_MAX) == (
        catalogue.MIN_LIMIT,
        catalogue.MAX_LIMIT,
    )
    limit = ANSWER_JSON_SCHEMA["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"]) == (catalogue.MIN_LIMIT, catalogue.MAX_LIMIT)
    schema = tool.input_schema()["properties"]["limit"]
    assert (schema["maximum"], schema["default"]) == (
        catalogue.MAX_LIMIT,
        catalogue.TOOL_DEFAULT_LIMIT,
    )
