"""Inserts on the request path (and the read ledger's batches), written out once per model
instead of composed by the ORM on every call.

``Model.objects.create`` and ``bulk_create`` compile their INSERT on every call, which
costs a one-message write about 0.15 ms each (bench/request_path.py). ``insert`` sends
the same statement, with every value through its field's ``pre_save`` and
``get_db_prep_save`` as ``bulk_create`` does, and gives an auto-numbered primary key
back as ``create`` does (``RETURNING``, PostgreSQL and SQLite 3.35+). Signals are not
sent, as with ``bulk_create``: use it for models nothing listens to.

``insert_rows`` and ``copy_rows`` take rows already prepared for the database, in the
order of ``fields_of``: the INSERT for many rows (optionally keeping a row already there),
and one COPY on PostgreSQL, the fastest way in, with no statement text per row.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import AutoField, BigAutoField, Field, Model, SmallAutoField

AUTO_FIELDS = (AutoField, BigAutoField, SmallAutoField)


def _returned(model: type[Model]) -> Field | None:
    """The primary key the database numbers (None when the model sets its own)."""
    pk = model._meta.pk
    return pk if isinstance(pk, AUTO_FIELDS) else None


@functools.cache
def fields_of(model: type[Model]) -> list[Field]:
    """The fields a row of ``model`` is written with, in order: every concrete field but a
    primary key the database numbers."""
    returned = _returned(model)
    return [f for f in model._meta.concrete_fields if f is not returned]


@functools.cache
def _statement(model: type[Model], vendor: str, ignore_conflicts: bool = False) -> str:
    """The INSERT of one row of ``model`` (``fields_of``), returning a key the database
    numbers, or keeping a row already there with ``ignore_conflicts``."""
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    fields = fields_of(model)
    sql = (
        f"INSERT INTO {quote(model._meta.db_table)} "
        f"({', '.join(quote(f.column) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    if ignore_conflicts:
        sql += " ON CONFLICT DO NOTHING"
    returned = _returned(model)
    if returned is not None and not ignore_conflicts:
        sql += f" RETURNING {quote(returned.column)}"
    return sql


def insert(objs: Sequence[Model]) -> None:
    """Insert ``objs`` (instances of one model) in the current transaction, one statement
    per row when the key is numbered by the database (it is set on each instance),
    ``executemany`` otherwise."""
    if not objs:
        return
    db = connections[DEFAULT_DB_ALIAS]
    model = type(objs[0])
    sql, fields, returned = _statement(model, db.vendor), fields_of(model), _returned(model)
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


def insert_rows(
    model: type[Model], rows: Sequence[Sequence[Any]], *, ignore_conflicts: bool = False
) -> None:
    """Insert prepared ``rows`` of ``model`` (``fields_of``'s order) in one ``executemany``;
    with ``ignore_conflicts``, a row whose unique values are there already is left out."""
    db = connections[DEFAULT_DB_ALIAS]
    with db.cursor() as cursor:
        cursor.executemany(_statement(model, db.vendor, ignore_conflicts), rows)


def copy_rows(model: type[Model], rows: Iterable[Sequence[Any]]) -> None:
    """Prepared ``rows`` of ``model`` (``fields_of``'s order) by one COPY: PostgreSQL only."""
    db = connections[DEFAULT_DB_ALIAS]
    quote = db.ops.quote_name
    copy_sql = "COPY {} ({}) FROM STDIN".format(
        quote(model._meta.db_table), ", ".join(quote(f.column) for f in fields_of(model))
    )
    with db.cursor() as cursor, db.wrap_database_errors, cursor.cursor.copy(copy_sql) as copy:
        for row in rows:
            copy.write_row(row)
