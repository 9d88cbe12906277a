"""The search: a question over the recall index, in a scope, with filters, best first.

Scope is part of correctness (one end user's memory must not answer another's
question): a search is always inside one workspace, and inside the conversations
``Scope`` names (one conversation, an end user's, or, where the caller may read it, the
whole workspace). Who may ask for which scope is the edges' rule (the API, MCP, the
dashboard); this module only keeps to the scope it is given.

A question of stop words only ("where did they say 'the'") finds nothing in a ranked
index that drops them (PostgreSQL's English configuration); it is answered by a
case-insensitive substring match, newest first, without a score.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from django.db import connection
from django.db.models import Q
from django.utils import timezone

from core.errors import MemdeskError
from memory.models import Conversation, Message, Observation
from memory.search.index import SQLITE_FTS, SearchEntry, scope_lexeme
from memory.search.query import Question, question_of
from memory.search.scoped import weigh

MAX_HITS = 200
KINDS = tuple(SearchEntry.Kind.values)
# Notes a later one replaced say what is no longer true: not recalled.
_RETIRED = ("superseded",)


@dataclass(frozen=True)
class Scope:
    """Where a search looks: a workspace, and in it the conversations with one of
    ``conversation_ids`` (None: any), of ``end_user`` (None: any end user)."""

    workspace_id: uuid.UUID
    conversation_ids: tuple[uuid.UUID, ...] | None = None
    end_user: str | None = None


@dataclass(frozen=True)
class Filters:
    kinds: Collection[str] = KINDS
    role: str = ""
    speaker: str = ""
    since: datetime | None = None
    until: datetime | None = None


@dataclass(frozen=True)
class Hit:
    kind: str
    source_id: uuid.UUID
    conversation_id: uuid.UUID
    seq: int | None
    role: str
    speaker: str
    status: str
    at: datetime
    text: str
    score: float | None  # higher is better; None for a substring match
    covered_by: tuple[uuid.UUID, ...] = field(default=())  # a message's observations


def _uuid_param(value: uuid.UUID) -> Any:
    return SearchEntry._meta.get_field("conversation_id").get_db_prep_value(value, connection)


def _datetime_param(value: datetime) -> Any:
    # SQLite compares the stored text: the value must be written as Django writes it.
    return SearchEntry._meta.get_field("at").get_db_prep_value(value, connection)


def _where(scope: Scope, filters: Filters) -> tuple[list[str], list[Any]]:
    where = ["c.workspace_id = %s"]
    params: list[Any] = [_uuid_param(scope.workspace_id)]
    if scope.conversation_ids is not None:
        ids = scope.conversation_ids or (uuid.UUID(int=0),)  # an empty scope finds nothing
        where.append(f"e.conversation_id IN ({', '.join(['%s'] * len(ids))})")
        params += [_uuid_param(i) for i in ids]
    if scope.end_user is not None:
        where.append("c.user_id = %s")
        params.append(scope.end_user)
    kinds = [k for k in KINDS if k in filters.kinds]
    if len(kinds) < len(KINDS):
        where.append(f"e.kind IN ({', '.join(['%s'] * len(kinds))})" if kinds else "1 = 0")
        params += kinds
    where.append(f"e.status NOT IN ({', '.join(['%s'] * len(_RETIRED))})")
    params += list(_RETIRED)
    if filters.role:
        where.append("e.role = %s")
        params.append(filters.role)
    if filters.speaker:
        where.append("lower(e.speaker) = lower(%s)")
        params.append(filters.speaker)
    if filters.since is not None:
        where.append("e.at >= %s")
        params.append(_datetime_param(filters.since))
    if filters.until is not None:
        where.append("e.at < %s")
        params.append(_datetime_param(filters.until))
    return where, params


_COLUMNS = (
    "e.kind, e.source_id, e.conversation_id, e.seq, e.role, e.speaker, e.status, e.at, e.text"
)

# PostgreSQL's index as one relation: the messages' own documents and the copied notes
# and pins (memory/search/index.py). The conditions on ``e`` reach each branch's GIN.
_PG_ENTRIES = (
    "(SELECT 'message'::varchar AS kind, m.id AS source_id, m.conversation_id, m.seq, m.role, "
    "m.name AS speaker, ''::varchar AS status, m.created_at AS at, m.content AS text, "
    "m.document FROM memory_message m "
    "UNION ALL SELECT s.kind, s.source_id, s.conversation_id, s.seq, s.role, s.speaker, "
    "s.status, s.at, s.text, s.document FROM memory_searchentry s) e"
)


# An end user with more conversations than this is searched without the index's own
# filter on their conversations (still inside them: the join's WHERE keeps the scope).
_INDEX_SCOPE_MAX = 200


def _index_scope(scope: Scope) -> tuple[uuid.UUID, ...] | None:
    """The conversations the index itself is asked to keep to (SQLite: an FTS5 column
    filter; PostgreSQL: the document's conversation lexemes), or None (the whole
    workspace, or an end user with very many conversations)."""
    ids = scope.conversation_ids
    if ids is None and scope.end_user is not None:
        ids = tuple(
            Conversation.objects.filter(
                workspace_id=scope.workspace_id, user_id=scope.end_user
            ).values_list("pk", flat=True)[: _INDEX_SCOPE_MAX + 1]
        )
    if ids is None or len(ids) > _INDEX_SCOPE_MAX:
        return None
    return ids or (uuid.UUID(int=0),)  # nobody's: finds nothing


def _fts_scope(ids: tuple[uuid.UUID, ...] | None) -> str:
    if ids is None:
        return ""
    return "conversation_id : (" + " OR ".join(f'"{i.hex}"' for i in ids) + ") AND "


def _tsquery_scope(ids: tuple[uuid.UUID, ...]) -> str:
    return " | ".join(f"'{scope_lexeme(i)}'" for i in ids)


def _ranked_sql(
    question: Question, ids: tuple[uuid.UUID, ...] | None, where: list[str]
) -> tuple[str, list[Any]]:
    if connection.vendor == "postgresql":
        # The rank reads the question alone: the conversation's lexeme only filters.
        matched, head = "e.document @@ q", [question.tsquery()]
        if ids is not None:
            # Two conditions, not one ``q && scope``: a question PostgreSQL reads as
            # empty (stop words only) must match nothing, not the whole scope.
            matched = "e.document @@ q AND e.document @@ %s::tsquery"
            head.append(_tsquery_scope(ids))
        return (
            f"SELECT {_COLUMNS}, ts_rank_cd(e.document, q, 1) AS score "
            f"FROM {_PG_ENTRIES} JOIN memory_conversation c ON c.id = e.conversation_id, "
            "to_tsquery('english'::regconfig, %s) q "
            f"WHERE {matched} AND {' AND '.join(where)} "
            "ORDER BY score DESC, e.at DESC, e.source_id DESC LIMIT %s",
            head,
        )
    return (
        # The conversation's id is a filter, not a word: it weighs nothing in the rank.
        f"SELECT {_COLUMNS}, -bm25({SQLITE_FTS}, 1.0, 1.0, 0.0) AS score FROM {SQLITE_FTS} "
        f"JOIN memory_searchentry e ON e.id = {SQLITE_FTS}.rowid "
        "JOIN memory_conversation c ON c.id = e.conversation_id "
        f"WHERE {SQLITE_FTS} MATCH %s AND {' AND '.join(where)} "
        "ORDER BY score DESC, e.at DESC, e.id DESC LIMIT %s",
        # The question reads the words and the speaker only: a prefix must not match
        # the conversation's id, which is a column of the same table.
        [f"{_fts_scope(ids)}{{text speaker}} : ({question.fts5()})"],
    )


def _substring_sql(ids: tuple[uuid.UUID, ...] | None, where: list[str]) -> tuple[str, list[Any]]:
    """A case-insensitive match, newest first. PostgreSQL finds the conversations' rows
    through the document's lexemes; SQLite through its b-tree on the conversation."""
    postgres = connection.vendor == "postgresql"
    head: list[Any] = []
    if postgres and ids is not None:
        where = ["e.document @@ %s::tsquery", *where]
        head.append(_tsquery_scope(ids))
    return (
        f"SELECT {_COLUMNS}, NULL AS score "
        f"FROM {_PG_ENTRIES if postgres else 'memory_searchentry e'} "
        "JOIN memory_conversation c ON c.id = e.conversation_id "
        f"WHERE {' AND '.join(where)} AND lower(e.text) LIKE %s ESCAPE '\\' "
        "ORDER BY e.at DESC, e.source_id DESC LIMIT %s",
        head,
    )


def _uuid(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)  # SQLite: hex text


def _hit(row: Sequence[Any]) -> Hit:
    kind, source_id, conversation_id, seq, role, speaker, status, at, text, score = row
    if isinstance(at, str):  # SQLite's raw rows: UTC, written without an offset
        at = datetime.fromisoformat(at)
    if timezone.is_naive(at):
        at = at.replace(tzinfo=UTC)
    return Hit(
        kind,
        _uuid(source_id),
        _uuid(conversation_id),
        seq,
        role,
        speaker,
        status,
        at,
        text,
        None if score is None else round(float(score), 6),
    )


def _ranked(
    cursor: Any,
    question: Question,
    ids: tuple[uuid.UUID, ...] | None,
    where: list[str],
    params: list[Any],
    limit: int,
) -> list[Hit]:
    """The best hits, ranked: on SQLite in a scope of conversations (``ids``, from
    ``_index_scope``) by the scope's own weights (memory/search/scoped.py), else by the
    database's rank."""
    weighed = (
        weigh(cursor, question, _fts_scope(ids))
        if connection.vendor == "sqlite" and ids is not None
        else None
    )
    if weighed is None:  # PostgreSQL, or a scope too wide to weigh its own words
        sql, head = _ranked_sql(question, ids, where)
        cursor.execute(sql, [*head, *params, limit])
        return [_hit(row) for row in cursor.fetchall()]
    if not weighed.holding:
        return []
    rowids = list(weighed.holding)
    cursor.execute(
        f"SELECT {_COLUMNS}, e.id FROM memory_searchentry e "
        "JOIN memory_conversation c ON c.id = e.conversation_id "
        f"WHERE e.id IN ({', '.join(['%s'] * len(rowids))}) AND {' AND '.join(where)}",
        [*rowids, *params],
    )
    # _COLUMNS: ..., speaker (5), ..., at (7), text (8); then the FTS5 rowid.
    scored = [(weighed.score(row[-1], row[8], row[5]), row) for row in cursor.fetchall()]
    scored.sort(key=lambda pair: (pair[0], pair[1][7], pair[1][-1]), reverse=True)
    return [_hit((*row[:-1], score)) for score, row in scored[:limit]]


def search(
    *,
    question: Question,
    scope: Scope,
    filters: Filters = Filters(),
    limit: int = 10,
    substring: str = "",
) -> list[Hit]:
    """The ``limit`` best hits for ``question`` in ``scope``. ``substring`` is what a
    question of stop words only searches for, as typed (the whole query)."""
    limit = max(1, min(limit, MAX_HITS))
    where, params = _where(scope, filters)
    ids = _index_scope(scope)  # an end user's conversations: one query for both paths
    hits: list[Hit] = []
    with connection.cursor() as cursor:
        if not question.empty:
            hits = _ranked(cursor, question, ids, where, params, limit)
        if not hits and (question.empty or question.only_stop_words) and substring.strip():
            like = substring.strip().lower().replace("\\", "\\\\").replace("%", "\\%")
            like = "%" + like.replace("_", "\\_") + "%"
            sql, head = _substring_sql(ids, where)
            cursor.execute(sql, [*head, *params, like, limit])
            hits = [_hit(row) for row in cursor.fetchall()]
    return hits


def with_covering_observations(hits: list[Hit]) -> list[Hit]:
    """Each message hit with the ids of the observations made from it (the trace from a
    verbatim turn to what memory says of it): one query, for the notes whose window
    holds one of the hits."""
    messages = [h for h in hits if h.kind == SearchEntry.Kind.MESSAGE and h.seq is not None]
    if not messages:
        return hits
    windows = Q()
    for hit in messages:
        windows |= Q(
            conversation_id=hit.conversation_id,
            window_start_seq__lte=hit.seq,
            window_end_seq__gte=hit.seq,
        )
    covering: dict[uuid.UUID, list[uuid.UUID]] = defaultdict(list)
    for note_id, sources in Observation.objects.filter(windows).values_list(
        "id", "source_message_ids"
    ):
        for source in sources or ():
            covering[uuid.UUID(str(source))].append(note_id)
    return [
        replace(hit, covered_by=tuple(covering[hit.source_id]))
        if hit.kind == SearchEntry.Kind.MESSAGE
        else hit
        for hit in hits
    ]


def message_search(
    *, conversation: Conversation, query: str, limit: int
) -> list[tuple[Message, float | None]]:
    """The NAMS search route's answer: the conversation's messages that best answer
    ``query``, best first, with their scores (None for a substring match)."""
    if not (query or "").strip():
        raise MemdeskError("empty_query", "query must not be empty.", field="query")
    hits = search(
        question=question_of(query),
        scope=Scope(workspace_id=conversation.workspace_id, conversation_ids=(conversation.pk,)),
        filters=Filters(kinds=(SearchEntry.Kind.MESSAGE,)),
        limit=limit,
        substring=query,
    )
    messages = Message.objects.in_bulk([hit.source_id for hit in hits])
    return [(messages[hit.source_id], hit.score) for hit in hits if hit.source_id in messages]
