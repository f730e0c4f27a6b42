"""Loading the demo dataset: every CSV row arrives as it is, all or nothing, and twice is once."""

import io
import shutil
import time

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from kb.models import Branch, Contract, Customer, PremiumPayment, Product, Stakeholder
from kb.services import kb_demo_load
from tests.kb.conftest import DEMO_DIR, demo_rows

pytestmark = pytest.mark.django_db

MODELS = {
    "branches": Branch,
    "stakeholders": Stakeholder,
    "products": Product,
    "customers": Customer,
    "contracts": Contract,
    "premium_payments": PremiumPayment,
}


def snapshot() -> dict:
    return {name: list(model.objects.order_by("pk").values()) for name, model in MODELS.items()}


def load(**options) -> str:
    out = io.StringIO()
    call_command("load_kb_demo", stdout=out, **options)
    return out.getvalue()


def test_loading_creates_every_row_of_every_file():
    load()

    for name, model in MODELS.items():
        assert model.objects.count() == len(demo_rows(name)), name


def test_loaded_rows_hold_the_csv_values():
    load()

    c = Customer.objects.get(pk="C0001")
    assert (c.customer_name, str(c.birth_date), c.phone, c.rrn, c.planner_id, c.branch_id) == (
        "신하은",
        "1987-02-11",
        "010-8962-2842",
        "870211-2076141",
        "KB-P-001",
        "BR-GN",
    )
    unpaid = next(p for p in demo_rows("premium_payments") if not p["paid_date"])
    assert PremiumPayment.objects.get(pk=unpaid["payment_id"]).paid_date is None
    assert Stakeholder.objects.get(pk="KB-H-001").branch_id is None
    assert Stakeholder.objects.get(pk="KB-P-099").status == "suspended"


def test_loading_twice_changes_nothing():
    load()
    before = snapshot()

    output = load()

    assert "already loaded" in output
    assert snapshot() == before
    assert not kb_demo_load().changed


def test_loading_again_repairs_a_row_that_was_changed():
    load()
    Customer.objects.filter(pk="C0001").update(grade="VIP", phone="000")

    report = kb_demo_load()

    assert report.updated["customer"] == 1 and report.created["customer"] == 0
    assert Customer.objects.filter(pk="C0001", grade="일반", phone="010-8962-2842").exists()


def test_a_broken_file_loads_nothing_at_all(tmp_path):
    folder = tmp_path / "kb_demo"
    shutil.copytree(DEMO_DIR, folder)
    payments = folder / "premium_payments.csv"
    lines = payments.read_text(encoding="utf-8").splitlines()
    lines[-1] = lines[-1].rsplit(",", 3)[0] + ",not-a-number,납입,"
    payments.write_text("\n".join(lines) + "\n", encoding="utf-8")

    with pytest.raises(CommandError, match="premium_payments.csv line"):
        load(folder=folder)

    assert not any(model.objects.exists() for model in MODELS.values())


def test_a_file_missing_a_column_is_refused(tmp_path):
    folder = tmp_path / "kb_demo"
    shutil.copytree(DEMO_DIR, folder)
    (folder / "branches.csv").write_text("branch_id,branch_name\nBR-X,X\n", encoding="utf-8")

    with pytest.raises(CommandError, match="missing column"):
        load(folder=folder)


def test_loading_is_fast_enough_to_run_on_every_start():
    started = time.perf_counter()
    load()
    first = time.perf_counter() - started
    started = time.perf_counter()
    load()
    again = time.perf_counter() - started

    # Generous bounds (shared CI machines); measured ~0.3 s and ~0.1 s on SQLite.
    assert first < 10 and again < 5
