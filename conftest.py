"""Test-wide wiring: which database a run uses, and how missing services are treated."""

import os

import pytest


def pytest_collection_modifyitems(config, items):
    # Tests that touch the database get the `db` marker, so the PostgreSQL run can select them.
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if item.get_closest_marker("django_db") or fixtures & {
            "db",
            "transactional_db",
            "django_db_setup",
        }:
            item.add_marker(pytest.mark.db)


def service_missing(reason: str) -> None:
    """Locally a missing service skips the test; in CI it is a failure."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"required service unavailable in CI: {reason}")
    pytest.skip(reason)
