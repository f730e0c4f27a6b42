import pytest
from django.contrib.auth.models import Group, User

from conftest import redis_test_database, redis_test_url

# A Redis database of its own for the tests that run real Celery workers.
BROKER = redis_test_url("audit")


@pytest.fixture
def broker():
    with redis_test_database("audit") as (_, client):
        yield client


@pytest.fixture
def auditor(db):
    """A staff user in the auditors group."""
    user = User.objects.create_user("auditor", password="pw-for-tests-only", is_staff=True)
    user.groups.add(Group.objects.get(name="auditors"))
    return user
