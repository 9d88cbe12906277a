"""A run that changes many rows extends the audit chain once: one event per change,
consecutive, each chained to the one before, verifiable, and one checkpoint naming the
last."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from core.actors import SYSTEM_ACTOR
from governance.audit.verify import audit_chain_verify
from governance.audit.writer import AuditChange, audit_record, audit_record_many
from governance.models import AuditEvent


def _changes(n: int) -> list[AuditChange]:
    return [
        AuditChange("thing.redact", "thing", str(i), after={"n": i, "text": "naïve café"})
        for i in range(n)
    ]


def test_a_batch_appends_one_chained_event_per_change_after_the_head(
    workspace, audit_checkpoint_path, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        audit_record(
            workspace_id=workspace.pk,
            actor=SYSTEM_ACTOR,
            action="before",
            target_type="thing",
            target_id="0",
        )
    with django_capture_on_commit_callbacks(execute=True):
        events = audit_record_many(
            workspace_id=workspace.pk, actor=SYSTEM_ACTOR, changes=_changes(5)
        )

    stored = list(AuditEvent.objects.filter(workspace=workspace).order_by("sequence"))
    assert [e.sequence for e in stored] == [1, 2, 3, 4, 5, 6]
    assert [e.target_id for e in stored[1:]] == ["0", "1", "2", "3", "4"]
    assert all(
        later.prev_hash == earlier.hash
        for earlier, later in zip(stored[:-1], stored[1:], strict=True)
    )
    assert [e.pk for e in events] == [e.pk for e in stored[1:]]
    assert audit_chain_verify(workspace_id=workspace.pk).ok
    call_command("verify_audit", "--workspace", "acme", stdout=StringIO())  # raises if broken
    lines = [json.loads(line) for line in audit_checkpoint_path.read_text().splitlines()]
    assert [line["sequence"] for line in lines] == [1, 6]  # one per extension


def test_a_batch_takes_the_chain_lock_once(workspace):
    with CaptureQueriesContext(connection) as queries:
        audit_record_many(workspace_id=workspace.pk, actor=SYSTEM_ACTOR, changes=_changes(50))

    inserts = [q for q in queries.captured_queries if "INSERT" in q["sql"]]
    head_reads = [
        q
        for q in queries.captured_queries
        if q["sql"].startswith("SELECT") and "governance_auditchainhead" in q["sql"]
    ]
    assert AuditEvent.objects.filter(workspace=workspace).count() == 50
    assert len(head_reads) <= 2  # get_or_create, then the locked read
    assert len(inserts) <= 2  # the head on first use, the events in one statement


def test_an_empty_batch_writes_nothing(workspace):
    assert audit_record_many(workspace_id=workspace.pk, actor=SYSTEM_ACTOR, changes=[]) == []
    assert not AuditEvent.objects.exists()


def test_a_batch_rolls_back_with_its_transaction(workspace):
    with pytest.raises(RuntimeError), transaction.atomic():
        audit_record_many(workspace_id=workspace.pk, actor=SYSTEM_ACTOR, changes=_changes(3))
        raise RuntimeError("the change failed")

    assert not AuditEvent.objects.exists()
    events = audit_record_many(workspace_id=workspace.pk, actor=SYSTEM_ACTOR, changes=_changes(2))
    assert [e.sequence for e in events] == [1, 2]
    assert audit_chain_verify(workspace_id=workspace.pk).ok
