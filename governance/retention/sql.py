"""The SQL of the sweep written by hand: PostgreSQL statements that replaced ORM queries
a measurement (bench/retention.py, docs/benchmarks.md) showed to be the bottleneck (off
PostgreSQL the callers use the ORM), and the temporary table of deleted rows."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import BooleanField, Field, Model, Q
from django.db.models.expressions import RawSQL

from governance.retention.common import MAX_WINDOW_PAGES, Tier
from governance.retention.plan import RetentionPlan
from memory.models import (
    Conversation,
)

# (id, conversation id, expiry stamp, physical row address), ids as text; the stamp is
# None when the query already applied the only cutoff, the address None off PostgreSQL.
Candidate = tuple[str, str, "datetime | None", "str | None"]


def uuid_array(ids: Iterable[Any]) -> str:
    """An array literal: one parameter that psycopg passes through as it is, where a
    list would be adapted element by element (a third of a batch's Python time)."""
    return "{" + ",".join(map(str, ids)) + "}"


def _column_of(model: type[Model], field_name: str) -> str:
    """The database column of one of the model's own fields (``"pk"`` for its key)."""
    field_obj = model._meta.pk if field_name == "pk" else model._meta.get_field(field_name)
    if not isinstance(field_obj, Field):  # a reverse relation or a generic foreign key
        raise TypeError(f"{model.__name__}.{field_name} has no column of its own.")
    return field_obj.column


def among(model: type[Model], field_name: str, ids: list[Any]) -> Any:
    """A filter for ``field IN ids`` on a UUID column. On PostgreSQL it is one array
    parameter (``= ANY``) instead of thousands of placeholders: psycopg splits the query
    text on the client and PostgreSQL parses every placeholder, which made a 5,000-row
    batch spend more time on its SQL text than on deleting (bench/retention.py)."""
    if connection.vendor != "postgresql":
        return Q(**{f"{field_name}__in": ids})
    quote = connection.ops.quote_name
    column = f"{quote(model._meta.db_table)}.{quote(_column_of(model, field_name))}"
    return RawSQL(f"{column} = ANY(%s::uuid[])", (uuid_array(ids),), output_field=BooleanField())


def scan_heap_order(
    plan: RetentionPlan, tier: Tier, holds: tuple[set[str], set[str]], batch_size: int
) -> Iterator[list[Candidate]]:
    """PostgreSQL: read the table in physical order, a window of pages at a time (TID
    range scans), so each batch deletes rows that sit together on disk. Deleting in id
    order (random UUIDs) dirtied a different page for almost every row and ran at a
    twelfth of the speed of a plain batched DELETE (bench/retention.py). Pages appended
    after the sweep started hold rows written since, which cannot have expired unless
    backdated; the next sweep takes those."""
    quote = connection.ops.quote_name
    model = tier.model
    days_list = plan.possible_days(tier)
    stamp = quote(_column_of(model, tier.expires_by))
    where = ["c.workspace_id = %s", f"m.{stamp} < %s"]
    params: list[Any] = [plan.workspace_id, plan.cutoff(days_list[0])]
    held_conversations, held_users = holds
    if held_conversations:
        where.append("NOT (m.conversation_id = ANY(%s::uuid[]))")
        params.append(uuid_array(held_conversations))
    if held_users:
        where.append("NOT (c.user_id = ANY(%s))")
        params.append(sorted(held_users))
    if not plan.defaults:
        # Only tagged conversations can have anything due: jsonb containment narrows it.
        where.append("(" + " OR ".join(["c.tags @> %s::jsonb"] * len(plan.tag_names)) + ")")
        params.extend(json.dumps([tag]) for tag in sorted(plan.tag_names))
    # Ids as text: hashed, compared and sent back as text, never parsed into UUIDs.
    columns = "m.ctid::text, m.id::text, m.conversation_id::text" + (
        "" if len(days_list) == 1 else f", m.{stamp}"
    )
    query = (
        f"SELECT {columns} FROM {quote(model._meta.db_table)} AS m "
        f"JOIN {quote(Conversation._meta.db_table)} AS c ON c.id = m.conversation_id "
        f"WHERE m.ctid > %s::tid AND m.ctid < %s::tid AND {' AND '.join(where)} "
        "ORDER BY m.ctid LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_relation_size(%s) / current_setting('block_size')::int",
            [model._meta.db_table],
        )
        pages = cursor.fetchone()[0]
    # Pages per window: grows while windows come back sparse, so a large table with
    # little due is crossed in few queries.
    window = max(8, batch_size // 20)
    position, after = 0, "(0,0)"
    while position <= pages:
        end = position + window
        with connection.cursor() as cursor:
            cursor.execute(query, [after, f"({end},0)", *params, batch_size])
            found = cursor.fetchall()
        if len(found) == batch_size:
            after = found[-1][0]  # the window has more: continue inside it
        else:
            position, after = end, f"({end},0)"
            if len(found) < batch_size // 2:
                window = min(window * 2, MAX_WINDOW_PAGES)
        if found:
            yield [(row[1], row[2], row[3] if len(row) > 3 else None, row[0]) for row in found]


class DeletedLog:
    """Every row a sweep deleted, as its hash line, in a temporary table of the
    worker's own database session: memory stays bounded, and the summary can hash the
    lines sorted at the end whatever order the rows were deleted in. Writes to it are
    part of each batch's transaction, so a rolled-back batch leaves no line."""

    PAGE = 10_000

    def __init__(self, sweep_id: int) -> None:
        self.table = connection.ops.quote_name(f"retention_deleted_{sweep_id}")
        self.index = connection.ops.quote_name(f"retention_deleted_{sweep_id}_line")

    def __enter__(self) -> DeletedLog:
        collate = ' COLLATE "C"' if connection.vendor == "postgresql" else ""
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {self.table}")
            cursor.execute(
                f"CREATE TEMPORARY TABLE {self.table} (line varchar(100){collate} NOT NULL)"
            )
        return self

    def __exit__(self, *exc: object) -> None:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {self.table}")

    def add(self, lines: list[str]) -> None:
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute(
                    f"INSERT INTO {self.table} (line) SELECT unnest(%s::text[])",
                    ["{" + ",".join(lines) + "}"],  # lines are [a-z0-9:-]: no quoting needed
                )
            else:
                cursor.executemany(
                    f"INSERT INTO {self.table} (line) VALUES (%s)", [(x,) for x in lines]
                )

    def sha256(self) -> str:
        # Indexed once, at the end: a bulk build costs a fraction of keeping an index
        # up to date through every batch.
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE INDEX {self.index} ON {self.table} (line)")
        digest = hashlib.sha256()
        after = ""
        while True:
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT line FROM {self.table} WHERE line > %s ORDER BY line LIMIT %s",
                    [after, self.PAGE],
                )
                page = [row[0] for row in cursor.fetchall()]
            for line in page:
                digest.update(f"{line}\n".encode())
            if len(page) < self.PAGE:
                return digest.hexdigest()
            after = page[-1]


def lock_conversations(conversation_ids: list[str]) -> list[tuple[str, str, Any]]:
    """Lock the conversations and move their memory_version in one round trip, rows
    locked in id order (the order every locker uses); (id, user_id, tags) of each."""
    table = connection.ops.quote_name(Conversation._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET memory_version = memory_version + 1 WHERE id IN "
            f"(SELECT id FROM {table} WHERE id = ANY(%s::uuid[]) ORDER BY id "
            "FOR NO KEY UPDATE) RETURNING id::text, user_id, tags",
            [uuid_array(conversation_ids)],
        )
        return [
            (pk, user_id, json.loads(tags) if isinstance(tags, str) else tags)
            for pk, user_id, tags in cursor.fetchall()
        ]


def delete_unlocked_by_address(model: type[Model], rows: list[Candidate]) -> list[str]:
    """Delete the rows no other transaction holds, by physical address checked against
    the id (an address is reused only after its row is gone): a TID scan whatever the
    table's size. Matching thousands of ids instead made the planner scan the whole
    table twice per batch. Returns the deleted ids sorted."""
    quote = connection.ops.quote_name
    table, pk = quote(model._meta.db_table), quote(model._meta.pk.column)
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {table} WHERE ctid = ANY(ARRAY(SELECT ctid FROM {table} "
            f"WHERE ctid = ANY(%s::tid[]) AND {pk} = ANY(%s::uuid[]) "
            f"FOR UPDATE SKIP LOCKED)) RETURNING {pk}::text",
            [
                "{" + ",".join(f'"{row[3]}"' for row in rows) + "}",
                uuid_array(row[0] for row in rows),
            ],
        )
        return sorted(found[0] for found in cursor.fetchall())
