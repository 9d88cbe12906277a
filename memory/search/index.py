"""The recall index: one entry per searchable text (a message, an observation, a
reflection, a pin), kept by the database itself.

The database writes, rewrites and deletes the entries (triggers, and on PostgreSQL a
generated column), so the index changes in the transaction that changes its source,
whichever door that is: the API, the dashboard, ``/admin/``, a worker, retention's raw
SQL on PostgreSQL, erasure, or the cascade of a conversation's delete. Nothing in Python
has to remember it, and an entry can not outlive its source (a test searches for erased
words on both databases).

The ranked part is per database:

- SQLite (the embedded default): a row of ``memory_searchentry`` per source (a copy of
  its text: what FTS5's 'delete' needs and what a hit shows) and an FTS5 table over it
  (external content: FTS5 keeps the index, not a third copy of the text), tokenised
  with Porter stemming and accents removed, ranked by ``bm25()``. The conversation's id
  is a column of the FTS5 table.
- PostgreSQL: a stored ``tsvector`` (English stemming, accents and the punctuation
  inside ids folded by ``_fold_sql``, and the conversation's lexeme) with a GIN index,
  ranked by ``ts_rank_cd``. A message's is a column of ``memory_message`` itself; the
  notes and pins are copied to ``memory_searchentry`` as on SQLite. ``ranked`` reads
  the two as one.

A message's entry also holds its speaker's name, so that "what did Maria say about the
refund" can find Maria's turns. What each part costs a write: docs/benchmarks.md,
"Recall".
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from django.core.exceptions import ImproperlyConfigured
from django.db import connection, models
from django.utils import timezone


class SearchEntry(models.Model):
    """One searchable text: what its source holds, as stored (a derived tier is
    pseudonymised where the policy says). Written only by the database's triggers."""

    class Kind(models.TextChoices):
        MESSAGE = "message", "message"
        OBSERVATION = "observation", "observation"
        REFLECTION = "reflection", "reflection"
        PIN = "pin", "pin"

    id = models.BigAutoField(primary_key=True)
    kind = models.CharField(max_length=12, choices=Kind.choices)
    source_id = models.UUIDField()
    conversation_id = models.UUIDField()
    # A message's or a pin's seq; a note's last source seq.
    seq = models.PositiveIntegerField(null=True)
    role = models.CharField(max_length=10, blank=True, default="")
    speaker = models.CharField(max_length=64, blank=True, default="")
    status = models.CharField(max_length=10, blank=True, default="")
    at = models.DateTimeField(default=timezone.now)
    text = models.TextField()

    class Meta:
        app_label = "memory"
        # A note's or a pin's row is found by its source (the triggers' updates and
        # deletes). A message's is not keyed so: its id is random, and a b-tree over
        # random keys took SQLite's ingest a tenth of its rate; a message's row is
        # found by its conversation and seq instead (SQLITE_CONVERSATION_INDEX), and
        # PostgreSQL keeps no message rows here at all.
        constraints = [
            models.UniqueConstraint(
                fields=["source_id", "kind"],
                condition=~models.Q(kind="message"),
                name="searchentry_source",
            )
        ]
        # The conversation's index is per database: SQLite's is a b-tree (SQLITE_CREATE),
        # PostgreSQL's a lexeme of the document (DOCUMENT_SQL).

    def __str__(self) -> str:
        return f"{self.kind} {self.source_id}"


# How PostgreSQL's document reads a text, so that it splits words where SQLite's FTS5
# and ``query.question_of`` do: lower case, accents folded (``ACCENTED`` to ``PLAIN``,
# the table ``query.fold`` uses too), and the punctuation inside ids, addresses and
# hyphenated words made a space: PostgreSQL's own parser reads "A-1234" as "a" and the
# number "-1234", "a.b@c.com" as one e-mail token, where the other side reads "a" and
# "1234", or "a", "b", "c" and "com". Both functions are immutable, so a generated
# column may use them, and need no extension (``unaccent`` needs CREATE EXTENSION and a
# wrapper to be immutable). A text of ASCII alone (nearly every one) only has its
# punctuation replaced, by one ``regexp_replace``: ``translate`` with the accents' table
# costs 34 us a message, more than ``to_tsvector`` itself, and made ingest a third
# slower (docs/benchmarks.md, "Recall"); to_tsvector lower-cases on its own.
ACCENTED = "àáâãäåāăąçćčďđèéêëēėęěğìíîïīįıłñńňòóôõöøōőŕřśšşťùúûüūůűųýÿźżžæœß"
PLAIN = "aaaaaaaaacccddeeeeeeeegiiiiiiilnnnoooooooorrssstuuuuuuuuyyzzzaos"
assert len(ACCENTED) == len(PLAIN), "translate() maps one character to one"
_SPLITS = "-_/.@:+'’"


def _fold_sql(expression: str) -> str:
    splits = _SPLITS.replace("'", "''")
    return (
        f"CASE WHEN octet_length({expression}) = char_length({expression}) "
        f"THEN regexp_replace({expression}, '[{splits}]', ' ', 'g') "
        f"ELSE translate(lower({expression}), '{ACCENTED}{splits}', "
        f"'{PLAIN}{' ' * len(_SPLITS)}') END"
    )


# A conversation's id is a lexeme of its rows' documents (PostgreSQL), as it is a column
# of the FTS5 table (SQLite): a search in a conversation, or an end user's few, is then an
# AND inside the GIN index (which skips through a frequent word's rows to the rare
# conversation's) instead of a b-tree on the conversation beside it, one index fewer to
# write per row. The ``#`` keeps it apart from every word: no document word holds one.
SCOPE_LEXEME_PREFIX = "#"


def scope_lexeme(conversation_id: uuid.UUID) -> str:
    return SCOPE_LEXEME_PREFIX + conversation_id.hex


def _document_sql(speaker: str, text: str) -> str:
    return (
        "to_tsvector('english'::regconfig, "
        + _fold_sql(f"coalesce({speaker}, '') || ' ' || coalesce({text}, '')")
        + ") || array_to_tsvector(ARRAY['"
        + SCOPE_LEXEME_PREFIX
        + "' || replace(conversation_id::text, '-', '')])"
    )


DOCUMENT_SQL = _document_sql("speaker", "text")
MESSAGE_DOCUMENT_SQL = _document_sql("name", "content")

# What each source table puts in its row: (kind: table, columns as SQL over the source
# row ``{r}``). A note's date is when it was observed; a message's and a pin's when written.
_OF_PINNED = "coalesce((SELECT m.{column} FROM memory_message m WHERE m.id = {{r}}.message_id), '')"
_SOURCES = {
    "message": (
        "memory_message",
        {
            "seq": "{r}.seq",
            "role": "{r}.role",
            "speaker": "{r}.name",
            "status": "''",
            "at": "{r}.created_at",
            "text": "{r}.content",
        },
    ),
    "observation": (
        "memory_observation",
        {
            "seq": "{r}.window_end_seq",
            "role": "''",
            "speaker": "''",
            "status": "{r}.status",
            "at": "{r}.observed_at",
            "text": "{r}.text",
        },
    ),
    "reflection": (
        "memory_reflection",
        {
            "seq": "NULL",
            "role": "''",
            "speaker": "''",
            "status": "{r}.status",
            "at": "{r}.observed_at",
            "text": "{r}.text",
        },
    ),
    "pin": (
        "memory_pin",
        {
            "seq": "(SELECT m.seq FROM memory_message m WHERE m.id = {r}.message_id)",
            "role": _OF_PINNED.format(column="role"),
            "speaker": _OF_PINNED.format(column="name"),
            "status": "''",
            "at": "{r}.created_at",
            "text": "{r}.text",
        },
    ),
}
_COLUMNS = ("seq", "role", "speaker", "status", "at", "text")
_INSERT_COLUMNS = "kind, source_id, conversation_id, " + ", ".join(_COLUMNS)


def _values(kind: str, row: str) -> list[str]:
    """The row's column values as SQL, reading the source row named ``row``."""
    _, columns = _SOURCES[kind]
    return [columns[c].replace("{r}", row) for c in _COLUMNS]


def _select(kind: str, rows: str) -> str:
    return (
        f"SELECT '{kind}', n.id, n.conversation_id, {', '.join(_values(kind, 'n'))} FROM {rows} n"
    )


def _changed(kind: str, row: str, entry: str) -> str:
    # Only a source whose indexed columns changed rewrites its row: an observation is
    # updated often (its reflection, its grounding) and its text rarely.
    return " OR ".join(
        f"{entry}.{c} IS DISTINCT FROM {v}"
        for c, v in zip(_COLUMNS, _values(kind, row), strict=True)
    )


def _assignments(kind: str, row: str) -> str:
    return ", ".join(f"{c} = {v}" for c, v in zip(_COLUMNS, _values(kind, row), strict=True))


# ---- SQLite: row triggers on the sources, and the FTS5 table's own three triggers.

SQLITE_FTS = "memory_search_fts"


# A note's or a pin's row, found through the partial unique index ``searchentry_source``:
# SQLite uses a partial index only when the query repeats its condition word for word
# (``NOT ("kind" = 'message')``, as Django writes it), so the lookup does.
_NOT_A_MESSAGE = "NOT (kind = 'message')"


def _sqlite_entry_of(kind: str, row: str) -> str:
    """The WHERE that finds the index row of the source row ``row`` (OLD or NEW)."""
    if kind == "message":
        return (
            f"conversation_id = {row}.conversation_id AND kind = 'message' "
            f"AND seq = {row}.seq AND source_id = {row}.id"
        )
    return f"kind = '{kind}' AND {_NOT_A_MESSAGE} AND source_id = {row}.id"


def _sqlite_source_triggers(kind: str) -> list[str]:
    table, _ = _SOURCES[kind]
    changed = _changed(kind, "NEW", "memory_searchentry").replace("IS DISTINCT FROM", "IS NOT")
    return [
        f"CREATE TRIGGER {table}_search_ai AFTER INSERT ON {table} BEGIN "
        f"INSERT INTO memory_searchentry ({_INSERT_COLUMNS}) "
        f"VALUES ('{kind}', NEW.id, NEW.conversation_id, {', '.join(_values(kind, 'NEW'))}); END",
        f"CREATE TRIGGER {table}_search_au AFTER UPDATE ON {table} BEGIN "
        f"UPDATE memory_searchentry SET {_assignments(kind, 'NEW')} "
        f"WHERE {_sqlite_entry_of(kind, 'OLD')} AND ({changed}); END",
        f"CREATE TRIGGER {table}_search_ad AFTER DELETE ON {table} BEGIN "
        f"DELETE FROM memory_searchentry WHERE {_sqlite_entry_of(kind, 'OLD')}; END",
    ]


# Letters FTS5's ``remove_diacritics`` leaves as they are (they do not decompose): the
# triggers fold them as ``PLAIN`` does before the text reaches the FTS index, so that
# "soren" finds "Søren" on SQLite as on PostgreSQL. The 'delete' of a row must give the
# values it was indexed with, so it folds the old values the same way. (So the FTS
# index is not what FTS5's 'rebuild' would make of the content table: never rebuild it
# that way; re-insert the rows of memory_searchentry instead.)
_UNFOLDED = {"đ": "d", "Đ": "d", "ı": "i", "ł": "l", "Ł": "l", "ø": "o", "Ø": "o",
             "æ": "a", "Æ": "a", "œ": "o", "Œ": "o", "ß": "s"}  # fmt: skip


def _sqlite_fold(expression: str) -> str:
    # A text of ASCII alone (as many bytes as characters: nearly every one) has none of
    # those letters and skips the twelve replace()s, which cost a tenth of what FTS5
    # spends on a row. Either way the result is the same, so rows indexed before by the
    # chain alone are deleted with the values they were indexed with.
    folded = expression
    for letter, plain in _UNFOLDED.items():
        folded = f"replace({folded}, '{letter}', '{plain}')"
    return (
        f"CASE WHEN length(CAST({expression} AS BLOB)) = length({expression}) "
        f"THEN {expression} ELSE {folded} END"
    )


def _fts_values(row: str) -> str:
    return (
        f"{row}.id, {_sqlite_fold(f'{row}.text')}, {_sqlite_fold(f'{row}.speaker')}, "
        f"{row}.conversation_id"
    )


# The FTS table's columns: the words, the speaker's name, and the conversation's id as
# one token, so that a search in a conversation (or an end user's few) is an AND with
# that token inside FTS5, not a ranking of every row of the index that holds a word.
_FTS_COLUMNS = "rowid, text, speaker, conversation_id"


# The substring match (a question of stop words only), a hit's row by conversation, and
# a message's row by its conversation and seq (the triggers' updates and deletes).
SQLITE_CONVERSATION_INDEX = (
    "CREATE INDEX searchentry_conversation ON memory_searchentry (conversation_id, kind, seq)"
)

SQLITE_CREATE = [
    f"CREATE VIRTUAL TABLE {SQLITE_FTS} USING fts5(text, speaker, conversation_id, "
    "content='memory_searchentry', content_rowid='id', "
    "tokenize='porter unicode61 remove_diacritics 2')",
    f"CREATE TRIGGER memory_searchentry_ai AFTER INSERT ON memory_searchentry BEGIN "
    f"INSERT INTO {SQLITE_FTS} ({_FTS_COLUMNS}) VALUES ({_fts_values('NEW')}); END",
    f"CREATE TRIGGER memory_searchentry_ad AFTER DELETE ON memory_searchentry BEGIN "
    f"INSERT INTO {SQLITE_FTS} ({SQLITE_FTS}, {_FTS_COLUMNS}) "
    f"VALUES ('delete', {_fts_values('OLD')}); END",
    f"CREATE TRIGGER memory_searchentry_au AFTER UPDATE OF text, speaker ON memory_searchentry "
    f"WHEN OLD.text IS NOT NEW.text OR OLD.speaker IS NOT NEW.speaker "
    f"BEGIN INSERT INTO {SQLITE_FTS} ({SQLITE_FTS}, {_FTS_COLUMNS}) "
    f"VALUES ('delete', {_fts_values('OLD')}); "
    f"INSERT INTO {SQLITE_FTS} ({_FTS_COLUMNS}) VALUES ({_fts_values('NEW')}); END",
    *[sql for kind in _SOURCES for sql in _sqlite_source_triggers(kind)],
    SQLITE_CONVERSATION_INDEX,
]
SQLITE_DROP = [
    "DROP INDEX IF EXISTS searchentry_conversation",
    *[
        f"DROP TRIGGER IF EXISTS {table}_search_{suffix}"
        for table, _ in _SOURCES.values()
        for suffix in ("ai", "au", "ad")
    ],
    *[f"DROP TRIGGER IF EXISTS memory_searchentry_{suffix}" for suffix in ("ai", "au", "ad")],
    f"DROP TABLE IF EXISTS {SQLITE_FTS}",
]


# ---- PostgreSQL: a message is its own row of the index. Its document is a stored column
# of ``memory_message`` (GIN-indexed), not a copy in ``memory_searchentry``: a message
# is written far more often than anything else, and copying each one (the row, its
# indexes, the trigger's transition table) cost ingest a third of its rate. The notes and
# pins are copied by statement triggers with transition tables (a bulk write is one
# INSERT ... SELECT into the index). ``ranked`` reads the two as one.

POSTGRES_KINDS = ("observation", "reflection", "pin")


def _postgres_source_triggers(kind: str) -> list[str]:
    table, _ = _SOURCES[kind]
    function = f"{table}_search"
    return [
        f"CREATE FUNCTION {function}_ins() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"INSERT INTO memory_searchentry ({_INSERT_COLUMNS}) {_select(kind, 'new_rows')}; "
        "RETURN NULL; END $$",
        f"CREATE FUNCTION {function}_upd() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"UPDATE memory_searchentry e SET {_assignments(kind, 'n')} FROM new_rows n "
        f"WHERE e.kind = '{kind}' AND e.source_id = n.id AND ({_changed(kind, 'n', 'e')}); "
        "RETURN NULL; END $$",
        f"CREATE FUNCTION {function}_del() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"DELETE FROM memory_searchentry e USING old_rows o "
        f"WHERE e.kind = '{kind}' AND e.source_id = o.id; RETURN NULL; END $$",
        f"CREATE TRIGGER {table}_search_ins AFTER INSERT ON {table} "
        f"REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {function}_ins()",
        f"CREATE TRIGGER {table}_search_upd AFTER UPDATE ON {table} "
        f"REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {function}_upd()",
        f"CREATE TRIGGER {table}_search_del AFTER DELETE ON {table} "
        f"REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION {function}_del()",
    ]


def _postgres_drop_triggers(kinds: Sequence[str]) -> list[str]:
    tables = [_SOURCES[kind][0] for kind in kinds]
    return [
        *[
            f"DROP TRIGGER IF EXISTS {table}_search_{suffix} ON {table}"
            for table in tables
            for suffix in ("ins", "upd", "del")
        ],
        *[
            f"DROP FUNCTION IF EXISTS {table}_search_{suffix}()"
            for table in tables
            for suffix in ("ins", "upd", "del")
        ],
    ]


POSTGRES_DOCUMENTS = [
    f"ALTER TABLE memory_searchentry ADD COLUMN document tsvector "
    f"GENERATED ALWAYS AS ({DOCUMENT_SQL}) STORED",
    "CREATE INDEX searchentry_document ON memory_searchentry USING gin (document)",
    f"ALTER TABLE memory_message ADD COLUMN document tsvector "
    f"GENERATED ALWAYS AS ({MESSAGE_DOCUMENT_SQL}) STORED",
    "CREATE INDEX message_document ON memory_message USING gin (document)",
]
_POSTGRES_DROP_DOCUMENTS = [
    "DROP INDEX IF EXISTS searchentry_document",
    "ALTER TABLE memory_searchentry DROP COLUMN IF EXISTS document",
    "DROP INDEX IF EXISTS message_document",
    "ALTER TABLE memory_message DROP COLUMN IF EXISTS document",
]
POSTGRES_CREATE = [
    *POSTGRES_DOCUMENTS,
    *[sql for kind in POSTGRES_KINDS for sql in _postgres_source_triggers(kind)],
    # The index this one replaces: an expression index over every message's content.
    "DROP INDEX IF EXISTS message_content_fts",
]
POSTGRES_DROP = [
    *_postgres_drop_triggers(list(_SOURCES)),
    *_POSTGRES_DROP_DOCUMENTS,
    "CREATE INDEX IF NOT EXISTS message_content_fts ON memory_message "
    "USING gin (to_tsvector('english'::regconfig, content))",
]


def backfill_sql(vendor: str) -> list[str]:
    """Index what is already stored (the migration's forward step, after the triggers;
    PostgreSQL's messages index themselves, through their generated column)."""
    kinds = POSTGRES_KINDS if vendor == "postgresql" else tuple(_SOURCES)
    return [
        f"INSERT INTO memory_searchentry ({_INSERT_COLUMNS}) {_select(kind, _SOURCES[kind][0])}"
        for kind in kinds
    ]


_SQL = {"sqlite": (SQLITE_CREATE, SQLITE_DROP), "postgresql": (POSTGRES_CREATE, POSTGRES_DROP)}


def _sql(vendor: str) -> tuple[list[str], list[str]]:
    # Memdesk runs on the two databases DATABASE_URL takes (config/settings/base.py).
    if vendor not in _SQL:
        raise ImproperlyConfigured(
            f"The recall index runs on SQLite or PostgreSQL; this database is {vendor}."
        )
    return _SQL[vendor]


def rebuild_sql(vendor: str) -> list[str]:
    """Bring an index made by migration 0021 to this one (migration 0022). PostgreSQL:
    messages leave the copy for their own document column, and each document holds its
    conversation's lexeme (every row's document is computed again). SQLite: the
    conversation's b-tree under its own name."""
    _sql(vendor)
    if vendor == "postgresql":
        return [
            *_postgres_drop_triggers(["message"]),
            "DELETE FROM memory_searchentry WHERE kind = 'message'",
            *_POSTGRES_DROP_DOCUMENTS,
            *POSTGRES_DOCUMENTS,
        ]
    return ["DROP INDEX IF EXISTS searchentry_conversation", SQLITE_CONVERSATION_INDEX]


def _sqlite_fts_backfill() -> str:
    return (
        f"INSERT INTO {SQLITE_FTS} ({_FTS_COLUMNS}) "
        f"SELECT {_fts_values('e')} FROM memory_searchentry e"
    )


def rekey_drop_sql(vendor: str) -> list[str]:
    """Migration 0023, before the source key becomes partial: on SQLite, which rebuilds
    the table to change a constraint, what refers to the table goes. PostgreSQL keeps no
    message rows there, and its planner proves a note's lookup (``kind = 'observation'``)
    within the partial key on its own: nothing to do."""
    _sql(vendor)
    return SQLITE_DROP if vendor == "sqlite" else []


def rekey_create_sql(vendor: str) -> list[str]:
    """Migration 0023, after: SQLite's triggers (finding a message's row by conversation
    and seq, a note's through the partial key) and its FTS5 index again, over the rows
    the rebuilt table kept with their ids."""
    _sql(vendor)
    return [*SQLITE_CREATE, _sqlite_fts_backfill()] if vendor == "sqlite" else []


def source_triggers_sql(vendor: str, kinds: Sequence[str]) -> list[str]:
    """The triggers that keep the index in step with these kinds' tables, made again:
    SQLite drops a table's triggers when a migration rebuilds the table (adding a column
    with a default does, as 0029 does to observations and reflections); PostgreSQL
    alters the table in place and keeps them."""
    _sql(vendor)
    if vendor != "sqlite":
        return []
    statements = []
    for kind in kinds:
        table, _ = _SOURCES[kind]
        statements += [
            f"DROP TRIGGER IF EXISTS {table}_search_{when}" for when in ("ai", "au", "ad")
        ]
        statements += _sqlite_source_triggers(kind)
    return statements


def create_sql(vendor: str) -> list[str]:
    return _sql(vendor)[0]


def drop_sql(vendor: str) -> list[str]:
    return _sql(vendor)[1]


def index_purge_deleted() -> None:
    """Leave no deleted row's words in the index (after an erasure). On SQLite, FTS5
    records a deletion as a marker in a new segment and keeps the row's tokens in the
    older segments until they merge; ``optimize`` merges every segment into one,
    without them. It rewrites the whole index (docs/deployment.md says what that
    costs). PostgreSQL deletes the row, and its tsvector with it: nothing to do."""
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {SQLITE_FTS} ({SQLITE_FTS}) VALUES ('optimize')")  # noqa: S608
