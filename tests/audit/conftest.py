import pytest
import redis
from django.contrib.auth.models import Group, User

from conftest import redis_test_url, service_missing

# A Redis database of its own for the tests that run real Celery workers.
BROKER = redis_test_url("audit")


@pytest.fixture
def broker():
    client = redis.Redis.from_url(BROKER, socket_timeout=2)
    try:
        client.ping()
    except redis.RedisError:
        service_missing("Redis is not reachable on 127.0.0.1:6379")
    client.flushdb()
    yield client
    client.flushdb()


@pytest.fixture
def auditor(db):
    """A staff user in the auditors group."""
    user = User.objects.create_user("auditor", password="pw-for-tests-only", is_staff=True)
    user.groups.add(Group.objects.get(name="auditors"))
    return user
