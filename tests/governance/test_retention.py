"""Retention: policies per workspace and tag, dry runs, sweeps that delete expired rows in
batches, legal holds that override them, and an exact receipt for every deletion."""

from __future__ import annotations

from datetime import timedelta

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.test import override_settings
from django.utils import timezone

from core.errors import MemdeskError
from governance.holds import legal_hold_place
from governance.models import (
    MessageScan,
    RedactionFinding,
    RestrictedOriginal,
    RetentionPolicy,
    RetentionSweep,
)
from governance.retention import sweep as sweep_module
from governance.retention.plan import retention_dry_run, retention_sweep_request
from governance.retention.policies import retention_policy_create
from governance.retention.sweep import retention_schedule, retention_sweep
from governance.tasks import retention_sweep_task
from memory.models import (
    Conversation,
    Message,
    Observation,
    ObservationVersion,
    Pin,
    Reflection,
    ReflectionVersion,
)
from memory.services.pins import pin_create
from tests.governance.builders import (
    ADMIN,
    conversation_with_tiers,
    days_ago,
    earlier_reflection_version,
    earlier_version,
    events,
    ids_hash,
    redaction_traces,
    tier_rows,
)
from tests.memory.factories import ObservationFactory

# conversation_with_tiers records no reasoning and no context read: those tiers always
# count 0.
UNRECORDED = {"reasoningSteps": 0, "toolCalls": 0, "contextReads": 0}


def _default_policy(workspace, **days):
    values = {"message_days": 30, "observation_days": 60, "reflection_days": 90, **days}
    return retention_policy_create(workspace=workspace, actor=ADMIN, name="default", **values)


def _sweep(workspace, *, batch_size=1000, policy=None):
    sweep = retention_sweep_request(workspace=workspace, actor=ADMIN, policy=policy)
    return retention_sweep(sweep_id=sweep.pk, batch_size=batch_size)


def _old_rows(conversations):
    """Rows older than every period used in these tests' default policy."""
    rows = tier_rows(conversations)
    stamps = {
        "messages": dict(Message.objects.values_list("pk", "created_at")),
        "observations": dict(Observation.objects.values_list("pk", "observed_at")),
        "reflections": dict(Reflection.objects.values_list("pk", "created_at")),
    }
    cutoff = days_ago(95)
    return {
        kind: {(c, pk) for c, pk in found if stamps[kind][_uuid(pk)] < cutoff}
        for kind, found in rows.items()
    }


def _uuid(value):
    import uuid

    return uuid.UUID(value)


# --- sweeps -------------------------------------------------------------------------------------


def test_a_sweep_deletes_backdated_rows_of_every_tier_and_keeps_recent_ones(workspace):
    _default_policy(workspace)
    conversation = conversation_with_tiers(workspace, old=3, new=2, age_days=100)
    before = tier_rows([conversation])
    old = _old_rows([conversation])

    sweep = _sweep(workspace)

    after = tier_rows([conversation])
    for kind in ("messages", "observations", "reflections"):
        assert after[kind] == before[kind] - old[kind]
        assert len(after[kind]) == 2
    assert sweep.status == RetentionSweep.Status.COMPLETED
    assert sweep.counts == {"messages": 3, "observations": 3, "reflections": 3, **UNRECORDED}
    assert (sweep.done, sweep.total) == (9, 9)
    # The conversation stays, empty of expired rows; seq numbers carry on.
    assert Conversation.objects.get(pk=conversation.pk).last_seq == 5


def test_each_tier_expires_by_its_own_period_and_clock(workspace):
    _default_policy(workspace, message_days=10, observation_days=50, reflection_days=None)
    conversation = conversation_with_tiers(workspace, old=2, new=0, age_days=20)

    sweep = _sweep(workspace)

    # Messages (20 days > 10) go; observations (20 < 50) stay; reflections are kept forever.
    assert sweep.counts == {"messages": 2, "observations": 0, "reflections": 0, **UNRECORDED}
    assert not conversation.messages.exists()
    assert conversation.observations.count() == 2
    assert conversation.reflections.count() == 2


def test_the_receipts_are_exact(workspace, monkeypatch):
    _default_policy(workspace)
    conversations = [conversation_with_tiers(workspace, old=3, new=1) for _ in range(3)]
    old = _old_rows(conversations)
    deleted_ids = {kind: sorted(pk for _, pk in rows) for kind, rows in old.items()}
    # Which rows each batch deleted, as the sweep logged them (the lines its summary
    # hashes), read from its log table before the summary: the per-batch receipts must
    # hash exactly these, on either path (row ids through Python, or set-based in SQL).
    real_sha256 = sweep_module.sql.DeletedLog.sha256
    logged: list[tuple[int, str]] = []

    def recording_sha256(log):
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(f"SELECT batch, line FROM {log.table}")
            logged.extend(cursor.fetchall())
        return real_sha256(log)

    monkeypatch.setattr(sweep_module.sql.DeletedLog, "sha256", recording_sha256)

    before = tier_rows(conversations)
    sweep = _sweep(workspace, batch_size=2)
    kinds = {"message": "messages", "observation": "observations", "reflection": "reflections"}
    batches_seen: list[tuple[str, list[str]]] = []
    for batch in sorted({n for n, _ in logged}):
        lines = [line.split(":") for n, line in logged if n == batch]
        batches_seen.append((kinds[lines[0][0]], [pk for _, pk in lines]))

    assert tier_rows(conversations) == {kind: rows - old[kind] for kind, rows in before.items()}
    assert {
        kind: sorted(pk for k, ids in batches_seen if k == kind for pk in ids) for kind in old
    } == deleted_ids
    [summary] = events(workspace, "retention.sweep")
    assert summary.target_id == str(sweep.pk)
    assert summary.after["counts"] == {
        "messages": 9,
        "observations": 9,
        "reflections": 9,
        **UNRECORDED,
    }
    assert summary.after["idsSha256"] == ids_hash(deleted_ids)
    policy = RetentionPolicy.objects.get(workspace=workspace)
    assert summary.after["byPolicy"] == {
        str(policy.pk): {"messages": 9, "observations": 9, "reflections": 9, **UNRECORDED}
    }
    assert summary.after["policies"][0]["messageDays"] == 30
    assert summary.actor_type == "system"
    assert summary.after["batches"] == 15  # ceil(9 / 2) batches per tier

    # One receipt per batch, in the batch's transaction: each hashes exactly its rows.
    receipts = events(workspace, "retention.delete")
    assert [r.after["batch"] for r in receipts] == list(range(1, 16))
    assert len(receipts) == len(batches_seen)
    for receipt, (kind, ids) in zip(receipts, batches_seen, strict=True):
        assert receipt.after["kind"] == kind
        assert receipt.after["counts"][kind] == len(ids)
        assert receipt.after["idsSha256"] == ids_hash({kind: ids})
        assert receipt.after["byPolicy"] == {str(policy.pk): len(ids)}
        assert receipt.target_id == str(sweep.pk)


def test_the_dry_run_counts_what_the_sweep_then_deletes(workspace):
    _default_policy(workspace)
    retention_policy_create(
        workspace=workspace, actor=ADMIN, name="legal", conversation_tag="legal"
    )  # every tier kept forever
    retention_policy_create(
        workspace=workspace,
        actor=ADMIN,
        name="short",
        conversation_tag="short",
        message_days=5,
        observation_days=5,
        reflection_days=5,
    )
    plain = [conversation_with_tiers(workspace, old=2, new=1, age_days=a) for a in (10, 40, 100)]
    short = conversation_with_tiers(workspace, tags=["short", "x"], old=2, new=1, age_days=10)
    legal = conversation_with_tiers(workspace, tags=["legal", "short"], old=2, new=1)
    held = conversation_with_tiers(workspace, user_id="held-user", old=2, new=1)
    legal_hold_place(workspace=workspace, actor=ADMIN, reason="case 7", end_user_id="held-user")
    everything = [*plain, short, legal, held]
    before = tier_rows(everything)
    kept = tier_rows([legal, held])

    preview = retention_dry_run(workspace=workspace, actor=ADMIN)
    sweep = _sweep(workspace, batch_size=3)

    after = tier_rows(everything)
    deleted = {kind: len(before[kind] - after[kind]) for kind in before}
    assert preview.dry_run and preview.status == RetentionSweep.Status.COMPLETED
    assert preview.counts == sweep.counts == deleted
    # Plain: messages of 40 and 100 days, observations of 100 (> 60), reflections of 100
    # (> 90); short (5 days): all of its 10-day-old rows; legal outranks short; held: none.
    assert deleted == {
        "messages": 2 + 2 + 2,
        "observations": 2 + 2,
        "reflections": 2 + 2,
        **UNRECORDED,
    }
    assert preview.total == sweep.total == sweep.done == 14
    assert tier_rows([legal, held]) == kept


def test_without_a_default_policy_only_tagged_conversations_expire(workspace):
    retention_policy_create(
        workspace=workspace,
        actor=ADMIN,
        name="billing",
        conversation_tag="billing",
        message_days=30,
        observation_days=30,
        reflection_days=30,
    )
    tagged = conversation_with_tiers(workspace, tags=["billing"], old=2, new=1)
    untagged = conversation_with_tiers(workspace, tags=["support"], old=2, new=1)
    before = tier_rows([untagged])

    sweep = _sweep(workspace)

    assert sweep.counts == {"messages": 2, "observations": 2, "reflections": 2, **UNRECORDED}
    assert tier_rows([untagged]) == before
    assert {kind: len(rows) for kind, rows in tier_rows([tagged]).items()} == {
        "messages": 1,
        "observations": 1,
        "reflections": 1,
        **UNRECORDED,
    }


def test_a_policy_preview_counts_only_its_own_rows_even_while_disabled(workspace):
    _default_policy(workspace, message_days=7)
    short = retention_policy_create(
        workspace=workspace,
        actor=ADMIN,
        name="short",
        conversation_tag="short",
        message_days=5,
        enabled=False,
    )
    conversation_with_tiers(workspace, old=2, new=1, age_days=10)
    conversation_with_tiers(workspace, tags=["short"], old=3, new=1, age_days=10)

    preview = retention_dry_run(workspace=workspace, actor=ADMIN, policy=short)
    everything = retention_dry_run(workspace=workspace, actor=ADMIN)

    assert preview.counts == {"messages": 3, "observations": 0, "reflections": 0, **UNRECORDED}
    # While disabled, the tagged conversation still follows the default policy.
    assert everything.counts == {
        "messages": 2 + 3,
        "observations": 0,
        "reflections": 0,
        **UNRECORDED,
    }
    with pytest.raises(MemdeskError) as refused:
        retention_sweep_request(workspace=workspace, actor=ADMIN, policy=short)
    assert refused.value.code == "policy_disabled"


def test_held_conversations_and_held_end_users_are_kept(workspace):
    _default_policy(workspace)
    on_hold = conversation_with_tiers(workspace, user_id="alice")
    users = [conversation_with_tiers(workspace, user_id="bob") for _ in range(2)]
    free = conversation_with_tiers(workspace, user_id="carol")
    legal_hold_place(workspace=workspace, actor=ADMIN, reason="case 1", conversation=on_hold)
    legal_hold_place(workspace=workspace, actor=ADMIN, reason="case 2", end_user_id="bob")
    # A hold on an end user covers conversations that start after it, too.
    later = conversation_with_tiers(workspace, user_id="bob")
    kept = [on_hold, *users, later]
    before = tier_rows(kept)

    sweep = _sweep(workspace)

    assert tier_rows(kept) == before
    assert sweep.counts == {"messages": 3, "observations": 3, "reflections": 3, **UNRECORDED}
    assert {kind: len(rows) for kind, rows in tier_rows([free]).items()} == {
        "messages": 2,
        "observations": 2,
        "reflections": 2,
        **UNRECORDED,
    }


def test_a_hold_placed_after_the_sweep_read_its_candidates_still_wins(workspace, monkeypatch):
    _default_policy(workspace)
    conversation = conversation_with_tiers(workspace, user_id="dave", old=4, new=0)
    real_scan = sweep_module._scan
    placed = []

    def scan_then_hold(*args, **kwargs):
        for rows in real_scan(*args, **kwargs):
            if not placed:
                placed.append(
                    legal_hold_place(
                        workspace=workspace, actor=ADMIN, reason="late", end_user_id="dave"
                    )
                )
            yield rows

    monkeypatch.setattr(sweep_module, "_scan", scan_then_hold)
    sweep = _sweep(workspace)

    assert placed
    assert sweep.counts == {"messages": 0, "observations": 0, "reflections": 0, **UNRECORDED}
    assert conversation.messages.count() == 4


def test_nothing_outside_the_workspace_is_touched(workspace, other_workspace):
    _default_policy(workspace)
    theirs = conversation_with_tiers(other_workspace)
    before = tier_rows([theirs])

    _sweep(workspace)

    assert tier_rows([theirs]) == before


def test_what_hangs_off_deleted_rows_goes_with_them(workspace):
    _default_policy(workspace)
    conversation = conversation_with_tiers(workspace, old=1, new=1)
    old_message = conversation.messages.get(seq=1)
    new_message = conversation.messages.get(seq=2)
    old_observation = conversation.observations.get(observed_at__lt=days_ago(50))
    for message in (old_message, new_message):
        redaction_traces(message, text="original")
    earlier_version(old_observation, text="before the edit")
    old_reflection = conversation.reflections.get(created_at__lt=days_ago(90))
    new_reflection = conversation.reflections.exclude(pk=old_reflection.pk).get()
    for reflection in (old_reflection, new_reflection):
        earlier_reflection_version(reflection, text="before the edit")

    _sweep(workspace)

    assert list(RedactionFinding.objects.values_list("target_id", flat=True)) == [new_message.pk]
    assert list(RestrictedOriginal.objects.values_list("target_id", flat=True)) == [new_message.pk]
    assert list(MessageScan.objects.values_list("message_id", flat=True)) == [new_message.pk]
    assert not ObservationVersion.objects.exists()
    assert list(ReflectionVersion.objects.values_list("reflection_id", flat=True)) == [
        new_reflection.pk
    ]
    # The surviving observation is unlinked from its deleted reflection, not deleted.
    assert conversation.observations.count() == 1
    [message_batch] = [
        e for e in events(workspace, "retention.delete") if e.after["kind"] == "messages"
    ]
    assert message_batch.after["counts"] == {
        "messages": 1,
        "redactionFindings": 1,
        "restrictedOriginals": 1,
        "pseudonymSightings": 0,
        "pseudonymsForgotten": 0,
        "pins": 0,
        "messageScans": 1,
        "idempotencyRecords": 0,
    }


def test_a_sweep_moves_the_memory_version_but_not_the_activity_time(workspace):
    _default_policy(workspace)
    conversation = conversation_with_tiers(workspace)
    before = Conversation.objects.get(pk=conversation.pk)

    _sweep(workspace)

    after = Conversation.objects.get(pk=conversation.pk)
    assert after.memory_version > before.memory_version
    assert after.updated_at == before.updated_at


def test_a_sweep_runs_once_and_a_second_request_waits_for_the_first(workspace):
    _default_policy(workspace)
    conversation_with_tiers(workspace)
    sweep = retention_sweep_request(workspace=workspace, actor=ADMIN)
    with pytest.raises(MemdeskError) as busy:
        retention_sweep_request(workspace=workspace, actor=ADMIN)
    assert (busy.value.code, busy.value.status_code) == ("sweep_in_progress", 409)

    assert retention_sweep_task.apply(args=[sweep.pk]).get() == "completed"
    # Redelivered: the row is no longer PENDING, so nothing happens twice.
    assert retention_sweep(sweep_id=sweep.pk).status == RetentionSweep.Status.COMPLETED
    assert len(events(workspace, "retention.sweep")) == 1


def test_a_sweep_with_nothing_due_writes_no_receipt(workspace):
    _default_policy(workspace)
    conversation_with_tiers(workspace, old=0, new=2)

    sweep = _sweep(workspace)

    assert sweep.status == RetentionSweep.Status.COMPLETED
    assert sweep.counts == {"messages": 0, "observations": 0, "reflections": 0, **UNRECORDED}
    assert not events(workspace, "retention.sweep")


def test_a_sweep_marked_abandoned_stops_at_its_next_batch(workspace, monkeypatch):
    _default_policy(workspace)
    conversation_with_tiers(workspace, old=4, new=0)
    real = sweep_module._delete_batch
    calls = []

    def abandon_after_first(**kwargs):
        # After the first batch that deleted anything (on PostgreSQL a batch is a window
        # of the table, and windows of pages left by earlier tests can be empty).
        batch = real(**kwargs)
        if batch is not None and not calls:
            RetentionSweep.objects.filter(pk=kwargs["sweep"].pk).update(status="failed")
        if batch is not None:
            calls.append(batch)
        return batch

    monkeypatch.setattr(sweep_module, "_delete_batch", abandon_after_first)
    sweep = _sweep(workspace, batch_size=1)

    assert sweep.status == RetentionSweep.Status.FAILED
    assert Message.objects.count() == 3  # one batch of one, then it stopped
    assert len(events(workspace, "retention.delete")) == 1
    assert events(workspace, "retention.sweep")[0].after["counts"]["messages"] == 1


def test_a_sweep_cut_off_by_its_time_limit_keeps_its_receipts_and_says_why(workspace, monkeypatch):
    _default_policy(workspace)
    conversation_with_tiers(workspace, old=4, new=0)
    real = sweep_module._delete_batch
    calls = []

    def time_runs_out_after_first(**kwargs):
        # After the first batch that deleted anything (see the test above).
        if calls:
            raise SoftTimeLimitExceeded()
        batch = real(**kwargs)
        if batch is not None:
            calls.append(batch)
        return batch

    monkeypatch.setattr(sweep_module, "_delete_batch", time_runs_out_after_first)
    with override_settings(MEMDESK_RETENTION_SWEEP_TIME_LIMIT=120):
        sweep = _sweep(workspace, batch_size=1)

    assert sweep.status == RetentionSweep.Status.FAILED
    assert sweep.error == (
        "stopped: the sweep reached its time limit of 120 s; "
        "the next sweep deletes what is still due"
    )
    assert Message.objects.count() == 3  # the batch before the limit is deleted
    assert len(events(workspace, "retention.delete")) == 1
    assert events(workspace, "retention.sweep")[0].after["counts"]["messages"] == 1


def test_the_schedule_starts_one_sweep_per_workspace_with_an_enabled_policy(
    workspace, other_workspace
):
    _default_policy(workspace)
    retention_policy_create(
        workspace=other_workspace, actor=ADMIN, name="off", message_days=1, enabled=False
    )
    stale = RetentionSweep.objects.create(
        workspace=other_workspace,
        status=RetentionSweep.Status.RUNNING,
        started_at=timezone.now() - timedelta(hours=7),
    )

    first = retention_schedule()
    second = retention_schedule()

    assert first == {"started": 1, "abandoned": 1, "requeued": 0}
    assert second == {"started": 0, "abandoned": 0, "requeued": 0}
    assert RetentionSweep.objects.filter(workspace=workspace, status="pending").count() == 1
    stale.refresh_from_db()
    assert stale.status == RetentionSweep.Status.FAILED


def test_expired_observations_that_named_expired_messages_keep_their_provenance_ids(workspace):
    # Decision: observations outlive their source messages when their period is longer;
    # their sourceMessageIds then name deleted messages (the receipts record the deletion).
    _default_policy(workspace, message_days=30, observation_days=None, reflection_days=None)
    conversation = conversation_with_tiers(workspace, old=2, new=0)
    message_ids = [str(pk) for pk in conversation.messages.values_list("pk", flat=True)]
    observation = ObservationFactory(conversation=conversation, source_message_ids=message_ids)

    _sweep(workspace)

    observation.refresh_from_db()
    assert observation.source_message_ids == message_ids
    assert not conversation.messages.exists()


# --- the API --------------------------------------------------------------------------------------


POLICY = {"name": "default", "messageDays": 30, "observationDays": 60, "reflectionDays": None}


def test_admins_create_list_update_and_delete_policies_with_audit(admin_api, workspace):
    created = admin_api.post(
        "/v1/retention/policies", {**POLICY, "reason": "DPA 2026"}, format="json"
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body | {"id": 0, "createdAt": "", "updatedAt": ""} == {
        "id": 0,
        "name": "default",
        "conversationTag": "",
        "messageDays": 30,
        "observationDays": 60,
        "reflectionDays": None,
        "contextReadDays": None,
        "enabled": True,
        "createdAt": "",
        "updatedAt": "",
    }
    url = f"/v1/retention/policies/{body['id']}"
    assert admin_api.get("/v1/retention/policies").json()["policies"] == [body]
    assert admin_api.get(url).json() == body

    updated = admin_api.patch(url, {"messageDays": None, "enabled": False}, format="json")
    assert updated.status_code == 200
    assert (updated.json()["messageDays"], updated.json()["enabled"]) == (None, False)
    assert updated.json()["observationDays"] == 60

    assert admin_api.delete(url + "?reason=superseded").status_code == 204
    assert not RetentionPolicy.objects.exists()

    create, update, delete = (
        events(workspace, f"retention_policy.{action}")[0]
        for action in ("create", "update", "delete")
    )
    assert (create.actor_type, create.actor_role, create.reason) == ("api_key", "admin", "DPA 2026")
    assert create.after["messageDays"] == 30
    assert (update.before["messageDays"], update.after["messageDays"]) == (30, None)
    assert (delete.before["name"], delete.reason) == ("default", "superseded")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/v1/retention/policies"),
        ("post", "/v1/retention/policies"),
        ("get", "/v1/retention/policies/{id}"),
        ("patch", "/v1/retention/policies/{id}"),
        ("delete", "/v1/retention/policies/{id}"),
        ("post", "/v1/retention/dry-run"),
        ("get", "/v1/retention/sweeps"),
        ("post", "/v1/retention/sweeps"),
        ("get", "/v1/retention/sweeps/{sweep}"),
    ],
)
def test_agent_keys_are_refused_on_every_retention_route(api, workspace, method, path):
    policy = _default_policy(workspace)
    sweep = retention_dry_run(workspace=workspace, actor=ADMIN)
    url = path.format(id=policy.pk, sweep=sweep.pk)

    if method == "get":
        response = api.get(url)
    else:
        response = getattr(api, method)(url, {**POLICY, "name": "x"}, format="json")

    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"
    assert RetentionPolicy.objects.get().name == "default"
    assert not events(workspace, "retention_policy.update")


@pytest.mark.parametrize(
    ("body", "error", "field"),
    [
        ({**POLICY, "messageDays": 0}, "invalid_request", "messageDays"),
        ({**POLICY, "messageDays": "soon"}, "invalid_request", "messageDays"),
        ({**POLICY, "observationDays": 36_501}, "invalid_request", "observationDays"),
        ({**POLICY, "reflectionDays": True}, "invalid_request", "reflectionDays"),
        ({"messageDays": 3}, "invalid_request", "name"),
        ({**POLICY, "name": "   "}, "invalid_request", "name"),
        ({**POLICY, "name": "n" * 101}, "invalid_request", "name"),
        ({**POLICY, "conversationTag": 7}, "invalid_request", "conversationTag"),
        ({**POLICY, "enabled": "maybe"}, "invalid_request", "enabled"),
    ],
)
def test_bad_policy_input_is_a_400_naming_the_field(admin_api, body, error, field):
    response = admin_api.post("/v1/retention/policies", body, format="json")
    assert response.status_code == 400, response.content
    assert (response.json()["code"], response.json()["field"]) == (error, field)
    assert not RetentionPolicy.objects.exists()


def test_a_second_policy_for_the_same_tag_or_name_is_a_conflict(admin_api):
    assert admin_api.post("/v1/retention/policies", POLICY, format="json").status_code == 201
    same_tag = admin_api.post("/v1/retention/policies", {**POLICY, "name": "b"}, format="json")
    same_name = admin_api.post(
        "/v1/retention/policies", {**POLICY, "conversationTag": "eu"}, format="json"
    )
    assert (same_tag.status_code, same_tag.json()["code"]) == (409, "duplicate_policy_tag")
    assert (same_name.status_code, same_name.json()["code"]) == (409, "duplicate_policy_name")


def test_policy_routes_answer_404_and_400_for_ids_they_do_not_know(
    admin_api, other_workspace, workspace
):
    theirs = _default_policy(other_workspace)
    empty_patch = admin_api.patch(
        f"/v1/retention/policies/{_default_policy(workspace).pk}", {}, format="json"
    )
    assert empty_patch.status_code == 400
    assert empty_patch.json()["code"] == "nothing_to_change"
    assert admin_api.get(f"/v1/retention/policies/{theirs.pk}").status_code == 404
    patched = admin_api.patch(
        f"/v1/retention/policies/{theirs.pk}", {"enabled": False}, format="json"
    )
    assert patched.status_code == 404
    malformed = admin_api.get("/v1/retention/policies/abc")
    assert (malformed.status_code, malformed.json()["field"]) == (400, "policyId")
    unknown = admin_api.post("/v1/retention/dry-run", {"policyId": theirs.pk}, format="json")
    assert unknown.status_code == 404
    bad = admin_api.post("/v1/retention/sweeps", {"policyId": "all"}, format="json")
    assert (bad.status_code, bad.json()["field"]) == (400, "policyId")
    assert admin_api.get("/v1/retention/sweeps/999999").status_code == 404


def test_dry_run_then_run_now_then_follow_the_sweep(admin_api, workspace):
    _default_policy(workspace)
    conversation_with_tiers(workspace, old=3, new=1)

    preview = admin_api.post("/v1/retention/dry-run", {}, format="json")
    assert preview.status_code == 200
    assert preview.json()["dryRun"] is True
    assert preview.json()["counts"] == {
        "messages": 3,
        "observations": 3,
        "reflections": 3,
        **UNRECORDED,
    }
    assert Message.objects.count() == 4  # a dry run deletes nothing

    started = admin_api.post("/v1/retention/sweeps", {}, format="json")
    assert started.status_code == 202
    body = started.json()
    assert (body["status"], body["dryRun"], body["progress"]) == (
        "pending",
        False,
        {"done": 0, "total": 0},
    )
    again = admin_api.post("/v1/retention/sweeps", format="json")
    assert (again.status_code, again.json()["code"]) == (409, "sweep_in_progress")

    retention_sweep_task.apply(args=[body["id"]])  # what the worker does

    followed = admin_api.get(f"/v1/retention/sweeps/{body['id']}").json()
    assert followed["status"] == "completed"
    assert followed["progress"] == {"done": 9, "total": 9}
    assert followed["counts"] == preview.json()["counts"]
    assert followed["startedAt"] and followed["finishedAt"]
    listed = admin_api.get("/v1/retention/sweeps").json()["sweeps"]
    assert [s["id"] for s in listed] == [body["id"], preview.json()["id"]]
    [request] = events(workspace, "retention_sweep.request")
    assert request.actor_type == "api_key"
    # The receipts name the key that asked for the sweep.
    assert events(workspace, "retention.sweep")[0].actor_id == request.actor_id


# --- PostgreSQL: writes while a sweep runs -----------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_messages_written_during_a_sweep_are_all_still_there_after_it(workspace):
    import threading

    from django.db import connection

    from memory.services.messages import MessageInput, messages_append

    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: run with DATABASE_URL=postgres://... (CI does)")
    _default_policy(workspace)
    conversations = [
        conversation_with_tiers(workspace, old=150, new=0, with_memory=False) for _ in range(8)
    ]
    sweep = retention_sweep_request(workspace=workspace, actor=ADMIN)
    running = threading.Event()
    done = threading.Event()
    written: list[str] = []
    written_while_running: list[str] = []
    errors: list[BaseException] = []

    def write() -> None:
        try:
            n = 0
            while not done.is_set():
                conversation = conversations[n % len(conversations)]
                # Some new messages are backdated, but not past the 30-day period.
                created_at = days_ago(29) if n % 3 == 0 else None
                [message] = messages_append(
                    conversation=conversation,
                    items=[MessageInput(role="user", content=f"live {n}", created_at=created_at)],
                )
                written.append(str(message.pk))
                if running.is_set():
                    written_while_running.append(str(message.pk))
                n += 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        running.set()
        finished = retention_sweep(sweep_id=sweep.pk, batch_size=25)
    finally:
        running.clear()
        done.set()
        writer.join()
        connection.close()

    assert errors == []
    assert finished.status == RetentionSweep.Status.COMPLETED
    assert finished.counts["messages"] == 8 * 150
    assert len(written_while_running) > 10
    remaining = {str(pk) for pk in Message.objects.values_list("pk", flat=True)}
    assert remaining == set(written)
    assert not Message.objects.filter(created_at__lt=days_ago(30)).exists()


@pytest.mark.django_db(transaction=True)
def test_a_hold_committed_while_a_batch_waits_for_its_conversation_lock_wins(
    workspace, monkeypatch
):
    """The race the conversation lock closes: a hold being placed holds the lock when a
    batch has already chosen its rows; the batch waits, then must see the hold."""
    import threading
    import time

    from django.db import connection

    from governance import holds as holds_module

    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: run with DATABASE_URL=postgres://... (CI does)")
    _default_policy(workspace)
    held = conversation_with_tiers(workspace, user_id="erin", old=4, new=0, with_memory=False)
    free = conversation_with_tiers(workspace, user_id="frank", old=4, new=0, with_memory=False)
    sweep = retention_sweep_request(workspace=workspace, actor=ADMIN)
    inside = threading.Event()
    errors: list[BaseException] = []
    real_audit = holds_module.audit_record

    def slow_audit(**kwargs):
        # Inside legal_hold_place's transaction: the conversation is locked and the
        # hold written, not yet committed.
        inside.set()
        time.sleep(1.0)
        return real_audit(**kwargs)

    monkeypatch.setattr(holds_module, "audit_record", slow_audit)

    def place() -> None:
        try:
            legal_hold_place(workspace=workspace, actor=ADMIN, reason="late", conversation=held)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    placer = threading.Thread(target=place)
    placer.start()
    try:
        assert inside.wait(10)
        started = time.monotonic()
        finished = retention_sweep(sweep_id=sweep.pk, batch_size=100)
        waited = time.monotonic() - started
    finally:
        placer.join()
        connection.close()

    assert errors == []
    assert waited > 0.5  # the batch did wait for the placing transaction
    assert finished.counts["messages"] == 4
    assert held.messages.count() == 4
    assert not free.messages.exists()


def test_the_summary_hash_is_the_same_whichever_side_sorts_the_lines(workspace, monkeypatch):
    """PostgreSQL: a short log is sorted in the worker, a long one by the database and
    read through a cursor; both hash the same sorted lines."""
    _default_policy(workspace)
    conversations = [conversation_with_tiers(workspace, old=3, new=1) for _ in range(2)]
    old = _old_rows(conversations)
    monkeypatch.setattr(sweep_module.sql.DeletedLog, "SORT_IN_PYTHON", 0)
    monkeypatch.setattr(sweep_module.sql.DeletedLog, "PAGE", 4)  # several pages

    _sweep(workspace, batch_size=2)

    [summary] = events(workspace, "retention.sweep")
    assert summary.after["idsSha256"] == ids_hash(
        {kind: [pk for _, pk in rows] for kind, rows in old.items()}
    )


# --- the OpenAPI document describes these routes' real responses ------------------------------


def test_every_retention_hold_and_erasure_response_matches_the_openapi_document(
    admin_api, api, workspace
):
    from tests.openapi_document import openapi_document

    document = openapi_document()
    conversation = conversation_with_tiers(workspace, user_id="u-1")

    def check(method, path, response, status):
        assert response.status_code == status, response.content[:300]
        document.assert_documents(method, path, response)

    policies, policy = "/v1/retention/policies", "/v1/retention/policies/{policy_id}"
    created = admin_api.post(policies, POLICY, format="json")
    check("post", policies, created, 201)
    url = f"/v1/retention/policies/{created.json()['id']}"
    check("get", policies, admin_api.get(policies), 200)
    check("get", policy, admin_api.get(url), 200)
    check("patch", policy, admin_api.patch(url, {"enabled": True}, format="json"), 200)
    check("post", policies, admin_api.post(policies, POLICY, format="json"), 409)
    check("post", policies, admin_api.post(policies, {}, format="json"), 400)
    check("get", policies, api.get(policies), 403)
    check("get", policy, admin_api.get("/v1/retention/policies/999999"), 404)
    check(
        "post",
        "/v1/retention/dry-run",
        admin_api.post("/v1/retention/dry-run", {}, format="json"),
        200,
    )
    sweeps, sweep = "/v1/retention/sweeps", "/v1/retention/sweeps/{sweep_id}"
    started = admin_api.post(sweeps, {}, format="json")
    check("post", sweeps, started, 202)
    check("post", sweeps, admin_api.post(sweeps, {}, format="json"), 409)
    retention_sweep_task.apply(args=[started.json()["id"]])
    check("get", sweep, admin_api.get(f"{sweeps}/{started.json()['id']}"), 200)
    check("get", sweeps, admin_api.get(sweeps), 200)
    check("delete", policy, admin_api.delete(url), 204)

    holds, hold, release = (
        "/v1/legal-holds",
        "/v1/legal-holds/{hold_id}",
        "/v1/legal-holds/{hold_id}/release",
    )
    placed = admin_api.post(holds, {"userId": "u-1", "reason": "case"}, format="json")
    check("post", holds, placed, 201)
    hold_url = f"/v1/legal-holds/{placed.json()['id']}"
    check("get", holds, admin_api.get(holds), 200)
    check("get", hold, admin_api.get(hold_url), 200)
    # (The 409 of DELETE /v1/conversations/{id} under a hold is memory/api.py's to
    # document; tests/governance/test_holds.py checks its body.)
    assert api.delete(f"/v1/conversations/{conversation.pk}").status_code == 409
    requests_path, request_path = "/v1/erasure-requests", "/v1/erasure-requests/{request_id}"
    refused = admin_api.post(requests_path, {"userId": "u-1", "reason": "asked"}, format="json")
    check("post", requests_path, refused, 409)
    for status in (200, 409):  # released, then already released
        released = admin_api.post(f"{hold_url}/release", {"reason": "done"}, format="json")
        check("post", release, released, status)
    accepted = admin_api.post(requests_path, {"userId": "u-1", "reason": "asked"}, format="json")
    check("post", requests_path, accepted, 202)
    check("get", request_path, admin_api.get(f"{requests_path}/{accepted.json()['id']}"), 200)
    check("get", requests_path, admin_api.get(requests_path), 200)


# --- pins ---------------------------------------------------------------------------------------


def _pin_each_message(conversation):
    return {
        str(message.pk): pin_create(
            conversation=conversation, actor=ADMIN, message_id=message.pk, start=0, end=3
        ).pk
        for message in conversation.messages.all()
    }


def test_pins_go_with_their_expired_message_in_the_same_batch_and_are_counted(workspace):
    _default_policy(workspace)
    conversation = conversation_with_tiers(workspace, old=3, new=2, age_days=100)
    pins = _pin_each_message(conversation)
    old_messages = {
        str(pk) for pk in conversation.messages.filter(seq__lte=3).values_list("pk", flat=True)
    }

    sweep = _sweep(workspace, batch_size=2)

    kept = set(Pin.objects.filter(conversation=conversation).values_list("message_id", flat=True))
    assert {str(m) for m in kept} == set(pins) - old_messages
    assert len(kept) == 2
    message_batches = [
        e.after for e in events(workspace, "retention.delete") if e.after["kind"] == "messages"
    ]
    # Each batch's receipt counts the pins of the messages it deleted.
    assert [b["counts"]["pins"] for b in message_batches] == [
        b["counts"]["messages"] for b in message_batches
    ]
    [summary] = events(workspace, "retention.sweep")
    assert summary.after["related"]["pins"] == 3
    assert sweep.counts["messages"] == 3


def test_pins_of_a_held_conversation_are_not_swept(workspace):
    _default_policy(workspace)
    on_hold = conversation_with_tiers(workspace, user_id="alice", old=2, new=0)
    pins = _pin_each_message(on_hold)
    legal_hold_place(workspace=workspace, actor=ADMIN, reason="case 9", conversation=on_hold)

    _sweep(workspace)

    assert set(Pin.objects.filter(conversation=on_hold).values_list("pk", flat=True)) == set(
        pins.values()
    )


def test_message_counts_say_what_is_left_after_a_sweep(workspace, api):
    _default_policy(workspace, message_days=30, observation_days=None, reflection_days=None)
    emptied = conversation_with_tiers(workspace, old=8, new=0, with_memory=False)
    halved = conversation_with_tiers(workspace, old=2, new=3, with_memory=False)
    assert api.get(f"/v1/conversations/{emptied.pk}").json()["messageCount"] == 8

    _sweep(workspace)

    detail = api.get(f"/v1/conversations/{emptied.pk}").json()
    assert detail["messageCount"] == 0
    assert api.get(f"/v1/conversations/{emptied.pk}/messages").json()["messages"] == []
    listed = {
        c["id"]: c["messageCount"] for c in api.get("/v1/conversations").json()["conversations"]
    }
    assert listed == {str(emptied.pk): 0, str(halved.pk): 3}
    assert api.get(f"/v1/conversations/{halved.pk}").json()["messageCount"] == 3


def test_observations_name_the_sources_a_sweep_deleted(workspace, api):
    _default_policy(workspace, message_days=30, observation_days=None, reflection_days=None)
    conversation = conversation_with_tiers(workspace, old=2, new=1, with_memory=False)
    old, _, new = conversation.messages.order_by("seq")
    note = ObservationFactory(
        conversation=conversation,
        source_message_ids=[str(old.pk), str(new.pk)],
        window_start_seq=old.seq,
        window_end_seq=new.seq,
    )
    path = f"/v1/conversations/{conversation.pk}"
    assert (
        api.get(f"{path}/observations").json()["observations"][0]["deletedSourceMessageIds"] == []
    )

    _sweep(workspace)

    [listed] = api.get(f"{path}/observations").json()["observations"]
    assert listed["sourceMessageIds"] == [str(old.pk), str(new.pk)]
    assert listed["deletedSourceMessageIds"] == [str(old.pk)]
    detail = api.get(f"{path}/observations/{note.pk}").json()
    assert detail["deletedSourceMessageIds"] == [str(old.pk)]
    [served] = api.get(f"{path}/context").json()["observations"]
    assert served["deletedSourceMessageIds"] == [str(old.pk)]
    stored = {m["id"] for m in api.get(f"{path}/messages").json()["messages"]}
    assert str(old.pk) not in stored
    assert str(new.pk) in stored
