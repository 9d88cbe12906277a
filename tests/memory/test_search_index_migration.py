"""Migration 0023 changes the recall index's key (a message's row is no longer keyed by
its id; SQLite rebuilds the table to change the constraint): a database of 0022, with
rows in it, migrates to it and keeps every row findable, and an edit or a delete of a
row written before still reaches the index. (Migrating from an empty database is what
building the test database does.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db.migrations.state import StateApps

from memory.models import Message, Observation
from memory.search.query import question_of
from memory.search.ranked import Filters, Scope, search
from tests.migrations import migrate_to_latest, migrated_back_to


@pytest.fixture
def at_0022(transactional_db) -> Iterator[StateApps]:
    # Tenancy too: its later migrations add columns the workspace of then has not.
    nodes = [("memory", "0022_search_index_lighter"), ("tenancy", "0001_initial")]
    with migrated_back_to(nodes) as apps:
        yield apps


def _found(workspace_id, query: str) -> list:
    return [
        hit.source_id
        for hit in search(
            question=question_of(query),
            scope=Scope(workspace_id=workspace_id),
            filters=Filters(),
            substring=query,
        )
    ]


def test_rows_indexed_before_0023_are_found_and_kept_in_step_after_it(at_0022) -> None:
    old = at_0022
    workspace = old.get_model("tenancy", "Workspace").objects.create(name="before the rekey")
    conversation = old.get_model("memory", "Conversation").objects.create(
        workspace=workspace, user_id="dana", last_seq=2
    )
    old_message = old.get_model("memory", "Message")
    refund = old_message.objects.create(
        conversation=conversation, seq=1, role="assistant", token_count=9,
        content="The refund reaches your card in less than a week.",
    )  # fmt: skip
    parcel = old_message.objects.create(
        conversation=conversation, seq=2, role="user", token_count=8,
        content="My parcel to Berlin is two weeks late.",
    )  # fmt: skip
    note = old.get_model("memory", "Observation").objects.create(
        conversation=conversation, text="Dana's parcel to Berlin is late.",
        window_start_seq=2, window_end_seq=2, token_count=8, source="observer",
    )  # fmt: skip

    migrate_to_latest()

    assert _found(workspace.pk, "refund") == [refund.pk]
    assert set(_found(workspace.pk, "berlin")) == {parcel.pk, note.pk}
    Message.objects.filter(pk=refund.pk).update(content="The replacement ships tomorrow.")
    Observation.objects.filter(pk=note.pk).update(text="Dana's courier calls tomorrow.")
    Message.objects.filter(pk=parcel.pk).delete()
    assert _found(workspace.pk, "refund") == []
    assert _found(workspace.pk, "berlin") == []
    assert set(_found(workspace.pk, "tomorrow")) == {refund.pk, note.pk}
