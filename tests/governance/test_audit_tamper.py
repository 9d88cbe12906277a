"""Tamper evidence that survives a database superuser: the chain is keyed with a secret
the database does not hold, and signed checkpoints of each chain head are kept outside
it. Each attack below is carried out the way someone with full write access to the
table would (the append-only trigger switched off on PostgreSQL, plain SQL on SQLite)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from core.actors import SYSTEM_ACTOR
from governance.audit.verify import audit_chain_verify
from governance.audit.writer import (
    GENESIS_HASH,
    audit_current_key,
    audit_event_hash,
    audit_key,
    audit_record,
)
from governance.checks import audit_key_check
from governance.models import AuditChainHead, AuditEvent
from tenancy.models import Workspace
from tenancy.services import workspace_get_or_create
from tests.migrations import migrate_to_latest

ROOT = Path(__file__).resolve().parents[2]
TRIGGER = "governance_auditevent_append_only"
KEY_A = "the first audit key, at least thirty-two characters long"
KEY_B = "the second audit key, also at least thirty-two characters"

Record = Callable[..., list[AuditEvent]]


@pytest.fixture
def record(django_capture_on_commit_callbacks) -> Record:
    """Append ``n`` events to ``workspace``, each in a transaction that commits (so each
    writes its checkpoint, as in production)."""

    def make(workspace: Workspace, n: int, *, start: int = 0) -> list[AuditEvent]:
        events = []
        for i in range(start, start + n):
            with django_capture_on_commit_callbacks(execute=True):
                events.append(
                    audit_record(
                        workspace_id=workspace.pk,
                        actor=SYSTEM_ACTOR,
                        action="test.event",
                        target_type="thing",
                        target_id=str(i),
                        after={"n": i, "text": "naïve café"},
                    )
                )
        return events

    return make


def _superuser(sql: str, params: list[object]) -> None:
    """Write the audit table as a database superuser can: on PostgreSQL, switch the
    append-only trigger off for the statement and back on."""
    with transaction.atomic(), connection.cursor() as cursor:
        postgres = connection.vendor == "postgresql"
        if postgres:
            # The test runs in one transaction; ALTER TABLE waits for no deferred check.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute(f"ALTER TABLE governance_auditevent DISABLE TRIGGER {TRIGGER}")
        cursor.execute(sql, params)
        if postgres:
            cursor.execute(f"ALTER TABLE governance_auditevent ENABLE TRIGGER {TRIGGER}")
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")


def _plain_sha256(event: AuditEvent) -> str:
    # What anyone can compute from the source: the unkeyed hash of the same content.
    unkeyed = copy.copy(event)
    unkeyed.chain_version = AuditEvent.ChainVersion.SHA256
    return audit_event_hash(unkeyed)


def _rewrite(
    workspace: Workspace,
    *,
    sequence: int,
    after: dict[str, object],
    hashing: str,
    through: int | None = None,
) -> None:
    """Change event #``sequence``'s ``after``, then recompute the hash of it and of every
    later event (up to #``through``) so that each link matches again, and move the chain
    head row along.

    ``hashing``: "sha256" keeps the events' scheme and key id and puts a plain SHA-256
    (an attacker without the key); "downgrade" also marks them unkeyed (version 1);
    "key:<secret>" recomputes the HMAC with that key (an attacker who holds the key but
    cannot reach the checkpoints)."""
    events = list(AuditEvent.objects.filter(workspace=workspace).order_by("sequence"))
    json_param = "%s::jsonb" if connection.vendor == "postgresql" else "%s"
    previous_hash = GENESIS_HASH
    for event in events:
        if sequence <= event.sequence <= (through or event.sequence):
            if event.sequence == sequence:
                event.after = after
            event.prev_hash = previous_hash
            if hashing == "sha256":
                event.hash = _plain_sha256(event)
            elif hashing == "downgrade":
                event.chain_version, event.key_id = AuditEvent.ChainVersion.SHA256, ""
                event.hash = audit_event_hash(event)
            else:
                event.hash = audit_event_hash(event, secret=hashing.removeprefix("key:"))
            _superuser(
                f'UPDATE governance_auditevent SET "after" = {json_param}, prev_hash = %s, '
                "hash = %s, chain_version = %s, key_id = %s WHERE id = %s",
                [
                    json.dumps(event.after),
                    event.prev_hash,
                    event.hash,
                    event.chain_version,
                    event.key_id,
                    event.pk,
                ],
            )
        previous_hash = event.hash
    if through is None:
        AuditChainHead.objects.filter(workspace=workspace).update(hash=previous_hash)


def _id(workspace: Workspace) -> object:
    # SQLite keeps a UUID as 32 hex digits, and its driver takes no UUID parameter.
    return workspace.pk.hex if connection.vendor == "sqlite" else workspace.pk


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _verify_command(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("verify_audit", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def _failing_verify_command(*args: str) -> str:
    err = StringIO()
    with pytest.raises(CommandError, match="the audit trail does not verify"):
        call_command("verify_audit", *args, stdout=StringIO(), stderr=err)
    return err.getvalue()


# --- keyed events and checkpoints ------------------------------------------------------------


def test_new_events_are_keyed_and_name_their_key(record, workspace, audit_checkpoint_path):
    events = record(workspace, 3)

    key_id = audit_current_key().id
    assert [(e.chain_version, e.key_id) for e in events] == [(2, key_id)] * 3
    assert events[0].hash != _plain_sha256(events[0])
    other_key = audit_key(KEY_A)
    assert audit_event_hash(events[0], secret=other_key.secret) != events[0].hash
    exported = AuditEvent.objects.get(pk=events[0].pk).as_dict()
    assert (exported["chainVersion"], exported["keyId"]) == (2, key_id)

    lines = _lines(audit_checkpoint_path)
    assert [(line["workspace"], line["sequence"], line["event"]) for line in lines] == [
        (str(workspace.pk), e.sequence, e.pk) for e in events
    ]
    assert [line["hash"] for line in lines] == [e.hash for e in events]
    assert {line["key"] for line in lines} == {key_id}
    # Ids, positions and hashes only: nothing of what the events say.
    assert "café" not in audit_checkpoint_path.read_text()
    report = audit_chain_verify(workspace_id=workspace.pk)
    assert report.ok and (report.checkpoints, report.checkpointed_through) == (3, 3)


def test_a_checkpoint_is_written_after_commit_and_never_for_a_rolled_back_event(
    django_capture_on_commit_callbacks, workspace, audit_checkpoint_path
):
    def one(target_id: str) -> AuditEvent:
        return audit_record(
            workspace_id=workspace.pk,
            actor=SYSTEM_ACTOR,
            action="test.event",
            target_type="thing",
            target_id=target_id,
        )

    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        kept = one("kept")
        with pytest.raises(RuntimeError), transaction.atomic():
            one("rolled back")
            raise RuntimeError("the change failed")
        # The rolled-back event's number is given again, to another event and hash.
        last = one("last")
        assert not audit_checkpoint_path.exists()  # nothing before the commit

    assert [(line["sequence"], line["hash"]) for line in _lines(audit_checkpoint_path)] == [
        (1, kept.hash),
        (2, last.hash),
    ]
    assert audit_chain_verify(workspace_id=workspace.pk).ok


def test_a_sink_that_fails_leaves_the_change_committed_and_logs_no_content(
    record, workspace, settings, tmp_path, caplog, audit_checkpoint_path
):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    settings.MEMDESK_AUDIT_CHECKPOINT_PATH = blocker / "checkpoints.jsonl"  # cannot exist

    [event] = record(workspace, 1)

    assert AuditEvent.objects.filter(pk=event.pk).exists()
    assert f"audit checkpoint not written: workspace {workspace.pk} event {event.pk}" in (
        caplog.text
    )
    assert "café" not in caplog.text
    # A sink that cannot be read fails verification; it does not pass as an empty one.
    report = audit_chain_verify(workspace_id=workspace.pk)
    assert not report.ok
    assert report.problem == (
        f"the checkpoints cannot be read from file {blocker}/checkpoints.jsonl: Not a directory"
    )
    settings.MEMDESK_AUDIT_CHECKPOINT_PATH = audit_checkpoint_path
    report = audit_chain_verify(workspace_id=workspace.pk, grace=timedelta(0))
    assert report.ok and report.checkpoints == 0 and report.uncovered_since is not None


def test_the_checkpoint_file_and_its_folders_are_created_when_missing(
    record, workspace, settings, tmp_path
):
    path = tmp_path / "var" / "audit-checkpoints" / "checkpoints.jsonl"
    settings.MEMDESK_AUDIT_CHECKPOINT_PATH = path

    record(workspace, 2)

    assert len(path.read_text().splitlines()) == 2
    assert path.stat().st_mode & 0o777 == 0o640 & ~_umask()
    assert audit_chain_verify(workspace_id=workspace.pk).checkpointed_through == 2


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


class MemorySink:
    """A sink by dotted path, as an object store's would be plugged in."""

    lines_written: list[str] = []

    def __str__(self) -> str:
        return "memory"

    def append(self, line: str) -> None:
        self.lines_written.append(line)

    def lines(self) -> Iterator[str]:
        yield from self.lines_written


def test_a_sink_named_by_its_dotted_path_receives_and_serves_the_checkpoints(
    record, workspace, settings, audit_checkpoint_path
):
    settings.MEMDESK_AUDIT_CHECKPOINT_SINK = f"{__name__}.MemorySink"
    MemorySink.lines_written = []
    events = record(workspace, 3)

    assert len(MemorySink.lines_written) == 3 and not audit_checkpoint_path.exists()
    assert audit_chain_verify(workspace_id=workspace.pk).checkpointed_through == 3
    _rewrite(workspace, sequence=2, after={"n": 0}, hashing=f"key:{audit_current_key().secret}")
    report = audit_chain_verify(workspace_id=workspace.pk)
    assert not report.ok and report.broken_event_id == events[1].pk


# --- what a superuser can do, and what verification says ---------------------------------------


def test_an_attacker_without_the_key_who_recomputes_sha256_is_named(record, workspace):
    events = record(workspace, 5)
    _rewrite(workspace, sequence=3, after={"n": 2, "text": "rewritten"}, hashing="sha256")

    report = audit_chain_verify(workspace_id=workspace.pk)
    assert not report.ok
    assert (report.broken_event_id, report.broken_sequence) == (events[2].pk, 3)
    assert report.problem.startswith(f"event {events[2].pk} (test.event, ")
    assert report.problem.endswith(
        f"does not follow event {events[1].pk}: its hash was computed with another key or "
        "its content changed after it was written"
    )
    err = _failing_verify_command()
    assert f"acme: BROKEN at event id {events[2].pk} (#3): event {events[2].pk} (" in err


def test_marking_rewritten_events_unkeyed_is_named_at_the_first_of_them(record, workspace):
    events = record(workspace, 5)
    _rewrite(workspace, sequence=3, after={"n": 2}, hashing="downgrade")

    report = audit_chain_verify(workspace_id=workspace.pk)
    assert report.broken_event_id == events[2].pk
    assert "carries an unkeyed SHA-256 hash after keyed events: it was rewritten" in (
        report.problem
    )


def test_a_whole_chain_rewritten_as_unkeyed_sha256_no_longer_matches_its_checkpoints(
    record, workspace
):
    events = record(workspace, 5)
    _rewrite(workspace, sequence=1, after={"n": 0, "text": "rewritten"}, hashing="downgrade")
    # Every link and every unkeyed hash now checks out; only the checkpoints disagree.
    assert all(
        audit_event_hash(e) == e.hash for e in AuditEvent.objects.filter(workspace=workspace)
    )

    report = audit_chain_verify(workspace_id=workspace.pk)
    assert (report.ok, report.broken_event_id, report.broken_sequence) == (
        False,
        events[0].pk,
        1,
    )
    assert report.problem.startswith("the checkpoint of ")
    assert f"says event #1 had hash {events[0].hash[:16]}…; the table now has " in report.problem
    assert report.problem.endswith(
        f"there (event {events[0].pk}): event #1 was rewritten and the chain recomputed"
    )


def test_an_attacker_with_the_key_but_not_the_checkpoints_is_caught_by_them(record, workspace):
    events = record(workspace, 5)
    _rewrite(workspace, sequence=3, after={"n": 2}, hashing=f"key:{audit_current_key().secret}")

    report = audit_chain_verify(workspace_id=workspace.pk)
    assert (report.broken_event_id, report.broken_sequence) == (events[2].pk, 3)
    assert "event #3 was rewritten and the chain recomputed" in report.problem
    assert report.checkpointed_through == 2  # the checkpoints before it still match


def test_with_one_checkpoint_the_report_gives_the_range_that_was_rewritten(workspace):
    events = [
        audit_record(
            workspace_id=workspace.pk,
            actor=SYSTEM_ACTOR,
            action="test.event",
            target_type="thing",
            target_id=str(i),
        )
        for i in range(5)
    ]
    out = StringIO()
    call_command("audit_checkpoint", stdout=out)
    assert "1 checkpoint(s) written to file " in out.getvalue()
    _rewrite(workspace, sequence=2, after={"n": 1}, hashing=f"key:{audit_current_key().secret}")

    report = audit_chain_verify(workspace_id=workspace.pk)
    assert report.broken_event_id == events[4].pk
    assert "one or more of events #1 to #5 were rewritten" in report.problem


def test_events_removed_after_a_checkpoint_are_reported(record, workspace):
    events = record(workspace, 5)
    _superuser(
        "DELETE FROM governance_auditevent WHERE sequence > 3 AND workspace_id = %s",
        [_id(workspace)],
    )
    # The superuser tidies the head row too, so only the checkpoints remember.
    AuditChainHead.objects.filter(workspace=workspace).update(sequence=3, hash=events[2].hash)

    report = audit_chain_verify(workspace_id=workspace.pk)
    assert (report.ok, report.events, report.broken_sequence) == (False, 3, 4)
    assert report.problem.startswith("the checkpoint of ")
    assert report.problem.endswith(
        f"says the chain reached event #5 (id {events[4].pk}) with hash {events[4].hash[:16]}…; "
        "the table now ends at #3: events after #3 were removed"
    )
    assert "events after #3 were removed" in _failing_verify_command("--workspace", "acme")


def test_an_edited_or_forged_checkpoint_line_is_named(record, workspace, audit_checkpoint_path):
    record(workspace, 3)
    lines = audit_checkpoint_path.read_text().splitlines()
    edited = json.loads(lines[1])
    edited["hash"] = "0" * 64
    lines[1] = json.dumps(edited)
    audit_checkpoint_path.write_text("\n".join(lines) + "\n")

    report = audit_chain_verify(workspace_id=workspace.pk)
    assert not report.ok and report.broken_event_id is None
    assert report.problem.startswith(
        f"checkpoint line 2 of file {audit_checkpoint_path} (it says: workspace {workspace.pk}, "
        "event #2, written "
    )
    assert report.problem.endswith(
        "does not carry a valid signature: the line was edited, or written by someone "
        "without the audit key"
    )
    assert report.checkpoints == 2  # the two intact lines still count

    with audit_checkpoint_path.open("a") as sink:
        sink.write("not a checkpoint at all\n")
    err = _failing_verify_command()
    assert "checkpoint line 2 of file" in err
    assert f"checkpoint line 4 of file {audit_checkpoint_path} is not a checkpoint" in err


def test_a_checkpoint_of_a_workspace_that_is_gone_is_reported(
    record, workspace, audit_checkpoint_path
):
    record(workspace, 1)
    line = json.loads(audit_checkpoint_path.read_text())
    # The superuser removes the workspace's events, its head and the workspace itself;
    # the genuine checkpoint line stays in the sink.
    _superuser("DELETE FROM governance_auditevent WHERE workspace_id = %s", [_id(workspace)])
    AuditChainHead.objects.filter(workspace=workspace).delete()
    Workspace.objects.filter(pk=workspace.pk).delete()

    err = _failing_verify_command()
    assert f"says workspace {line['workspace']} reached event #1, but no such workspace" in err


# --- chains from before keys, key rotation ---------------------------------------------------


def _legacy_events(workspace: Workspace, n: int, *, hours_ago: int = 48) -> list[AuditEvent]:
    """Events as the release before keyed chains wrote them: plain SHA-256, no key."""
    head, _ = AuditChainHead.objects.get_or_create(
        workspace=workspace, defaults={"sequence": 0, "hash": GENESIS_HASH}
    )
    events = []
    for i in range(n):
        event = AuditEvent(
            workspace=workspace,
            sequence=head.sequence + 1,
            actor_type="system",
            actor_id="system",
            action="legacy.event",
            target_type="thing",
            target_id=str(i),
            after={"n": i},
            created_at=timezone.now() - timedelta(hours=hours_ago, minutes=-i),
            prev_hash=head.hash,
            chain_version=AuditEvent.ChainVersion.SHA256,
        )
        event.hash = audit_event_hash(event)
        event.save()
        head.sequence, head.hash = event.sequence, event.hash
        head.save()
        events.append(event)
    return events


def test_unkeyed_events_from_before_followed_by_keyed_ones_verify(record, workspace):
    legacy = _legacy_events(workspace, 3)
    keyed = record(workspace, 2)

    assert [e.chain_version for e in AuditEvent.objects.order_by("sequence")] == [1, 1, 1, 2, 2]
    assert keyed[0].prev_hash == legacy[-1].hash
    report = audit_chain_verify(workspace_id=workspace.pk)
    assert report.ok and report.events == 5 and report.checkpointed_through == 5
    out, err = _verify_command("--require-checkpoints")
    assert "acme: OK, 5 events, signed checkpoints through #5 (2 checked, " in out
    assert err == ""


def test_an_unkeyed_event_from_before_is_still_protected_by_the_keyed_ones_after(record, workspace):
    legacy = _legacy_events(workspace, 3)
    keyed = record(workspace, 1)
    # Rewrite an old event and recompute the old chain: the first keyed event's HMAC
    # covers the old head's hash, so the link breaks there.
    _rewrite(workspace, sequence=2, after={"n": 9}, hashing="downgrade", through=3)

    report = audit_chain_verify(workspace_id=workspace.pk)
    assert report.broken_event_id == keyed[0].pk
    assert f"does not follow event {legacy[2].pk}" in report.problem


def test_an_edited_unkeyed_event_is_named(workspace):
    legacy = _legacy_events(workspace, 3)
    _superuser("UPDATE governance_auditevent SET reason = %s WHERE id = %s", ["x", legacy[1].pk])

    report = audit_chain_verify(workspace_id=workspace.pk)
    assert report.broken_event_id == legacy[1].pk
    assert "its content changed after it was written (its SHA-256 hash no longer matches)" in (
        report.problem
    )


def test_events_no_checkpoint_covers_are_reported_and_audit_checkpoint_covers_them(workspace):
    _legacy_events(workspace, 3)

    out, err = _verify_command()
    assert "acme: OK, 3 events, no signed checkpoint yet" in out
    assert err.startswith("acme: WARNING: events after #0 (the first written ")
    assert "are covered by no checkpoint" in err
    err = _failing_verify_command("--require-checkpoints")
    assert err.startswith("acme: UNCOVERED: events after #0 ")

    call_command("audit_checkpoint", stdout=StringIO())
    out, err = _verify_command("--require-checkpoints")
    assert "acme: OK, 3 events, signed checkpoints through #3 (1 checked, " in out
    assert err == ""


def test_events_younger_than_a_minute_are_not_yet_expected_in_the_sink(workspace):
    audit_record(
        workspace_id=workspace.pk,
        actor=SYSTEM_ACTOR,
        action="test.event",
        target_type="thing",
        target_id="1",
    )  # not committed: no checkpoint
    assert audit_chain_verify(workspace_id=workspace.pk).uncovered_since is None
    report = audit_chain_verify(workspace_id=workspace.pk, grace=timedelta(0))
    assert report.ok and report.uncovered_since is not None


def test_key_rotation_keeps_old_events_and_checkpoints_verifiable(record, workspace, settings):
    settings.MEMDESK_AUDIT_KEY = ""  # first derived from SECRET_KEY
    first = record(workspace, 2)
    settings.MEMDESK_AUDIT_KEY, settings.MEMDESK_AUDIT_OLD_KEYS = KEY_A, [settings.SECRET_KEY]
    second = record(workspace, 2, start=2)
    settings.MEMDESK_AUDIT_KEY, settings.MEMDESK_AUDIT_OLD_KEYS = (
        KEY_B,
        [
            settings.SECRET_KEY,
            KEY_A,
        ],
    )
    third = record(workspace, 1, start=4)

    key_ids = [audit_key(settings.SECRET_KEY).id, audit_key(KEY_A).id, audit_key(KEY_B).id]
    assert [e.key_id for e in first + second + third] == [key_ids[0]] * 2 + [key_ids[1]] * 2 + [
        key_ids[2]
    ]
    report = audit_chain_verify(workspace_id=workspace.pk)
    assert report.ok and (report.events, report.checkpoints) == (5, 5)

    settings.MEMDESK_AUDIT_OLD_KEYS = [settings.SECRET_KEY]  # KEY_A forgotten
    report = audit_chain_verify(workspace_id=workspace.pk)
    assert report.broken_event_id == second[0].pk
    assert (
        f"was hashed with key {key_ids[1]}, which this server does not hold: add that key to "
        "MEMDESK_AUDIT_OLD_KEYS" in report.problem
    )
    assert any(f"was signed with key {key_ids[1]}, which" in p for p in report.problems)


def test_the_migration_marks_existing_events_as_unkeyed_sha256(transactional_db):
    workspace = workspace_get_or_create(name="before")
    executor = MigrationExecutor(connection)
    before_keys = ("governance", "0004_merge_scan_and_pseudonyms")
    executor.migrate([before_keys])
    try:
        # An event written as the release before did, or as a data migration of that
        # time does: the historical model has no chain version, and the writer's hash
        # function treats it as unkeyed.
        old_apps = executor.loader.project_state(before_keys).apps
        old = old_apps.get_model("governance", "AuditEvent")(
            workspace_id=workspace.pk,
            sequence=1,
            actor_type="system",
            actor_id="system",
            action="legacy.event",
            target_type="thing",
            target_id="1",
            after={"n": 1},
            created_at=timezone.now(),
            prev_hash=GENESIS_HASH,
        )
        assert not hasattr(old, "chain_version")
        old.hash = audit_event_hash(old)
        old.save()
        old_apps.get_model("governance", "AuditChainHead").objects.create(
            workspace_id=workspace.pk, sequence=1, hash=old.hash
        )
    finally:
        # Every app back to its latest: going back on governance also unapplied what
        # depends on it in other apps (memory's migrations since, Message.name among them).
        migrate_to_latest()

    [event] = AuditEvent.objects.filter(workspace=workspace)
    assert (event.chain_version, event.key_id, event.hash) == (1, "", old.hash)
    assert audit_chain_verify(workspace_id=workspace.pk).ok


# --- the API, the setting, the deploy check --------------------------------------------------


def test_the_verify_endpoint_says_how_far_the_checkpoints_reach(
    record, make_client, workspace, audit_checkpoint_path
):
    admin_api = make_client(workspace, scope="admin")  # its key's creation is not committed
    record(workspace, 2)
    body = admin_api.get("/v1/audit/verify").json()
    assert body["ok"] is True
    assert (body["events"], body["checkpoints"], body["checkpointedThrough"]) == (3, 2, 3)

    audit_checkpoint_path.write_text(audit_checkpoint_path.read_text().replace('"v":1', '"v":2'))
    body = admin_api.get("/v1/audit/verify").json()
    assert body["ok"] is False and body["brokenEventId"] is None
    assert "is not a checkpoint" in body["problem"] and len(body["problems"]) == 2


def test_a_short_audit_key_stops_startup_with_a_sentence():
    env = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DJANGO_DEBUG"}}
    env.update(DJANGO_SETTINGS_MODULE="config.settings.base", MEMDESK_AUDIT_KEY="short")
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode != 0
    assert "MEMDESK_AUDIT_KEY must be at least 32 characters" in result.stderr


def test_the_deploy_check_warns_without_an_audit_key_of_its_own(settings):
    settings.MEMDESK_AUDIT_KEY = ""
    [warning] = audit_key_check()
    assert warning.id == "memdesk.W002" and "derived from SECRET_KEY" in warning.msg
    settings.MEMDESK_AUDIT_KEY = KEY_A
    assert audit_key_check() == []
