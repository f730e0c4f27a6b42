import json
import stat

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command
from django.test import RequestFactory

from kb.models import Stakeholder
from signin.models import StakeholderLogin

pytestmark = pytest.mark.django_db


def test_one_login_per_active_stakeholder_with_its_password_in_an_owner_only_file(kb, tmp_path):
    path = tmp_path / "demo_logins.json"
    call_command("ensure_demo_logins", output=str(path), verbosity=0)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    passwords = json.loads(path.read_text())
    active = set(
        Stakeholder.objects.filter(status=Stakeholder.Status.ACTIVE).values_list(
            "stakeholder_id", flat=True
        )
    )
    assert set(passwords) == {sid.lower() for sid in active}
    assert "kb-p-099" not in passwords  # suspended: no login to sign agents in with
    for username, password in passwords.items():
        login = RequestFactory().post("/oauth/login/")  # django-axes counts logins by request
        user = authenticate(login, username=username, password=password)
        assert user is not None
        assert StakeholderLogin.objects.get(user=user).stakeholder_id == username.upper()

    call_command("ensure_demo_logins", output=str(path), verbosity=0)
    assert json.loads(path.read_text()) == passwords  # again: nothing changes
