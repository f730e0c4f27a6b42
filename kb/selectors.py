"""Reads from the KB that carry no customer data: principals, vocabulary, the as-of date.

Customer, contract and payment rows are read only through kb.vpd, which applies the VPD policy.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import TypedDict

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from kb.models import Branch, Product, Stakeholder


def kb_as_of_date() -> dt.date:
    try:
        return dt.date.fromisoformat(settings.KB_AS_OF_DATE)
    except ValueError as exc:
        raise ImproperlyConfigured("KB_AS_OF_DATE must be a date written YYYY-MM-DD") from exc


def stakeholder_get(stakeholder_id: str) -> Stakeholder | None:
    """The KB_STAKEHOLDERS row, whatever its role or status (the policy decides what it may see)."""
    if not isinstance(stakeholder_id, str) or not stakeholder_id:
        return None
    return Stakeholder.objects.filter(pk=stakeholder_id).first()


class VocabularyRows(TypedDict):
    products: Sequence[Mapping[str, object]]
    branches: Sequence[Mapping[str, object]]
    stakeholders: Sequence[Mapping[str, object]]


def vocabulary_rows() -> VocabularyRows:
    """Products, branches and stakeholders as rows shaped like the kb_demo CSV headers.

    `kb.selectai.vocabulary.vocabulary_from_rows(**vocabulary_rows())` builds the parser's
    vocabulary.
    """
    return {
        "products": list(
            Product.objects.order_by("product_code").values(
                "product_code", "product_name", "category"
            )
        ),
        "branches": list(
            Branch.objects.order_by("branch_id").values("branch_id", "branch_name", "region")
        ),
        "stakeholders": list(
            Stakeholder.objects.order_by("stakeholder_id").values(
                "stakeholder_id", "name", "role", "branch_id", "status"
            )
        ),
    }


def kb_database_role_problems(*, using: str = "default") -> list[str]:
    """Why PostgreSQL's row-level security would not hold the KB rows, if it would not.

    KB reads switch to KB_DB_READER_ROLE; a superuser or BYPASSRLS role skips every policy, so
    that role must be neither. Nor may the login role be one: it owns the connection that could
    read the tables without switching. Empty on other databases (the ORM filter is the policy)."""
    from django.db import connections

    from kb.policy import reader_role

    connection = connections[using]
    if connection.vendor != "postgresql":
        return []
    role = reader_role()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT rolname, rolsuper, rolbypassrls FROM pg_roles"
            " WHERE rolname = %s OR rolname = session_user",
            [role],
        )
        rows = {name: (superuser, bypass) for name, superuser, bypass in cursor.fetchall()}
        cursor.execute("SELECT session_user")
        (login,) = cursor.fetchone()
    problems = []
    for name, what in ((role, "KB_DB_READER_ROLE"), (login, "the app's login role")):
        superuser, bypass = rows.get(name, (False, False))
        if superuser or bypass:
            kind = "a superuser" if superuser else "a BYPASSRLS role"
            problems.append(
                f"{what} {name!r} is {kind}: row-level security does not apply to it, "
                "so the KB rows are not held by the database (docs/deployment.md: Running at scale)"
            )
    return problems
