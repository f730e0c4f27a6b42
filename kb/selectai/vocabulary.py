"""The closed vocabulary (products, branches, planners, grades, statuses) the parser may match.

Every filter value the parser emits comes from here (or is a date or number), never from free
prompt text.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from kb.catalogue import CONTRACT_STATUSES, PAYMENT_STATUSES

# Domain constants of the KB demo; used when the source rows do not say otherwise.
DEFAULT_GRADES: tuple[str, ...] = ("VIP", "일반")
DEFAULT_CONTRACT_STATUSES: tuple[str, ...] = CONTRACT_STATUSES
DEFAULT_PAYMENT_STATUSES: tuple[str, ...] = PAYMENT_STATUSES


@dataclass(frozen=True)
class Product:
    code: str
    name: str
    category: str


@dataclass(frozen=True)
class Vocabulary:
    """Immutable lookup tables; mappings are wrapped read-only so a shared instance stays safe."""

    products: Mapping[str, Product] = field(default_factory=dict)  # product_code -> Product
    branches: Mapping[str, str] = field(default_factory=dict)  # branch_id -> branch_name
    planners: Mapping[str, str] = field(default_factory=dict)  # planner_id -> planner name
    regions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # region -> branch ids
    grades: tuple[str, ...] = DEFAULT_GRADES
    contract_statuses: tuple[str, ...] = DEFAULT_CONTRACT_STATUSES
    payment_statuses: tuple[str, ...] = DEFAULT_PAYMENT_STATUSES
    # Derived in __post_init__ from the fields above.
    _categories: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _cache_key: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # object.__setattr__ because the dataclass is frozen; copying detaches us from the caller.
        object.__setattr__(self, "products", MappingProxyType(dict(self.products)))
        object.__setattr__(self, "branches", MappingProxyType(dict(self.branches)))
        object.__setattr__(self, "planners", MappingProxyType(dict(self.planners)))
        regions = {name: tuple(ids) for name, ids in self.regions.items()}
        object.__setattr__(self, "regions", MappingProxyType(regions))
        object.__setattr__(self, "grades", tuple(self.grades))
        object.__setattr__(self, "contract_statuses", tuple(self.contract_statuses))
        object.__setattr__(self, "payment_statuses", tuple(self.payment_statuses))
        # Asked on every prompt; the tables never change, so both are worked out once here.
        categories = tuple(dict.fromkeys(p.category for p in self.products.values() if p.category))
        object.__setattr__(self, "_categories", categories)
        key = (
            tuple(sorted((p.code, p.name, p.category) for p in self.products.values())),
            tuple(sorted(self.branches.items())),
            tuple(sorted(self.planners.items())),
            tuple(sorted(self.regions.items())),
            self.grades,
            self.contract_statuses,
            self.payment_statuses,
        )
        object.__setattr__(self, "_cache_key", key)

    @property
    def categories(self) -> tuple[str, ...]:
        """Product categories in first-seen order."""
        return self._categories

    @property
    def statuses(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.contract_statuses + self.payment_statuses))

    def cache_key(self) -> tuple:
        """A hashable fingerprint, so per-vocabulary lexicons can be cached."""
        return self._cache_key

    def __hash__(self) -> int:
        return hash(self.cache_key())


def _clean(value: object) -> str:
    return "" if value is None else str(value).strip()


def _distinct(values: Iterable[object]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v for v in (_clean(x) for x in values) if v))


def vocabulary_from_rows(
    *,
    products: Iterable[Mapping[str, object]] = (),
    branches: Iterable[Mapping[str, object]] = (),
    stakeholders: Iterable[Mapping[str, object]] = (),
    grades: Iterable[str] | None = None,
    contract_statuses: Iterable[str] | None = None,
    payment_statuses: Iterable[str] | None = None,
) -> Vocabulary:
    """Build a Vocabulary from row dicts shaped like the kb_demo CSV headers (extra keys ignored).

    Rows missing their key column are skipped rather than failing: the vocabulary only narrows
    what the parser can recognise, it never grants access to anything.
    """
    product_map: dict[str, Product] = {}
    for row in products:
        code, name = _clean(row.get("product_code")), _clean(row.get("product_name"))
        if code and name:
            product_map[code] = Product(code=code, name=name, category=_clean(row.get("category")))

    branches = list(branches)
    branch_map = {
        _clean(row.get("branch_id")): _clean(row.get("branch_name"))
        for row in branches
        if _clean(row.get("branch_id")) and _clean(row.get("branch_name"))
    }
    region_map: dict[str, list[str]] = {}
    for row in branches:
        region, branch_id = _clean(row.get("region")), _clean(row.get("branch_id"))
        if region and branch_id in branch_map:
            region_map.setdefault(region, []).append(branch_id)

    # Only planners own customers; suspended planners are kept so their names still parse
    # (the data layer decides what anyone may see).
    planner_map = {
        _clean(row.get("stakeholder_id")): _clean(row.get("name"))
        for row in stakeholders
        if _clean(row.get("role")) == "planner"
        and _clean(row.get("stakeholder_id"))
        and _clean(row.get("name"))
    }

    return Vocabulary(
        products=product_map,
        branches=branch_map,
        planners=planner_map,
        regions={region: tuple(ids) for region, ids in region_map.items()},
        grades=_distinct(grades) if grades is not None else DEFAULT_GRADES,
        contract_statuses=(
            _distinct(contract_statuses)
            if contract_statuses is not None
            else DEFAULT_CONTRACT_STATUSES
        ),
        payment_statuses=(
            _distinct(payment_statuses)
            if payment_statuses is not None
            else DEFAULT_PAYMENT_STATUSES
        ),
    )


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        return list(csv.DictReader(handle))


def _column_values(path: Path, column: str) -> tuple[str, ...] | None:
    """Distinct values of one column, or None when the file is absent (so defaults apply)."""
    if not path.is_file():
        return None
    values = _distinct(row.get(column) for row in _read_csv(path))
    return values or None


def vocabulary_from_csv(folder: str | Path) -> Vocabulary:
    """Read a kb_demo CSV folder: products, branches, stakeholders (+ grades, statuses)."""
    folder = Path(folder)

    def rows(name: str) -> list[dict[str, str]]:
        path = folder / name
        return _read_csv(path) if path.is_file() else []

    return vocabulary_from_rows(
        products=rows("products.csv"),
        branches=rows("branches.csv"),
        stakeholders=rows("stakeholders.csv"),
        grades=_column_values(folder / "customers.csv", "grade"),
        contract_statuses=_column_values(folder / "contracts.csv", "status"),
        payment_statuses=_column_values(folder / "premium_payments.csv", "status"),
    )
