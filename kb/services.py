"""Writes to the KB: loading the fixed demo dataset; the PostgreSQL reader role and RLS setup."""

from __future__ import annotations

import csv
import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.db import DatabaseError, connections, models, router, transaction

from kb.models import Branch, Contract, Customer, PremiumPayment, Product, Stakeholder
from kb.policy import CONTEXT_MAINTENANCE, reader_role, rls_drop_statements, rls_statements

DEMO_DATA_DIR = Path(__file__).resolve().parent / "data" / "kb_demo"


class LoadError(Exception):
    pass


def _text(value: str) -> str:
    return value.strip()


def _optional(value: str) -> str | None:
    return value.strip() or None


def _date(value: str) -> dt.date:
    return dt.date.fromisoformat(value.strip())


def _optional_date(value: str) -> dt.date | None:
    return _date(value) if value.strip() else None


def _int(value: str) -> int:
    return int(value.strip())


@dataclass(frozen=True)
class _Table:
    file: str
    model: type[models.Model]
    columns: dict[str, tuple[str, Callable]]  # CSV column -> (model attname, converter)


# Dependency order: a table comes after the tables its foreign keys point to.
TABLES = (
    _Table(
        "branches.csv",
        Branch,
        {"branch_id": ("branch_id", _text), "branch_name": ("branch_name", _text)}
        | {"region": ("region", _text)},
    ),
    _Table(
        "stakeholders.csv",
        Stakeholder,
        {"stakeholder_id": ("stakeholder_id", _text), "name": ("name", _text)}
        | {"role": ("role", _text), "branch_id": ("branch_id", _optional)}
        | {"status": ("status", _text)},
    ),
    _Table(
        "products.csv",
        Product,
        {"product_code": ("product_code", _text), "product_name": ("product_name", _text)}
        | {"category": ("category", _text), "term_years": ("term_years", _int)},
    ),
    _Table(
        "customers.csv",
        Customer,
        {"customer_id": ("customer_id", _text), "customer_name": ("customer_name", _text)}
        | {"birth_date": ("birth_date", _date), "gender": ("gender", _text)}
        | {"phone": ("phone", _text), "rrn": ("rrn", _text)}
        | {"planner_id": ("planner_id", _text), "branch_id": ("branch_id", _text)}
        | {"grade": ("grade", _text), "joined_on": ("joined_on", _date)},
    ),
    _Table(
        "contracts.csv",
        Contract,
        {"contract_id": ("contract_id", _text), "customer_id": ("customer_id", _text)}
        | {"product_code": ("product_id", _text), "status": ("status", _text)}
        | {"start_date": ("start_date", _date), "end_date": ("end_date", _date)}
        | {"monthly_premium": ("monthly_premium", _int), "sum_insured": ("sum_insured", _int)}
        | {"payment_day": ("payment_day", _int)},
    ),
    _Table(
        "premium_payments.csv",
        PremiumPayment,
        {"payment_id": ("payment_id", _text), "contract_id": ("contract_id", _text)}
        | {"due_month": ("due_month", _text), "due_date": ("due_date", _date)}
        | {"amount": ("amount", _int), "status": ("status", _text)}
        | {"paid_date": ("paid_date", _optional_date)},
    ),
)


@dataclass
class LoadReport:
    created: dict[str, int] = field(default_factory=dict)
    updated: dict[str, int] = field(default_factory=dict)
    unchanged: dict[str, int] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return any(self.created.values()) or any(self.updated.values())


def _read_rows(folder: Path, table: _Table) -> list[dict]:
    path = folder / table.file
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            missing = set(table.columns) - set(reader.fieldnames or ())
            if missing:
                raise LoadError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
            rows = []
            for number, raw in enumerate(reader, start=2):
                try:
                    rows.append(
                        {attr: convert(raw[col]) for col, (attr, convert) in table.columns.items()}
                    )
                except (TypeError, ValueError) as exc:
                    raise LoadError(f"{path} line {number}: {exc}") from None
            return rows
    except OSError as exc:
        raise LoadError(f"cannot read {path}: {exc.strerror}") from exc


def kb_demo_load(*, folder: Path | None = None) -> LoadReport:
    """Insert or correct the demo rows (all or nothing); a second run changes nothing.

    Rows are matched by natural key and compared column by column; rows not in the files are kept.
    """
    folder = Path(folder or DEMO_DATA_DIR)
    data = [(table, _read_rows(folder, table)) for table in TABLES]  # read everything first
    using = router.db_for_write(Customer)
    report = LoadReport()
    with transaction.atomic(using=using):
        connection = connections[using]
        if connection.vendor == "postgresql":
            # The tables FORCE row-level security; the owner writes only under this declaration.
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config(%s, 'on', true)", [CONTEXT_MAINTENANCE])
        for table, rows in data:
            _sync_table(table, rows, using=using, report=report)
        if report.changed and connection.vendor == "postgresql":
            # Fresh statistics, so the first plans after a load get good query plans.
            with connection.cursor() as cursor:
                cursor.execute(f"ANALYZE {', '.join(t.model._meta.db_table for t in TABLES)}")
    return report


def _sync_table(table: _Table, rows: list[dict], *, using: str, report: LoadReport) -> None:
    model = table.model
    pk = model._meta.pk.attname
    attrs = [attr for attr, _convert in table.columns.values()]
    existing = {
        values[0]: values
        for values in model._default_manager.using(using).order_by().values_list(pk, *attrs)
    }
    new, changed = [], []
    for row in rows:
        current = existing.get(row[pk])
        if current is None:
            new.append(model(**row))
        elif current[1:] != tuple(row[attr] for attr in attrs):
            changed.append(model(**row))
    model._default_manager.using(using).bulk_create(new, batch_size=1000)
    if changed:
        fields = [attr for attr in attrs if attr != pk]
        model._default_manager.using(using).bulk_update(changed, fields, batch_size=500)
    name = model._meta.model_name
    assert name is not None  # every concrete model has one
    report.created[name] = len(new)
    report.updated[name] = len(changed)
    report.unchanged[name] = len(rows) - len(new) - len(changed)


# --- PostgreSQL: the reader role and the row-level security policies ----------------------------

_PLAIN_ROLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def kb_tables() -> list[str]:
    models_ = (Branch, Stakeholder, Product, Customer, Contract, PremiumPayment)
    return [model._meta.db_table for model in models_]


def _role_statements(role: str, *, grant_to: str | None) -> list[str]:
    """Idempotent: roles are cluster-wide, so another database may have created it already."""
    quoted = f'"{role}"'
    grantee = "CURRENT_USER" if grant_to is None else f'"{grant_to}"'
    grantee_name = "current_user" if grant_to is None else f"'{grant_to}'"
    # Role names are checked to be plain identifiers (policy.reader_role, _PLAIN_ROLE).
    create = (
        "DO $$ BEGIN\n"  # noqa: S608
        f"  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{role}') THEN\n"
        f"    CREATE ROLE {quoted} NOLOGIN NOBYPASSRLS;\n"
        "  END IF;\n"
        "END $$"
    )
    return [
        create,
        f"""DO $$ BEGIN
  EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', current_schema(), '{role}');
END $$""",
        f"GRANT SELECT ON {', '.join(kb_tables())} TO {quoted}",
        "DO $$ BEGIN\n"
        f"  IF NOT pg_has_role({grantee_name}, '{role}', 'MEMBER') THEN\n"
        f"    GRANT {quoted} TO {grantee};\n"
        "  END IF;\n"
        "END $$",
    ]


def kb_rls_install(*, connection) -> list[str]:
    """(Re)create the RLS policies, then the reader role and its grants where permitted.

    Run by the tables' owner (a migration). Missing privileges for the role only produce warnings
    (returned), so `migrate` works for an ordinary owner; a DBA then runs `setup_kb_db_role`.
    """
    if connection.vendor != "postgresql":
        return []
    warnings = []
    with connection.cursor() as cursor:
        for statement in rls_statements():
            cursor.execute(statement)
        for statement in _role_statements(reader_role(), grant_to=None):
            try:
                with transaction.atomic(using=connection.alias):
                    cursor.execute(statement)
            except DatabaseError as exc:
                warnings.append(f"{' '.join(statement.split())}: {exc}".strip())
    return warnings


def kb_rls_uninstall(*, connection) -> None:
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for statement in rls_drop_statements():
            cursor.execute(statement)


def kb_reader_role_setup(*, using: str = "default", grant_to: str | None = None) -> list[str]:
    """For a DBA: create or repair the reader role (NOLOGIN, NOBYPASSRLS), grant it SELECT on the
    KB tables, and make `grant_to` (default: the connected user) a member so it may SET ROLE to it.

    Returns the statements run; raises on any missing privilege. The RLS policies themselves come
    from the migrations (they must be created by the tables' owner).
    """
    connection = connections[using]
    if connection.vendor != "postgresql":
        return []
    if grant_to is not None and not _PLAIN_ROLE.match(grant_to):
        raise ValueError("grant_to must be a plain role name")
    role = reader_role()
    statements = _role_statements(role, grant_to=grant_to)
    statements.insert(1, f'ALTER ROLE "{role}" NOLOGIN NOSUPERUSER NOBYPASSRLS')
    with transaction.atomic(using=using), connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)
    return statements
