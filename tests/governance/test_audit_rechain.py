"""Events written before the trail recorded digests still hold memory texts (a note's
text, a pin's quote, a deleted conversation's title). ``audit_scrub_texts`` replaces
them by their digests and re-chains the events after them: the chain still verifies,
the checkpoints written before still count, and the re-chained events are as
tamper-evident as any."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from core.actors import SYSTEM_ACTOR
from governance.audit.verify import audit_chain_verify
from governance.audit.writer import (
    GENESIS_HASH,
    audit_current_key,
    audit_event_hash,
    audit_record,
    audit_text_digest,
)
from governance.models import AuditChainHead, AuditEvent, AuditRechain
from tenancy.models import Workspace
from tests.governance.test_audit_tamper import _rewrite, _superuser

NOTE = "Customer Hannelore asked for the refund to IBAN DE44 5001"
EDITED = "Customer Hannelore asked for the refund by cheque"
REFLECTION = "Hannelore prefers cheques"
QUOTE = "I will pay the 412 euros on Friday"
TITLE = "Hannelore's refund"
WORDS = ["Hannelore", "IBAN", "cheque", "412 euros"]

# The events as the release before digests wrote them, and what each becomes.
OLD_STYLE = [
    ("test.event", None, {"n": 1}),
    ("observation.create", None, {"text": NOTE, "priority": "high", "version": 1}),
    ("observation.edit", {"text": NOTE, "version": 1}, {"text": EDITED, "version": 2}),
    ("test.event", None, {"n": 2}),
    ("reflection.delete", {"text": REFLECTION, "status": "active"}, None),
    ("pin.create", None, {"messageId": "m1", "text": QUOTE, "tokenCount": 9}),
    ("conversation.delete", {"userId": "u1", "title": TITLE, "counts": {"messages": 3}}, None),
    ("observation.create", None, {"textDigest": audit_text_digest(NOTE), "tokenCount": 12}),
]


@pytest.fixture
def old_trail(workspace, django_capture_on_commit_callbacks) -> list[AuditEvent]:
    """The old-style events, each committed and so checkpointed, as in production."""
    events = []
    for i, (action, before, after) in enumerate(OLD_STYLE):
        with django_capture_on_commit_callbacks(execute=True):
            events.append(
                audit_record(
                    workspace_id=workspace.pk,
                    actor=SYSTEM_ACTOR,
                    action=action,
                    target_type=action.split(".")[0],
                    target_id=str(i),
                    before=before,
                    after=after,
                    reason="as it was",
                )
            )
    return events


def _trail(workspace: Workspace) -> str:
    return json.dumps([[e.before, e.after] for e in AuditEvent.objects.filter(workspace=workspace)])


def _scrub(django_capture_on_commit_callbacks, *args: str) -> str:
    out = StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("audit_scrub_texts", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def _state(workspace: Workspace) -> list[tuple[int, str, int]]:
    return list(
        AuditEvent.objects.filter(workspace=workspace)
        .order_by("sequence")
        .values_list("sequence", "hash", "chain_version")
    )


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_it_replaces_the_texts_by_digests_and_the_chain_still_verifies(
    old_trail, workspace, make_client, django_capture_on_commit_callbacks, audit_checkpoint_path
):
    assert all(word in _trail(workspace) for word in WORDS)
    old_hashes = [e.hash for e in old_trail]
    checkpoints_before = _lines(audit_checkpoint_path)

    out = _scrub(django_capture_on_commit_callbacks)

    assert out == (
        "acme: scrubbed 5 event(s) (conversation.delete 1, observation.create 1, "
        "observation.edit 1, pin.create 1, reflection.delete 1); re-chained 7 event(s), "
        "#2 to #8; recorded as audit.rechain #9\n"
    )
    trail = _trail(workspace)
    assert not any(word in trail for word in WORDS)
    events = list(AuditEvent.objects.filter(workspace=workspace).order_by("sequence"))
    digest = audit_text_digest
    assert [(e.before, e.after) for e in events[:8]] == [
        (None, {"n": 1}),
        (None, {"textDigest": digest(NOTE), "priority": "high", "version": 1}),
        ({"textDigest": digest(NOTE), "version": 1}, {"textDigest": digest(EDITED), "version": 2}),
        (None, {"n": 2}),
        ({"textDigest": digest(REFLECTION), "status": "active"}, None),
        (None, {"messageId": "m1", "textDigest": digest(QUOTE), "tokenCount": 9}),
        ({"userId": "u1", "titleDigest": digest(TITLE), "counts": {"messages": 3}}, None),
        (None, {"textDigest": digest(NOTE), "tokenCount": 12}),
    ]
    # The event before the first scrubbed one is untouched; from there on, re-chained.
    key_id = audit_current_key().id
    assert (events[0].hash, events[0].chain_version) == (old_hashes[0], 2)
    assert [(e.chain_version, e.key_id) for e in events[1:8]] == [(3, key_id)] * 7
    assert all(e.hash != old for e, old in zip(events[1:8], old_hashes[1:], strict=True))
    assert events[1].prev_hash == events[0].hash
    assert AuditChainHead.objects.get(workspace=workspace).hash == events[-1].hash

    rechain_event = events[8]
    assert (rechain_event.action, rechain_event.actor_type, rechain_event.actor_id) == (
        "audit.rechain",
        "system",
        "command:audit_scrub_texts",
    )
    assert rechain_event.actor_role == "system"
    after = rechain_event.after
    assert (after["eventsScrubbed"], after["eventsRechained"]) == (5, 7)
    assert (after["firstSequence"], after["lastSequence"]) == (2, 8)
    assert (after["oldHeadHash"], after["newHeadHash"]) == (old_hashes[-1], events[7].hash)
    assert after["scrubbedByAction"]["observation.create"] == 1
    rechain = AuditRechain.objects.get(workspace=workspace)
    assert rechain.old_hashes == old_hashes[1:]
    assert after["oldHashesDigest"] == rechain.summary()["oldHashesDigest"]

    # The old checkpoints are still in the sink, unchanged, and still count; the new
    # head is checkpointed after commit.
    lines = _lines(audit_checkpoint_path)
    assert lines[:8] == checkpoints_before
    assert (lines[-1]["sequence"], lines[-1]["hash"]) == (9, rechain_event.hash)
    report = audit_chain_verify(workspace_id=workspace.pk)
    assert report.ok, report.problem
    assert (report.events, report.checkpoints, report.checkpointed_through) == (9, 9, 9)
    out, err = StringIO(), StringIO()
    call_command("verify_audit", "--require-checkpoints", stdout=out, stderr=err)
    assert "acme: OK, 9 events, signed checkpoints through #9 (9 checked, " in out.getvalue()
    assert err.getvalue() == ""
    body = make_client(workspace, scope="admin").get("/v1/audit/verify").json()
    assert body["ok"] is True and body["checkpoints"] == 9
    assert not any(word in audit_checkpoint_path.read_text() for word in WORDS)


def test_a_second_run_changes_nothing_and_records_nothing(
    old_trail, workspace, django_capture_on_commit_callbacks, audit_checkpoint_path
):
    _scrub(django_capture_on_commit_callbacks)
    state, lines = _state(workspace), audit_checkpoint_path.read_text()

    out = _scrub(django_capture_on_commit_callbacks)

    assert out == "acme: nothing to scrub\n"
    assert _state(workspace) == state
    assert audit_checkpoint_path.read_text() == lines
    assert AuditRechain.objects.count() == 1
    assert AuditEvent.objects.filter(action="audit.rechain").count() == 1


def test_a_dry_run_counts_per_action_and_changes_nothing(
    old_trail, workspace, other_workspace, django_capture_on_commit_callbacks
):
    state = _state(workspace)

    out = _scrub(django_capture_on_commit_callbacks, "--dry-run")

    assert out == (
        "acme: would scrub 5 event(s) (conversation.delete 1, observation.create 1, "
        "observation.edit 1, pin.create 1, reflection.delete 1); would re-chain 7 event(s), "
        "#2 to #8\nglobex: nothing to scrub\n"
    )
    assert _state(workspace) == state
    assert all(word in _trail(workspace) for word in WORDS)
    assert not AuditRechain.objects.exists()


def test_only_the_named_workspace_is_scrubbed(
    old_trail, workspace, other_workspace, django_capture_on_commit_callbacks
):
    audit_record(
        workspace_id=other_workspace.pk,
        actor=SYSTEM_ACTOR,
        action="pin.delete",
        target_type="pin",
        target_id="p",
        before={"text": QUOTE},
    )
    out = _scrub(django_capture_on_commit_callbacks, "--workspace", "globex")

    assert out.startswith("globex: scrubbed 1 event(s) (pin.delete 1); re-chained 1 event(s)")
    assert QUOTE not in _trail(other_workspace)
    assert all(word in _trail(workspace) for word in WORDS)
    with pytest.raises(CommandError, match="No workspace named 'initech'"):
        _scrub(django_capture_on_commit_callbacks, "--workspace", "initech")


def test_a_chain_that_does_not_verify_is_refused_and_left_as_it_is(
    old_trail, workspace, django_capture_on_commit_callbacks
):
    _superuser(
        "UPDATE governance_auditevent SET reason = %s WHERE id = %s", ["edited", old_trail[3].pk]
    )
    state = _state(workspace)

    err = StringIO()
    with pytest.raises(CommandError, match="1 workspace\\(s\\) not scrubbed"):
        call_command("audit_scrub_texts", stdout=StringIO(), stderr=err)

    assert err.getvalue().startswith(
        f"acme: REFUSED: The audit chain does not verify, so it is not re-chained: event "
        f"{old_trail[3].pk} (test.event, "
    )
    assert _state(workspace) == state
    assert all(word in _trail(workspace) for word in WORDS)
    assert not AuditRechain.objects.exists()


def test_events_from_before_keyed_chains_are_scrubbed_and_keyed(
    workspace, django_capture_on_commit_callbacks
):
    head = AuditChainHead.objects.create(workspace=workspace, sequence=0, hash=GENESIS_HASH)
    legacy = AuditEvent(
        workspace=workspace,
        sequence=1,
        actor_type="system",
        actor_id="system",
        action="observation.create",
        target_type="observation",
        target_id="1",
        after={"text": NOTE},
        prev_hash=GENESIS_HASH,
        chain_version=AuditEvent.ChainVersion.SHA256,
    )
    legacy.hash = audit_event_hash(legacy)
    legacy.save()
    AuditChainHead.objects.filter(pk=head.pk).update(sequence=1, hash=legacy.hash)
    call_command("audit_checkpoint", stdout=StringIO())  # sealed before the re-chain

    _scrub(django_capture_on_commit_callbacks)

    event = AuditEvent.objects.get(pk=legacy.pk)
    assert (event.chain_version, event.after) == (3, {"textDigest": audit_text_digest(NOTE)})
    report = audit_chain_verify(workspace_id=workspace.pk)
    assert report.ok and (report.events, report.checkpointed_through) == (2, 2)


# --- tamper evidence after a re-chain -------------------------------------------------------


def _json(value: object) -> str:
    return json.dumps(value)


EDITS = {
    "after": ('"after" = {json}', _json({"textDigest": "0" * 32, "priority": "low"})),
    "before": ('"before" = {json}', _json({"text": NOTE})),
    "reason": ("reason = %s", "another reason"),
    "actor_id": ("actor_id = %s", "someone-else"),
    "action": ("action = %s", "test.event"),
    "target_id": ("target_id = %s", "99"),
    "created_at": ("created_at = %s", "2020-01-01 00:00:00+00:00"),
    "chain_version": ("chain_version = %s", 2),
    "key_id": ("key_id = %s", "0123456789abcdef"),
}


@pytest.mark.parametrize("column", sorted(EDITS))
def test_any_column_of_a_rechained_event_edited_afterwards_is_caught(
    column, old_trail, workspace, django_capture_on_commit_callbacks
):
    _scrub(django_capture_on_commit_callbacks)
    target = old_trail[1]  # observation.create, #2: scrubbed and re-chained
    assignment, value = EDITS[column]
    json_param = "%s::jsonb" if connection.vendor == "postgresql" else "%s"
    _superuser(
        f"UPDATE governance_auditevent SET {assignment.format(json=json_param)} WHERE id = %s",
        [value, target.pk],
    )

    report = audit_chain_verify(workspace_id=workspace.pk)

    assert not report.ok
    assert (report.broken_event_id, report.broken_sequence) == (target.pk, 2)


def test_a_rechained_chain_rewritten_with_the_key_is_caught_by_the_new_checkpoint(
    old_trail, workspace, django_capture_on_commit_callbacks
):
    _scrub(django_capture_on_commit_callbacks)
    _rewrite(workspace, sequence=4, after={"n": 9}, hashing=f"key:{audit_current_key().secret}")

    report = audit_chain_verify(workspace_id=workspace.pk)

    assert not report.ok and report.broken_sequence == 9
    assert "one or more of events #2 to #9 were rewritten" in report.problem


def test_a_forged_rechain_record_excuses_no_old_checkpoint(old_trail, workspace):
    # Someone with the key rewrites event #4 and recomputes the chain, then adds a
    # re-chain record naming the hashes the checkpoints hold: no audit.rechain event of
    # the chain agrees with it, so it excuses nothing.
    _rewrite(workspace, sequence=4, after={"n": 9}, hashing=f"key:{audit_current_key().secret}")
    AuditRechain.objects.create(
        workspace=workspace,
        first_sequence=1,
        last_sequence=8,
        old_hashes=[e.hash for e in old_trail],
        old_head_hash=old_trail[-1].hash,
        new_head_hash=AuditChainHead.objects.get(workspace=workspace).hash,
    )

    report = audit_chain_verify(workspace_id=workspace.pk)

    assert not report.ok and report.broken_sequence == 4
    assert "event #4 was rewritten and the chain recomputed" in report.problem


# --- PostgreSQL: the owner only ---------------------------------------------------------------


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's table owner")
def test_the_application_role_is_refused_with_what_to_do(
    old_trail, workspace, django_capture_on_commit_callbacks
):
    with connection.cursor() as cursor:
        # Rolled back with the test's transaction, as the role itself is.
        cursor.execute("CREATE ROLE memdesk_rechain_app NOLOGIN")
        cursor.execute(
            "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public "
            "TO memdesk_rechain_app"
        )
        cursor.execute(
            "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO memdesk_rechain_app"
        )
        cursor.execute("SET ROLE memdesk_rechain_app")
    state = _state(workspace)
    err = StringIO()
    try:
        with pytest.raises(CommandError, match="not scrubbed"):
            call_command("audit_scrub_texts", stdout=StringIO(), stderr=err)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET ROLE")

    assert err.getvalue() == (
        "acme: REFUSED: The database role memdesk_rechain_app does not own "
        "governance_auditevent, so it cannot switch the append-only trigger off to re-chain "
        "the events: run this command as the role that runs migrate (docs/deployment.md, "
        "'The database role').\n"
    )
    assert _state(workspace) == state
