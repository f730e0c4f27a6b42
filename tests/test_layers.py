"""The app layers of pyproject.toml ([tool.importlinter]): a forbidden import, at module level or
inside a function, fails this test."""

from pathlib import Path

from importlinter import api  # noqa: F401  (registers import-linter's contract types)
from importlinter.application import use_cases

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_no_app_imports_a_layer_above_it():
    assert use_cases.lint_imports(str(PYPROJECT), cache_dir=None, no_logo=True)
