"""Start-up refuses (production) or warns (local) when PostgreSQL's row-level security would not
hold the KB rows: a superuser or BYPASSRLS reader role, or such a login role."""

import logging

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from kb.answering import database_roles_checked
from kb.selectors import kb_database_role_problems

pytestmark = [pytest.mark.postgres]


@pytest.fixture
def plain_login(on_postgres):
    """This connection as an ordinary login role (neither superuser nor BYPASSRLS)."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE ROLE hb_test_plain_login LOGIN NOSUPERUSER NOBYPASSRLS")
        cursor.execute("SET SESSION AUTHORIZATION hb_test_plain_login")
    yield
    with connection.cursor() as cursor:
        cursor.execute("RESET SESSION AUTHORIZATION")


def test_the_default_reader_role_and_a_plain_login_are_fine(plain_login):
    assert kb_database_role_problems() == []


def test_a_superuser_reader_role_is_named(plain_login, settings):
    settings.KB_DB_READER_ROLE = "postgres"
    (problem,) = kb_database_role_problems()
    assert "KB_DB_READER_ROLE 'postgres' is a superuser" in problem


def test_a_bypassrls_reader_role_is_named(on_postgres, settings):
    with connection.cursor() as cursor:
        cursor.execute("CREATE ROLE hb_test_bypass NOLOGIN BYPASSRLS")
        cursor.execute("CREATE ROLE hb_test_plain_login2 LOGIN")
        cursor.execute("SET SESSION AUTHORIZATION hb_test_plain_login2")
    settings.KB_DB_READER_ROLE = "hb_test_bypass"
    try:
        (problem,) = kb_database_role_problems()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET SESSION AUTHORIZATION")
    assert "'hb_test_bypass' is a BYPASSRLS role" in problem


def test_a_superuser_login_is_named(on_postgres):
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = session_user")
        (superuser,) = cursor.fetchone()
    if not superuser:
        pytest.skip("this run does not log in as a superuser")
    assert any("the app's login role" in p for p in kb_database_role_problems())


def test_production_refuses_to_start(on_postgres, settings):
    settings.KB_DB_READER_ROLE = "postgres"
    settings.KB_DB_ROLE_CHECK = "refuse"
    with pytest.raises(ImproperlyConfigured, match="superuser"):
        database_roles_checked()


def test_local_runs_warn_loudly(on_postgres, settings, caplog):
    settings.KB_DB_READER_ROLE = "postgres"
    settings.KB_DB_ROLE_CHECK = "warn"
    with caplog.at_level(logging.ERROR):
        database_roles_checked()
    assert "KB_DB_READER_ROLE 'postgres' is a superuser" in caplog.text
