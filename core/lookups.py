"""A lookup by one key, written with the ORM, compiled to SQL once per database connection.

Every /mcp request resolves its bearer and its stakeholder. Building and compiling those two
querysets cost more CPU than everything else in the gate (docs/decisions/0005), while their SQL
never changes: only the key does. So the queryset is written once, as usual, and compiled once per
connection; each call runs that SQL with the new key and converts the values exactly as the ORM
would (aware datetimes, decoded JSON). No result is cached: every call reads the database.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from django.db import connections, router
from django.db.models import Model, QuerySet

# Stands in for the key while compiling; never a value anyone looks up.
_PLACEHOLDER = "\x00compiled-lookup-key\x00"


@dataclass(frozen=True)
class _Compiled:
    sql: str
    params: tuple
    key_index: int
    converters: dict  # column index -> (converter functions, expression), as the ORM's


class CompiledLookup:
    """`lookup.one(key)`: the row `build(key)` selects (a values_list queryset), or None.

    `build` must filter on the key exactly once and select at most one row (a unique key). The
    key is a string, bound as it is (the ORM prepares a string as itself).
    """

    def __init__(self, model: type[Model], build: Callable[[str], QuerySet]):
        self._model = model
        self._build = build
        self._per_connection: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def one(self, key: str) -> tuple | None:
        if not isinstance(key, str):
            raise TypeError("a compiled lookup's key is a string")
        using = router.db_for_read(self._model)
        connection = connections[using]
        compiled = self._per_connection.get(connection)
        if compiled is None:
            compiled = self._compile(connection, using)
        params = list(compiled.params)
        params[compiled.key_index] = key
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            row = cursor.fetchone()
        if row is None or not compiled.converters:
            return row
        values = list(row)
        for index, (functions, expression) in compiled.converters.items():
            value = values[index]
            for convert in functions:
                value = convert(value, expression, connection)
            values[index] = value
        return tuple(values)

    def _compile(self, connection, using: str) -> _Compiled:
        compiler = self._build(_PLACEHOLDER).query.get_compiler(using=using)
        sql, params = compiler.as_sql()
        positions = [i for i, value in enumerate(params) if value == _PLACEHOLDER]
        if len(positions) != 1:
            raise ValueError("a compiled lookup filters on its key exactly once")
        columns = [selected[0] for selected in compiler.select[: compiler.col_count]]
        compiled = _Compiled(sql, tuple(params), positions[0], compiler.get_converters(columns))
        with self._lock:
            self._per_connection[connection] = compiled
        return compiled
