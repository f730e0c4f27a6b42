"""Test-wide wiring: which database a run uses, and how missing services are treated."""

import os
from contextlib import contextmanager

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
    # PostgreSQL-only tests (marked `postgres`) are deselected, not failed, in the SQLite pass:
    # `make test` runs them in its PostgreSQL pass, and under CI=true `on_postgres` would fail.
    from django.conf import settings

    if "postgresql" not in settings.DATABASES["default"]["ENGINE"]:
        keep = [item for item in items if not item.get_closest_marker("postgres")]
        if len(keep) != len(items):
            config.hook.pytest_deselected(items=[i for i in items if i not in keep])
            items[:] = keep


# Redis databases the tests may use, by purpose; each test process (an xdist worker) takes its own
# block, counted down from 15, so parallel workers never flush each other's data.
REDIS_TEST_PURPOSES = ("audit", "rate_limits", "sign_in")


def redis_test_url(purpose: str) -> str:
    """The URL of this test process's own Redis database for `purpose`."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    database = 15 - len(REDIS_TEST_PURPOSES) * int(worker or 0) - REDIS_TEST_PURPOSES.index(purpose)
    if database < 1:  # 0 is the one a development server uses
        raise RuntimeError(f"too many test workers for Redis' 16 databases ({worker})")
    return f"redis://127.0.0.1:6379/{database}"


@contextmanager
def redis_test_database(purpose: str):
    """This test process's own Redis database for `purpose` as (url, client), emptied before and
    after; a Redis that does not answer is a missing service."""
    import redis

    url = redis_test_url(purpose)
    client = redis.Redis.from_url(url, socket_timeout=2)
    try:
        client.flushdb()
    except redis.RedisError:
        service_missing("Redis is not reachable on 127.0.0.1:6379")
    try:
        yield url, client
    finally:
        client.flushdb()


def service_missing(reason: str) -> None:
    """Locally a missing service skips the test; in CI it is a failure."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"required service unavailable in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def django_db_setup(
    request,
    django_test_environment,
    django_db_blocker,
    django_db_use_migrations,
    django_db_keepdb,
    django_db_createdb,
    django_db_modify_db_settings,
):
    """pytest-django's setup, also preparing the database for tests marked `db` that use no `db`
    fixture: tests that share committed data with a real server process (tests.live).

    There is one database ("default"); it is set up when any collected test is marked `db`, which
    every `django_db` test is (pytest_collection_modifyitems above)."""
    from django.test.utils import setup_databases, teardown_databases

    items = request.session.items
    aliases = {"default"} if any(item.get_closest_marker("db") for item in items) else set()
    markers = (item.get_closest_marker("django_db") for item in items)
    serialized = any(marker and marker.kwargs.get("serialized_rollback") for marker in markers)
    serialized_aliases = aliases if serialized else set()
    keepdb = django_db_keepdb and not django_db_createdb
    with django_db_blocker.unblock():
        config = setup_databases(
            verbosity=request.config.option.verbose,
            interactive=False,
            aliases=aliases,
            serialized_aliases=serialized_aliases,
            keepdb=keepdb,
        )
    yield
    if not django_db_keepdb:
        with django_db_blocker.unblock():
            teardown_databases(config, verbosity=request.config.option.verbose)
