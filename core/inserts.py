"""Inserts on the request path, written out once per model instead of composed by the ORM
on every call.

``Model.objects.create`` and ``bulk_create`` compile their INSERT on every call, which
costs a one-message write about 0.15 ms each (bench/request_path.py). ``insert`` sends
the same statement, with every value through its field's ``pre_save`` and
``get_db_prep_save`` as ``bulk_create`` does, and gives an auto-numbered primary key
back as ``create`` does (``RETURNING``, PostgreSQL and SQLite 3.35+). Signals are not
sent, as with ``bulk_create``: use it for models nothing listens to.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import AutoField, BigAutoField, Field, Model, SmallAutoField

AUTO_FIELDS = (AutoField, BigAutoField, SmallAutoField)


@functools.cache
def _statement(model: type[Model], vendor: str) -> tuple[str, list[Field], Field | None]:
    """The INSERT of one row of ``model``, its fields in order, and the auto-numbered
    primary key it returns (None when the model sets its own key)."""
    db = connections[DEFAULT_DB_ALIAS]
    quote = db.ops.quote_name
    pk = model._meta.pk
    returned = pk if isinstance(pk, AUTO_FIELDS) else None
    fields = [f for f in model._meta.concrete_fields if f is not returned]
    sql = (
        f"INSERT INTO {quote(model._meta.db_table)} "
        f"({', '.join(quote(f.column) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    if returned is not None:
        sql += f" RETURNING {quote(returned.column)}"
    return sql, fields, returned


def insert(objs: Sequence[Model]) -> None:
    """Insert ``objs`` (instances of one model) in the current transaction, one statement
    per row when the key is numbered by the database (it is set on each instance),
    ``executemany`` otherwise."""
    if not objs:
        return
    db = connections[DEFAULT_DB_ALIAS]
    sql, fields, returned = _statement(type(objs[0]), db.vendor)
    rows = [[f.get_db_prep_save(f.pre_save(obj, True), db) for f in fields] for obj in objs]
    with db.cursor() as cursor:
        if returned is None:
            cursor.executemany(sql, rows)
        else:
            for obj, row in zip(objs, rows, strict=True):
                cursor.execute(sql, row)
                setattr(obj, returned.attname, cursor.fetchone()[0])
    for obj in objs:
        obj._state.adding = False
        obj._state.db = db.alias
