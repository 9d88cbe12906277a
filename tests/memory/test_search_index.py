"""The recall index (memory/search/): questions, not substrings, over every tier; kept in
step with its sources by the database, whichever door changes them; and a scope no hit
leaves. Every test runs on SQLite and, in CI's other run, on PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from core.actors import SYSTEM_ACTOR
from governance.erasure import erasure_execute, erasure_request_create
from governance.retention.plan import retention_sweep_request
from governance.retention.policies import retention_policy_create
from governance.retention.sweep import retention_sweep
from memory.models import Conversation, Message, Observation, SearchEntry
from memory.search.query import question_of
from memory.search.ranked import Filters, Scope, search, with_covering_observations
from memory.services.conversations import conversation_create, conversation_delete
from memory.services.messages import MessageInput, messages_append
from memory.services.pins import pin_create
from tests.governance.builders import ADMIN
from tests.memory.factories import ObservationFactory, ReflectionFactory

SUPPORT_CALL = [
    ("user", "My Aero 2 headphones arrived broken. Can I get my money back?"),
    ("assistant", "Yes: the refund reaches your card in less than a week."),
    ("user", "Thanks. I'm flying to Zürich on Friday, so I need it before then."),
    ("assistant", "Noted. All promo codes expire after 7 days without fail."),
    ("user", "The café near my office sells the same model."),
]


def _talk(conversation, turns=SUPPORT_CALL, *, days_old: float = 0, name: str = ""):
    began = timezone.now() - timedelta(days=days_old)
    return messages_append(
        conversation=conversation,
        items=[
            MessageInput(
                role=role,
                content=text,
                name=name if role == "user" else "",
                created_at=began + timedelta(seconds=n),
            )
            for n, (role, text) in enumerate(turns)
        ],
    )


def _found(workspace, query, *, conversation=None, end_user=None, **filters):
    scope = Scope(
        workspace_id=workspace.pk,
        conversation_ids=None if conversation is None else (conversation.pk,),
        end_user=end_user,
    )
    return search(
        question=question_of(query), scope=scope, filters=Filters(**filters), substring=query
    )


def _texts(hits):
    return [hit.text for hit in hits]


def test_a_question_finds_the_turn_that_answers_it_first(workspace, conversation) -> None:
    _talk(conversation)

    hits = _found(workspace, "How long does the refund take?", conversation=conversation)

    assert _texts(hits)[0] == SUPPORT_CALL[1][1]
    assert hits[0].kind == "message" and hits[0].seq == 2 and hits[0].role == "assistant"
    assert hits[0].score is not None and hits[0].score > 0


def test_stems_accents_phrases_and_prefixes_match(workspace, conversation) -> None:
    _talk(conversation)

    assert _texts(_found(workspace, "refunds", conversation=conversation)) == [SUPPORT_CALL[1][1]]
    assert _texts(_found(workspace, "zurich", conversation=conversation)) == [SUPPORT_CALL[2][1]]
    assert _texts(_found(workspace, "cafe", conversation=conversation)) == [SUPPORT_CALL[4][1]]
    assert _texts(_found(workspace, "headph*", conversation=conversation)) == [SUPPORT_CALL[0][1]]
    # The phrase, not its words: "office" and "sells" apart would not do.
    assert _texts(_found(workspace, '"office sells"', conversation=conversation)) == [
        SUPPORT_CALL[4][1]
    ]
    assert _found(workspace, '"sells office"', conversation=conversation) == []


def test_a_question_of_stop_words_only_is_a_substring_search(workspace, conversation) -> None:
    _talk(conversation)

    hits = _found(workspace, "then", conversation=conversation)

    # PostgreSQL's English configuration leaves "then" out of the index; SQLite's keeps
    # it. Either way the turn that said it is found.
    assert _texts(hits) == [SUPPORT_CALL[2][1]]


def test_every_tier_is_indexed_and_a_filter_keeps_to_one(workspace, conversation) -> None:
    messages = _talk(conversation)
    ObservationFactory(conversation=conversation, text="Dana is flying to Zurich on Friday.")
    ReflectionFactory(conversation=conversation, text="Dana travels to Zurich often.")
    pin_create(conversation=conversation, message_id=str(messages[2].pk), actor=SYSTEM_ACTOR)

    kinds = sorted(hit.kind for hit in _found(workspace, "Zurich", conversation=conversation))
    assert kinds == ["message", "observation", "pin", "reflection"]
    only = _found(workspace, "Zurich", conversation=conversation, kinds=["observation"])
    assert _texts(only) == ["Dana is flying to Zurich on Friday."]
    assert _texts(_found(workspace, "Zurich", conversation=conversation, role="assistant")) == []


def test_a_message_hit_names_the_observations_made_from_it(workspace, conversation) -> None:
    messages = _talk(conversation)
    note = ObservationFactory(
        conversation=conversation,
        text="Refund within a week.",
        source_message_ids=[str(messages[1].pk)],
        window_start_seq=1,
        window_end_seq=2,
    )

    hits = with_covering_observations(_found(workspace, "card", conversation=conversation))

    assert [hit.covered_by for hit in hits] == [(note.pk,)]


def test_an_edited_note_is_found_by_its_new_words_only(workspace, conversation) -> None:
    note = ObservationFactory(conversation=conversation, text="Dana wants a refund.")

    Observation.objects.filter(pk=note.pk).update(text="Dana wants a replacement.")

    assert _found(workspace, "refund", conversation=conversation) == []
    assert [h.source_id for h in _found(workspace, "replacement")] == [note.pk]


def test_a_redacted_or_deleted_message_is_found_by_what_it_holds_now(
    workspace, conversation
) -> None:
    """A message's index row is found by its conversation and seq (SQLite keys no row by
    a message's random id): an edit rewrites that message's row only, a delete removes it."""
    first, second = _talk(conversation, SUPPORT_CALL[:2])

    Message.objects.filter(pk=first.pk).update(content="My <PRODUCT_1> arrived broken.")
    assert _found(workspace, "aero headphones", conversation=conversation) == []
    assert [h.source_id for h in _found(workspace, "arrived broken")] == [first.pk]
    assert [h.source_id for h in _found(workspace, "refund")] == [second.pk]

    Message.objects.filter(pk=second.pk).delete()
    assert _found(workspace, "refund") == []
    assert [h.source_id for h in _found(workspace, "broken")] == [first.pk]


def test_a_superseded_reflection_is_not_recalled(workspace, conversation) -> None:
    ReflectionFactory(
        conversation=conversation, text="Dana prefers phone calls.", status="superseded"
    )

    assert _found(workspace, "phone calls", conversation=conversation) == []


def test_scope_never_leaves_the_end_user_or_the_workspace(
    workspace, other_workspace, conversation
) -> None:
    _talk(conversation)
    someone_else = conversation_create(workspace=workspace, user_id="erik")
    _talk(someone_else, [("user", "My refund never came.")])
    elsewhere = conversation_create(workspace=other_workspace, user_id="dana")
    _talk(elsewhere, [("user", "Another refund question.")])

    dana = {h.conversation_id for h in _found(workspace, "refund", end_user="dana")}
    everyone = {h.conversation_id for h in _found(workspace, "refund")}

    assert dana == {conversation.pk}
    assert everyone == {conversation.pk, someone_else.pk}
    assert _found(workspace, "refund", conversation=elsewhere) == []


def test_deleted_erased_and_expired_words_are_never_found(workspace) -> None:
    deleted = conversation_create(workspace=workspace, user_id="ann")
    _talk(deleted, [("user", "Kumquat marmalade for the deleted one.")])
    erased = conversation_create(workspace=workspace, user_id="bo")
    _talk(erased, [("user", "Persimmon jam for the erased one.")])
    ObservationFactory(conversation=erased, text="Bo likes persimmon jam.")
    expired = conversation_create(workspace=workspace, user_id="cy")
    _talk(expired, [("user", "Quince paste for the expired one.")], days_old=100)
    kept = conversation_create(workspace=workspace, user_id="di")
    _talk(kept, [("user", "Quince paste, said recently.")])

    conversation_delete(conversation=deleted, actor=SYSTEM_ACTOR, reason="asked to")
    request = erasure_request_create(
        workspace=workspace, actor=ADMIN, end_user_id="bo", reason="GDPR art. 17"
    )
    erasure_execute(request_id=request.pk)
    retention_policy_create(workspace=workspace, actor=ADMIN, name="default", message_days=30)
    sweep = retention_sweep_request(workspace=workspace, actor=ADMIN)
    retention_sweep(sweep_id=sweep.pk)

    assert _found(workspace, "kumquat marmalade") == []
    assert _found(workspace, "persimmon jam") == []
    assert _texts(_found(workspace, "quince paste")) == ["Quince paste, said recently."]
    # Nothing left behind in the index's own table either (PostgreSQL keeps a message's
    # document in its own row, so there the table holds notes and pins only).
    indexed = set(SearchEntry.objects.values_list("source_id", flat=True))
    messages = set(Message.objects.values_list("pk", flat=True))
    notes = set(Observation.objects.values_list("pk", flat=True))
    assert indexed <= messages | notes
    if connection.vendor == "sqlite":
        assert messages <= indexed


def test_a_scope_with_too_many_candidates_is_ranked_all_the_same(
    workspace, conversation, monkeypatch
) -> None:
    """SQLite weighs a scope's words among its own rows up to a number of candidates,
    and past it ranks with FTS5's bm25(): the answer comes first either way."""
    from memory.search import scoped

    _talk(conversation)
    weighed = _texts(_found(workspace, "How long does the refund take?", conversation=conversation))
    monkeypatch.setattr(scoped, "MAX_CANDIDATES", 1)
    ranked = _texts(_found(workspace, "How long does the refund take?", conversation=conversation))

    assert weighed[0] == ranked[0] == SUPPORT_CALL[1][1]
    assert sorted(weighed) == sorted(ranked)


def test_a_prefix_matches_words_never_the_conversations_own_id(workspace) -> None:
    """The conversation's id is indexed beside the words (to keep a search inside it);
    a prefix the id happens to start with must still find only words."""
    conversation = Conversation.objects.create(
        id=uuid.UUID("dea1c0de-0000-4000-8000-000000000001"), workspace=workspace, user_id="dana"
    )
    _talk(conversation, [("user", "Refund please."), ("assistant", "Dealt with: refunded.")])

    assert _texts(_found(workspace, "dea*", conversation=conversation)) == ["Dealt with: refunded."]
    assert _found(workspace, "dea1c*", conversation=conversation) == []


@pytest.mark.parametrize("query", ['"', "*", "OR", "NEAR(a b)", "a AND", "^x", "col:x", "(", "'"])
def test_query_syntax_in_a_question_is_read_as_words(workspace, conversation, query) -> None:
    _talk(conversation)

    assert isinstance(_found(workspace, query, conversation=conversation), list)


def test_the_database_runs_the_index_sql_the_code_names(db) -> None:
    """Migration 0021 runs ``memory.search.index.create_sql``: a change to that SQL needs a
    migration that brings the older index to it (as 0022 runs ``rebuild_sql``), or
    databases made before the change would keep the old triggers."""
    from memory.search.index import create_sql

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT sql FROM sqlite_master WHERE sql LIKE '%memory_search%'")
            stored = {row[0] for row in cursor.fetchall()}
            assert set(create_sql("sqlite")) <= stored
        else:
            cursor.execute(
                "SELECT tgname FROM pg_trigger WHERE tgname LIKE '%%search%%' AND NOT tgisinternal"
            )
            names = {row[0] for row in cursor.fetchall()}
            wanted = {
                s.split()[2] for s in create_sql("postgresql") if s.startswith("CREATE TRIGGER")
            }
            assert wanted == names


def test_a_write_rolled_back_leaves_nothing_in_the_index(workspace, conversation) -> None:
    from django.db import transaction

    with pytest.raises(RuntimeError), transaction.atomic():
        _talk(conversation, [("user", "Gooseberry fool, never committed.")])
        assert _found(workspace, "gooseberry")  # inside the write's transaction: indexed
        raise RuntimeError("the request failed after the write")

    assert _found(workspace, "gooseberry") == []
    assert not SearchEntry.objects.exists()


def test_a_date_range_keeps_to_what_was_said_in_it(workspace, conversation) -> None:
    _talk(conversation, [("user", "Old refund question.")], days_old=10)
    _talk(conversation, [("user", "New refund question.")], days_old=1)
    now = timezone.now()

    recent = _found(workspace, "refund", since=now - timedelta(days=5))
    older = _found(workspace, "refund", until=now - timedelta(days=5))

    assert _texts(recent) == ["New refund question."]
    assert _texts(older) == ["Old refund question."]


@pytest.mark.parametrize("query", ["A-1234", "1234", "dana.lee@example.com", "Søren", "soren"])
def test_ids_addresses_and_names_are_found_as_typed_or_in_part(workspace, conversation, query):
    _talk(conversation, [("user", "Søren here: order A-1234, mail dana.lee@example.com.")])

    assert len(_found(workspace, query, conversation=conversation)) == 1
