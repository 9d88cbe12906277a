"""Message scans (ScanRequest, MessageScan, the DETECTED finding status), re-scan runs,
and redaction before observation on by default.

Policies that nobody ever edited (version 1: every save through the service bumps it)
move to the new default too: they hold the defaults only because nobody chose, and a
workspace without a policy row gets the new default on first use anyway, so leaving
them behind would make two untouched workspaces behave differently. Policies a person
saved keep what they say. Each move is written to the workspace's audit trail. The
version stays 1, so the policy still reads as never edited by a person and a later
change of defaults can follow the same rule."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

REASON = (
    "default changed: redaction before observation is on for every policy never edited, "
    "so no derived tier holds raw personal data"
)


def _append_event(apps, *, workspace_id, action, target_type, target_id, before, after, reason):
    # The audit writer's steps with the models as they are at this migration.
    from governance.audit.writer import GENESIS_HASH, _json_safe, audit_event_hash

    AuditChainHead = apps.get_model("governance", "AuditChainHead")
    AuditEvent = apps.get_model("governance", "AuditEvent")
    if any(f.name == "chain_version" for f in AuditEvent._meta.fields):
        # Run on a schema whose chain is keyed (out of order, as a test does): the live
        # writer writes the event the way every later event is written.
        from core.actors import SYSTEM_ACTOR
        from governance.audit.writer import audit_record

        audit_record(
            workspace_id=workspace_id,
            actor=SYSTEM_ACTOR,
            action=action,
            target_type=target_type,
            target_id=target_id,
            before=before,
            after=after,
            reason=reason,
        )
        return
    AuditChainHead.objects.get_or_create(
        workspace_id=workspace_id, defaults={"sequence": 0, "hash": GENESIS_HASH}
    )
    head = AuditChainHead.objects.select_for_update().get(workspace_id=workspace_id)
    event = AuditEvent(
        workspace_id=workspace_id,
        sequence=head.sequence + 1,
        actor_type="system",
        actor_id="memdesk",
        actor_role="",
        action=action,
        target_type=target_type,
        target_id=target_id,
        before=_json_safe(before),
        after=_json_safe(after),
        reason=reason,
        request_id="",
        ip_address=None,
        created_at=django.utils.timezone.now(),
        prev_hash=head.hash,
    )
    event.hash = audit_event_hash(event)
    event.save()
    AuditChainHead.objects.filter(pk=head.pk).update(sequence=event.sequence, hash=event.hash)


def private_by_default(apps, schema_editor):
    from governance.redaction.policy import redaction_policy_snapshot

    RedactionPolicy = apps.get_model("governance", "RedactionPolicy")
    for policy in RedactionPolicy.objects.filter(version=1, redact_before_observation=False):
        before = redaction_policy_snapshot(policy)
        policy.redact_before_observation = True
        policy.updated_at = django.utils.timezone.now()
        policy.save(update_fields=["redact_before_observation", "updated_at"])
        _append_event(
            apps,
            workspace_id=policy.workspace_id,
            action="redaction_policy.update",
            target_type="redaction_policy",
            target_id=str(policy.pk),
            before=before,
            after=redaction_policy_snapshot(policy),
            reason=REASON,
        )


class Migration(migrations.Migration):

    dependencies = [
        ('governance', '0002_audit_append_only_trigger'),
        ('memory', '0009_workspace_fidelity'),
    ]

    operations = [
        migrations.AlterField(
            model_name='redactionfinding',
            name='status',
            field=models.CharField(choices=[('applied', 'redacted automatically'), ('pending_review', 'waiting for review'), ('approved', 'redacted after review'), ('dismissed', 'kept after review'), ('detected', 'found in a message')], max_length=15),
        ),
        migrations.AlterField(
            model_name='redactionpolicy',
            name='redact_before_observation',
            field=models.BooleanField(default=True),
        ),
        migrations.CreateModel(
            name='MessageScan',
            fields=[
                ('message_id', models.UUIDField(primary_key=True, serialize=False)),
                ('content_digest', models.CharField(max_length=64)),
                ('policy_version', models.PositiveIntegerField()),
                ('findings', models.PositiveIntegerField(default=0)),
                ('scanned_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='message_scans', to='memory.conversation')),
                ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.workspace')),
            ],
        ),
        migrations.CreateModel(
            name='RescanRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('tiers', models.JSONField(default=list)),
                ('status', models.CharField(choices=[('pending', 'pending'), ('running', 'running'), ('completed', 'completed'), ('failed', 'failed')], default='pending', max_length=10)),
                ('reason', models.TextField()),
                ('requested_by', models.CharField(max_length=200)),
                ('counts', models.JSONField(blank=True, default=dict)),
                ('total', models.PositiveBigIntegerField(default=0)),
                ('done', models.PositiveBigIntegerField(default=0)),
                ('error', models.CharField(blank=True, default='', max_length=500)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='rescan_runs', to='memory.workspace')),
            ],
            options={
                'indexes': [models.Index(fields=['workspace', '-created_at'], name='rescan_ws_created')],
            },
        ),
        migrations.CreateModel(
            name='ScanRequest',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('first_seq', models.PositiveIntegerField()),
                ('last_seq', models.PositiveIntegerField()),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='scan_requests', to='memory.conversation')),
                ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.workspace')),
            ],
            options={
                'indexes': [models.Index(fields=['workspace', 'created_at'], name='scan_request_ws_created'), models.Index(fields=['created_at'], name='scan_request_created')],
            },
        ),
        # Irreversible in effect: going back leaves the moved policies as they are (a
        # person may have relied on them since); the audit trail says which moved.
        migrations.RunPython(private_by_default, migrations.RunPython.noop),
    ]
