"""The app layers of pyproject.toml ([tool.importlinter]): a forbidden import, at module level or
inside a function, fails this test; and the one module that makes delegations."""

import re
from pathlib import Path

from importlinter import api  # noqa: F401  (registers import-linter's contract types)
from importlinter.application import use_cases

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_no_app_imports_a_layer_above_it():
    assert use_cases.lint_imports(str(PYPROJECT), cache_dir=None, no_logo=True)


APPS = ("core", "audit", "kb", "registry", "mcpserver", "signin")
# Writing a delegation row anywhere else would skip its fingerprint, bounds and audit event.
MAKES_A_DELEGATION = re.compile(
    r"(?<!class )TokenDelegation(?:\.objects\.(?:create|bulk_create|get_or_create)|\()"
)


def test_every_delegation_is_made_in_registry_delegations():
    root = PYPROJECT.parent
    makers = {
        str(path.relative_to(root))
        for app in APPS
        for path in (root / app).rglob("*.py")
        if "migrations" not in path.parts
        and MAKES_A_DELEGATION.search(path.read_text(encoding="utf-8"))
    }
    assert makers == {"registry/delegations.py"}
