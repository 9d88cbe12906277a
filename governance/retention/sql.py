"""The SQL of the sweep written by hand: PostgreSQL statements that replaced ORM queries
a measurement (bench/retention.py; docs/benchmarks/2026-11-30.md, "Retention sweep
against one bare DELETE") showed to be the bottleneck (off PostgreSQL the callers use
the ORM), and the temporary table of deleted rows."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import BooleanField, Field, Model, Q
from django.db.models.expressions import RawSQL

from governance.models import LegalHold
from governance.retention.common import MAX_WINDOW_PAGES, TIERS, Tier
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
    pages = _table_pages(model)
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


def count_due_total(plan: RetentionPlan, holds: tuple[set[str], set[str]]) -> int:
    """What ``count_due(plan, holds).total`` counts, grouped by the conversations' tags
    (a conversation's rule depends on its tags only) instead of by conversation: the
    sweep's up-front total for its progress, in a third less time."""
    quote = connection.ops.quote_name
    total = 0
    held_conversations, held_users = holds
    for tier in TIERS:
        days_list = plan.possible_days(tier)
        if not days_list:
            continue
        model = tier.model
        stamp = quote(_column_of(model, tier.expires_by))
        counts = ", ".join(f"count(*) FILTER (WHERE m.{stamp} < %s)" for _ in days_list)
        where = ["c.workspace_id = %s", f"m.{stamp} < %s"]
        params: list[Any] = [plan.cutoff(days) for days in days_list]
        params += [plan.workspace_id, plan.cutoff(days_list[0])]
        if held_conversations:
            where.append("NOT (m.conversation_id = ANY(%s::uuid[]))")
            params.append(uuid_array(held_conversations))
        if held_users:
            where.append("NOT (c.user_id = ANY(%s))")
            params.append(sorted(held_users))
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT c.tags, {counts} FROM {quote(model._meta.db_table)} AS m "
                f"JOIN {quote(Conversation._meta.db_table)} AS c ON c.id = m.conversation_id "
                f"WHERE {' AND '.join(where)} GROUP BY c.tags",
                params,
            )
            for tags, *by_days in cursor.fetchall():
                rule = plan.rules_for(_tags(tags))[tier.kind]
                if rule is not None:
                    total += by_days[days_list.index(rule.days)]
    return total


class DeletedLog:
    """Every row a sweep deleted, as its hash line and its batch number, in a temporary
    table of the worker's own database session: memory stays bounded, and the summary
    can hash the lines sorted at the end whatever order the rows were deleted in. Writes
    to it are part of each batch's transaction, so a rolled-back batch leaves no line."""

    PAGE = 50_000
    # Up to this many lines (about 40 MB of them in the worker) the summary sorts in
    # Python; beyond it PostgreSQL sorts and the worker reads a page at a time.
    SORT_IN_PYTHON = 400_000

    def __init__(self, sweep_id: int) -> None:
        self.count = 0  # lines added, counting those of batches later rolled back
        self.table = connection.ops.quote_name(f"retention_deleted_{sweep_id}")
        self.index = connection.ops.quote_name(f"retention_deleted_{sweep_id}_line")

    def __enter__(self) -> DeletedLog:
        # "C": lines sort byte by byte, as Python sorts them (they are ASCII).
        collate = ' COLLATE "C"' if connection.vendor == "postgresql" else ""
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {self.table}")
            cursor.execute(
                f"CREATE TEMPORARY TABLE {self.table} "
                f"(batch integer NOT NULL, line varchar(100){collate} NOT NULL)"
            )
        return self

    def __exit__(self, *exc: object) -> None:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {self.table}")

    def add(self, batch: int, lines: list[str]) -> None:
        self.count += len(lines)
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute(
                    f"INSERT INTO {self.table} (batch, line) SELECT %s, unnest(%s::text[])",
                    [batch, "{" + ",".join(lines) + "}"],  # lines are [a-z0-9:-]: no quoting
                )
            else:
                cursor.executemany(
                    f"INSERT INTO {self.table} (batch, line) VALUES (%s, %s)",
                    [(batch, x) for x in lines],
                )

    def sha256(self) -> str:
        """SHA-256 over every line and its newline, the lines sorted. Call inside a
        transaction (PostgreSQL streams a long log through a cursor of that
        transaction)."""
        digest = hashlib.sha256()
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql" and self.count <= self.SORT_IN_PYTHON:
                # Fetched unsorted and sorted here: half the time of PostgreSQL's sort
                # of the same lines (bench/retention.py), in memory the limit bounds.
                cursor.execute(f"SELECT line FROM {self.table}")
                lines = sorted(row[0] for row in cursor.fetchall())
                if lines:
                    digest.update(("\n".join(lines) + "\n").encode())
                return digest.hexdigest()
            if connection.vendor == "postgresql":
                # One sort in the database, read a page at a time through a cursor.
                cursor.execute(
                    "DECLARE retention_lines NO SCROLL CURSOR FOR "
                    f"SELECT line FROM {self.table} ORDER BY line"
                )
                while page := [row[0] for row in self._fetch(cursor)]:
                    digest.update(("\n".join(page) + "\n").encode())
                cursor.execute("CLOSE retention_lines")
                return digest.hexdigest()
            cursor.execute(f"CREATE INDEX {self.index} ON {self.table} (line)")
            after = ""
            while True:
                cursor.execute(
                    f"SELECT line FROM {self.table} WHERE line > %s ORDER BY line LIMIT %s",
                    [after, self.PAGE],
                )
                page = [row[0] for row in cursor.fetchall()]
                if page:
                    digest.update(("\n".join(page) + "\n").encode())
                if len(page) < self.PAGE:
                    return digest.hexdigest()
                after = page[-1]

    def _fetch(self, cursor: Any) -> list[Any]:
        cursor.execute(f"FETCH {self.PAGE} FROM retention_lines")
        rows: list[Any] = cursor.fetchall()
        return rows


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
        return [(pk, user_id, _tags(tags)) for pk, user_id, tags in cursor.fetchall()]


# --- the set-based batch (PostgreSQL, tiers nothing cascades from) ------------------------------


@dataclass
class Window:
    """A range of physical row addresses, ``after`` < ctid < ``end``, one batch deletes
    in. The batch reports back how many candidates it found there and up to which
    address it took them (``last``: ``end`` when it took the whole window, else the
    address of the last of ``batch_size`` taken), so the next window continues there."""

    after: str
    end: str
    batch_size: int
    found: int = 0
    last: str = ""

    @property
    def whole(self) -> bool:
        return self.last == self.end


def _page(tid: str) -> int:
    return int(tid.strip("()").split(",")[0])


def _table_pages(model: type[Model]) -> int:
    """How many pages the model's table has now."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_relation_size(%s) / current_setting('block_size')::int",
            [model._meta.db_table],
        )
        return int(cursor.fetchone()[0])


def heap_windows(model: type[Model], batch_size: int) -> Iterator[Window]:
    """The windows of the table in physical order: the windows of ``scan_heap_order``
    without reading the rows, which the batch selects, locks and deletes itself. Each
    window is sized from the density of candidates in the one before, to hold about
    nine tenths of a batch: a window the batch takes whole needs no sort."""
    pages = _table_pages(model)
    pages_per_window = max(8, batch_size // 50)
    position, after = 0, "(0,0)"
    while position <= pages:
        end = position + pages_per_window
        window = Window(after=after, end=f"({end},0)", batch_size=batch_size)
        yield window
        if window.whole:
            covered = end - _page(after)
            position, after = end, window.end
        else:
            covered = _page(window.last) - _page(after) + 1
            after = window.last  # the window has more: continue inside it
        if window.found:
            wanted = int(0.9 * batch_size * max(covered, 1) / window.found)
            pages_per_window = max(8, min(wanted, pages_per_window * 2, MAX_WINDOW_PAGES))
        else:
            pages_per_window = min(pages_per_window * 2, MAX_WINDOW_PAGES)
        position = max(position, _page(after))


def _not_held(conversation: str) -> str:
    """SQL true while no active legal hold covers ``conversation`` (an alias of the
    conversation table): two anti-joins against the few active holds."""
    holds = connection.ops.quote_name(LegalHold._meta.db_table)
    return (
        f"NOT EXISTS (SELECT 1 FROM {holds} AS h WHERE h.released_at IS NULL "
        f"AND h.conversation_id = {conversation}.id) "
        f"AND NOT EXISTS (SELECT 1 FROM {holds} AS h WHERE h.released_at IS NULL "
        f"AND h.workspace_id = {conversation}.workspace_id AND h.end_user_id <> '' "
        f"AND h.end_user_id = {conversation}.user_id)"
    )


def lock_window(plan: RetentionPlan, tier: Tier, window: Window) -> list[tuple[str, str, Any]]:
    """One statement: find the window's candidates (older than the latest cutoff any
    policy gives this tier, in conversations of the workspace no hold covers now), lock
    their conversations in id order and move their memory_version (as
    ``lock_conversations``); records the candidates' count and how far they reach on
    ``window``, returns (id, user_id, tags) of the locked conversations.

    The window is taken whole when it holds at most ``batch_size`` candidates, which
    needs no sort. When it holds more, that attempt is rolled back (its savepoint
    releases the locks it took) and the first ``batch_size`` in address order are taken
    instead."""
    quote = connection.ops.quote_name
    model = tier.model
    table = quote(model._meta.db_table)
    conversations = quote(Conversation._meta.db_table)
    stamp = quote(_column_of(model, tier.expires_by))
    where = ["c.workspace_id = %s", f"m.{stamp} < %s", _not_held("c")]
    params: list[Any] = [plan.workspace_id, plan.cutoff(plan.possible_days(tier)[0])]
    if not plan.defaults:
        # Only tagged conversations can have anything due: jsonb containment narrows it.
        where.append("(" + " OR ".join(["c.tags @> %s::jsonb"] * len(plan.tag_names)) + ")")
        params.extend(json.dumps([tag]) for tag in sorted(plan.tag_names))

    def statement(order: str) -> str:
        return (
            f"WITH candidates AS MATERIALIZED (SELECT m.ctid AS tid, m.conversation_id "
            f"FROM {table} AS m JOIN {conversations} AS c ON c.id = m.conversation_id "
            f"WHERE m.ctid > %s::tid AND m.ctid < %s::tid AND {' AND '.join(where)} "
            f"{order} LIMIT %s), "
            f"locked AS (UPDATE {conversations} SET memory_version = memory_version + 1 "
            f"WHERE id IN (SELECT id FROM {conversations} WHERE id IN "
            "(SELECT conversation_id FROM candidates) ORDER BY id FOR NO KEY UPDATE) "
            "RETURNING id::text, user_id, tags) "
            "SELECT s.found, s.last::text, l.id, l.user_id, l.tags FROM "
            "(SELECT count(*) AS found, max(tid) AS last FROM candidates) AS s "
            "LEFT JOIN locked AS l ON true"
        )

    with connection.cursor() as cursor:
        cursor.execute("SAVEPOINT retention_window")
        cursor.execute(statement(""), [window.after, window.end, *params, window.batch_size + 1])
        rows = cursor.fetchall()
        if rows[0][0] <= window.batch_size:
            cursor.execute("RELEASE SAVEPOINT retention_window")
            window.last = window.end
        else:
            cursor.execute("ROLLBACK TO SAVEPOINT retention_window")
            cursor.execute("RELEASE SAVEPOINT retention_window")
            cursor.execute(
                statement("ORDER BY m.ctid"),
                [window.after, window.end, *params, window.batch_size],
            )
            rows = cursor.fetchall()
            window.last = rows[0][1] or window.end  # none: all gone since
    window.found = rows[0][0]
    return [(pk, user_id, _tags(tags)) for _, _, pk, user_id, tags in rows if pk is not None]


_parsed_tags: dict[str, Any] = {}


def _tags(tags: Any) -> Any:
    """A conversation's tags as read from jsonb: text (parsed once per distinct value,
    most conversations share a few tag lists) or already parsed."""
    if not isinstance(tags, str):
        return tags
    parsed = _parsed_tags.get(tags)
    if parsed is None:
        if len(_parsed_tags) > 10_000:
            _parsed_tags.clear()
        parsed = _parsed_tags[tags] = json.loads(tags)
    return parsed


@dataclass(frozen=True)
class WindowDeleted:
    by_conversation: dict[str, int]  # rows deleted per conversation id
    ids_sha256: str  # over the sorted lines '<kind>:<id>\n', as HASH_OF says
    ids: list[str]  # the deleted ids, only when asked for


def delete_window(
    tier: Tier,
    window: Window,
    cutoffs: dict[str, datetime],
    log: DeletedLog,
    batch: int,
    *,
    with_ids: bool,
) -> WindowDeleted:
    """One statement, after ``lock_window`` locked the conversations: delete the rows of
    the window's candidate range that are due under their conversation's cutoff
    (``cutoffs``), in conversations no legal hold covers (read now, under the lock, so
    a hold placed meanwhile is seen: placing one waits for the same lock), skipping rows
    another transaction holds (left to the next sweep, never waited for); log their lines, and
    return their count per conversation and the hash of their sorted lines. The ids come
    back only ``with_ids``."""
    quote = connection.ops.quote_name
    model = tier.model
    table, pk = quote(model._meta.db_table), quote(model._meta.pk.column)
    conversations = quote(Conversation._meta.db_table)
    stamp = quote(_column_of(model, tier.expires_by))
    conversation_ids = sorted(cutoffs)
    prefix = f"{tier.line_kind}:"
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH rules AS (SELECT * FROM unnest(%s::uuid[], %s::timestamptz[]) "
            "AS r(conversation_id, cutoff)), "
            "allowed AS (SELECT r.conversation_id, r.cutoff FROM rules AS r "
            f"JOIN {conversations} AS c ON c.id = r.conversation_id WHERE {_not_held('c')}), "
            f"doomed AS (SELECT m.ctid AS tid FROM {table} AS m "
            "JOIN allowed AS a ON a.conversation_id = m.conversation_id "
            f"WHERE m.ctid > %s::tid AND m.ctid {'<' if window.whole else '<='} %s::tid "
            f"AND m.{stamp} < a.cutoff "
            "FOR UPDATE OF m SKIP LOCKED), "
            f"deleted AS (DELETE FROM {table} WHERE ctid = ANY(ARRAY(SELECT tid FROM doomed)) "
            f"RETURNING {pk} AS id, conversation_id), "
            f"logged AS (INSERT INTO {log.table} (batch, line) "
            "SELECT %s, %s || id::text FROM deleted), "
            # uuid order is the order of the ids' text (lowercase hex): the sorted lines.
            "digest AS (SELECT encode(sha256(convert_to(string_agg("
            "%s || id::text || E'\\n', '' ORDER BY id), 'UTF8')), 'hex') AS sha256, "
            "CASE WHEN %s THEN array_agg(id::text) END AS ids FROM deleted) "
            "SELECT g.conversation_id::text, g.n, digest.sha256, digest.ids FROM "
            "(SELECT conversation_id, count(*) AS n FROM deleted GROUP BY conversation_id) AS g "
            "CROSS JOIN digest",
            [
                uuid_array(conversation_ids),
                "{" + ",".join(f'"{cutoffs[c].isoformat()}"' for c in conversation_ids) + "}",
                window.after,
                window.last,
                batch,
                prefix,
                prefix,
                with_ids,
            ],
        )
        rows = cursor.fetchall()
    if not rows:
        return WindowDeleted({}, "", [])
    log.count += sum(row[1] for row in rows)
    return WindowDeleted(
        by_conversation={row[0]: row[1] for row in rows},
        ids_sha256=rows[0][2],
        ids=list(rows[0][3] or []),
    )
