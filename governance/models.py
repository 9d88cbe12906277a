"""Governance: the audit trail, PII redaction, retention, legal holds and erasure.

Every change to memory writes one AuditEvent, in the same transaction as the change,
through ``governance.audit.writer.audit_record``, which also extends the workspace's hash
chain.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from django.db import models
from django.utils import timezone

from core.actors import ActorType
from memory.models import Message, Observation, Reflection


class AppendOnlyQuerySet(models.QuerySet):
    def update(self, **kwargs: object) -> int:
        raise PermissionError("Audit events are append-only: they cannot be changed.")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise PermissionError("Audit events are append-only: they cannot be deleted.")


class AuditEvent(models.Model):
    """Append-only. Each event stores the hash of the previous event of its workspace
    and its own hash over its content and that link; ``verify_audit`` walks the chain.
    On PostgreSQL a trigger rejects UPDATE and DELETE; elsewhere the model refuses.

    The hash is keyed (HMAC-SHA256 with ``MEMDESK_AUDIT_KEY``, named by ``key_id``), so
    whoever can write the table but does not hold the key cannot recompute the chain.
    Events written before keyed chains keep their plain SHA-256 and say so."""

    ActorType = ActorType

    class ChainVersion(models.IntegerChoices):
        SHA256 = 1, "SHA-256, unkeyed (events written before keyed chains)"
        HMAC_SHA256 = 2, "HMAC-SHA256 keyed with the audit key"
        HMAC_SHA256_RECHAINED = 3, "HMAC-SHA256, re-chained after its texts were scrubbed"

    workspace = models.ForeignKey(
        "tenancy.Workspace", on_delete=models.PROTECT, related_name="audit_events"
    )
    sequence = models.PositiveBigIntegerField()  # 1, 2, 3... per workspace
    actor_type = models.CharField(max_length=10, choices=ActorType.choices)
    actor_id = models.CharField(max_length=200)
    actor_role = models.CharField(max_length=50, blank=True, default="")
    action = models.CharField(max_length=100)
    target_type = models.CharField(max_length=50)
    target_id = models.CharField(max_length=200)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    reason = models.TextField(blank=True, default="")
    request_id = models.CharField(max_length=100, blank=True, default="")
    ip_address = models.GenericIPAddressField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)
    # How ``hash`` was made, and with which key: every event verifies by its own scheme.
    chain_version = models.PositiveSmallIntegerField(choices=ChainVersion.choices)
    key_id = models.CharField(max_length=16, blank=True, default="")

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "sequence"], name="audit_ws_sequence")
        ]
        indexes = [
            models.Index(fields=["workspace", "-sequence"], name="audit_ws_seq_desc"),
            models.Index(fields=["target_type", "target_id"], name="audit_target"),
            models.Index(fields=["workspace", "action"], name="audit_ws_action"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.target_type}:{self.target_id}"

    def save(self, *args: object, **kwargs: object) -> None:
        if self.pk is not None:
            raise PermissionError("Audit events are append-only: they cannot be changed.")
        super().save(*args, **kwargs)

    def delete(self, *args: object, **kwargs: object) -> tuple[int, dict[str, int]]:
        raise PermissionError("Audit events are append-only: they cannot be deleted.")

    def as_dict(self) -> dict[str, object]:
        """The event as the API lists and both JSON Lines exports write it."""
        return {
            "id": self.pk,
            "sequence": self.sequence,
            "actorType": self.actor_type,
            "actorId": self.actor_id,
            "actorRole": self.actor_role,
            "action": self.action,
            "targetType": self.target_type,
            "targetId": self.target_id,
            "before": self.before,
            "after": self.after,
            "reason": self.reason,
            "requestId": self.request_id,
            "ipAddress": self.ip_address,
            "createdAt": self.created_at.isoformat(),
            "prevHash": self.prev_hash,
            "hash": self.hash,
            "chainVersion": self.chain_version,
            "keyId": self.key_id,
        }


class AuditChainHead(models.Model):
    """The last event of each workspace's chain. Appending locks this row, so two
    concurrent events can never claim the same predecessor."""

    workspace = models.OneToOneField(
        "tenancy.Workspace", on_delete=models.PROTECT, primary_key=True, related_name="+"
    )
    sequence = models.PositiveBigIntegerField(default=0)
    hash = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"audit head {self.workspace_id} #{self.sequence}"


class AuditRechain(models.Model):
    """One re-chain of a workspace's audit events (``audit_scrub_texts``): the memory
    texts of stored events were replaced by their digests, and the events from
    ``first_sequence`` to ``last_sequence`` were hashed again. ``old_hashes`` are their
    hashes before, in sequence order: what the signed checkpoints written before the
    re-chain name, so those checkpoints still verify, while the texts are gone. The
    ``audit.rechain`` event that follows the range in the chain holds a digest of this
    row, and verification trusts the row only when that event agrees with it."""

    workspace = models.ForeignKey("tenancy.Workspace", on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    first_sequence = models.PositiveBigIntegerField()
    last_sequence = models.PositiveBigIntegerField()
    old_hashes = models.JSONField()
    old_head_hash = models.CharField(max_length=64)
    new_head_hash = models.CharField(max_length=64)

    objects = AppendOnlyQuerySet.as_manager()

    def __str__(self) -> str:
        return f"audit re-chain {self.workspace_id} #{self.first_sequence}-#{self.last_sequence}"

    def save(self, *args: object, **kwargs: object) -> None:
        if self.pk is not None:
            raise PermissionError("Audit re-chains are append-only: they cannot be changed.")
        super().save(*args, **kwargs)

    ACTION = "audit.rechain"

    def summary(self) -> dict[str, object]:
        """What the ``audit.rechain`` event records of this row (with its counts): the
        range, both heads and a digest of the old hashes."""
        old_hashes = json.dumps(self.old_hashes, separators=(",", ":")).encode()
        return {
            "firstSequence": self.first_sequence,
            "lastSequence": self.last_sequence,
            "oldHeadHash": self.old_head_hash,
            "newHeadHash": self.new_head_hash,
            "oldHashesDigest": hashlib.sha256(old_hashes).hexdigest(),
        }


# --- redaction --------------------------------------------------------------------------------


class RedactionPolicy(models.Model):
    class Operator(models.TextChoices):
        PSEUDONYM = "pseudonym", "pseudonym <ENTITY_TYPE_n>, stable in the workspace"
        REPLACE = "replace", "replace with <ENTITY_TYPE>"
        MASK = "mask", "mask characters"
        HASH = "hash", "hash"
        REDACT = "redact", "remove"
        KEEP = "keep", "keep"

    workspace = models.OneToOneField(
        "tenancy.Workspace", on_delete=models.CASCADE, related_name="redaction_policy"
    )
    # Presidio entity types to detect; empty means the engine's default set.
    entities = models.JSONField(default=list, blank=True)
    score_threshold = models.FloatField(default=0.5)
    # {"EMAIL_ADDRESS": "mask", ...}; entities not named use default_operator.
    operators = models.JSONField(default=dict, blank=True)
    default_operator = models.CharField(
        max_length=10, choices=Operator.choices, default=Operator.PSEUDONYM
    )
    allow_list = models.JSONField(default=list, blank=True)  # never redacted
    deny_list = models.JSONField(default=list, blank=True)  # always redacted
    # [{"name", "entity", "pattern", "score", "context": [...]}]
    custom_recognizers = models.JSONField(default=list, blank=True)
    # Findings scoring in [review_min_score, review_max_score) wait for a person.
    review_min_score = models.FloatField(default=0.4)
    review_max_score = models.FloatField(default=0.7)
    redact_at_ingest = models.BooleanField(default=False)
    # On by default: the Observer reads messages with their findings replaced, so no
    # derived tier holds a raw value. The stored messages stay as written (masked by
    # role in the dashboard); redact_at_ingest is the switch that rewrites them.
    redact_before_observation = models.BooleanField(default=True)
    reflection_waits_for_review = models.BooleanField(default=False)
    keep_originals = models.BooleanField(default=False)  # else originals are destroyed
    # API keys read memory with pseudonyms replaced by the values they stand for (the
    # agent already reads the raw recent messages); off, they read the pseudonyms.
    agents_see_reidentified = models.BooleanField(default=False)
    version = models.PositiveIntegerField(default=1)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"redaction policy of {self.workspace_id} v{self.version}"


class RedactionFinding(models.Model):
    """One detected entity: where, what type, how sure, and what was done. Never the
    value itself."""

    class Status(models.TextChoices):
        APPLIED = "applied", "redacted automatically"
        PENDING_REVIEW = "pending_review", "waiting for review"
        APPROVED = "approved", "redacted after review"
        DISMISSED = "dismissed", "kept after review"
        # Found in a message by the scan; the message keeps the value (masked for viewers
        # and reviewers, replaced in what the Observer reads).
        DETECTED = "detected", "found in a message"

    class TargetType(models.TextChoices):
        MESSAGE = "message", "message"
        OBSERVATION = "observation", "observation"
        REFLECTION = "reflection", "reflection"

    workspace = models.ForeignKey("tenancy.Workspace", on_delete=models.CASCADE)
    conversation = models.ForeignKey(
        "memory.Conversation", on_delete=models.CASCADE, related_name="redaction_findings"
    )
    target_type = models.CharField(max_length=12, choices=TargetType.choices)
    target_id = models.UUIDField()
    entity_type = models.CharField(max_length=50)
    # Offsets in the text as stored after the pass that recorded the finding: the
    # replacement for applied findings, the value itself for pending and detected ones.
    start = models.PositiveIntegerField()
    end = models.PositiveIntegerField()
    score = models.FloatField()
    operator = models.CharField(max_length=10, choices=RedactionPolicy.Operator.choices)
    status = models.CharField(max_length=15, choices=Status.choices)
    policy_version = models.PositiveIntegerField()
    recognizer = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    reviewed_by = models.CharField(max_length=200, blank=True, default="")
    reviewed_at = models.DateTimeField(null=True, blank=True)
    # The pseudonym the value became (or, pending review, becomes if approved), when the
    # operator is "pseudonym": its label, never its value.
    pseudonym = models.ForeignKey(
        "Pseudonym",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="findings",
    )

    class Meta:
        indexes = [
            models.Index(fields=["workspace", "status"], name="finding_ws_status"),
            models.Index(fields=["target_type", "target_id"], name="finding_target"),
            models.Index(fields=["conversation", "status"], name="finding_conv_status"),
        ]

    def __str__(self) -> str:
        return f"{self.entity_type} in {self.target_type} {self.target_id} ({self.status})"


class RestrictedOriginal(models.Model):
    """Text as it was before redaction, kept only when the policy says so; readable only
    by the compliance role, and every read is audited."""

    workspace = models.ForeignKey("tenancy.Workspace", on_delete=models.CASCADE)
    conversation = models.ForeignKey(
        "memory.Conversation", on_delete=models.CASCADE, related_name="restricted_originals"
    )
    target_type = models.CharField(max_length=12, choices=RedactionFinding.TargetType.choices)
    target_id = models.UUIDField()
    text = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["target_type", "target_id"], name="original_target")]

    def __str__(self) -> str:
        return f"original of {self.target_type} {self.target_id}"


class Pseudonym(models.Model):
    """What one ``<ENTITY_TYPE_n>`` stands for in a workspace: the value, encrypted, and
    a keyed digest of its normalised form to find it again (governance/redaction/pseudonyms.py).

    Numbers count per workspace and entity type in order of first sight and are never
    given twice: when the last raw message holding the value is deleted, the value and
    its digest are erased and the row stays as a tombstone (``forgotten_at``), so the
    pseudonyms left in derived memory are anonymous and no new value takes their number.
    """

    workspace = models.ForeignKey(
        "tenancy.Workspace", on_delete=models.CASCADE, related_name="pseudonyms"
    )
    entity_type = models.CharField(max_length=50)
    number = models.PositiveIntegerField()
    # HMAC-SHA256 of workspace, entity type and normalised value; empty once forgotten.
    digest = models.CharField(max_length=64, blank=True, default="")
    # A Fernet token of the value as first seen (or the full name a first name said alone
    # turned out to be, redaction/pseudonyms.py); empty once forgotten.
    value_encrypted = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    forgotten_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "entity_type", "number"], name="pseudonym_ws_type_number"
            ),
            models.UniqueConstraint(
                fields=["workspace", "digest"],
                condition=~models.Q(digest=""),
                name="pseudonym_ws_digest",
            ),
        ]
        indexes = [
            models.Index(
                fields=["workspace"],
                condition=models.Q(forgotten_at__isnull=False),
                name="pseudonym_ws_forgotten",
            ),
        ]

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        return f"<{self.entity_type}_{self.number}>"

    @property
    def is_held(self) -> bool:
        return self.forgotten_at is None


class PseudonymSighting(models.Model):
    """A raw object that holds a pseudonym's value: a message (or, for a value that came
    from no message, the observation or reflection it was found in). A pseudonym is held
    while one of its sightings is; deleting the last one forgets it."""

    pseudonym = models.ForeignKey(Pseudonym, on_delete=models.CASCADE, related_name="sightings")
    conversation = models.ForeignKey(
        "memory.Conversation", on_delete=models.CASCADE, related_name="pseudonym_sightings"
    )
    target_type = models.CharField(max_length=12, choices=RedactionFinding.TargetType.choices)
    target_id = models.UUIDField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["pseudonym", "target_type", "target_id"], name="sighting_unique"
            )
        ]
        indexes = [models.Index(fields=["target_type", "target_id"], name="sighting_target")]

    def __str__(self) -> str:
        return f"pseudonym {self.pseudonym_id} in {self.target_type} {self.target_id}"


class ScanRequest(models.Model):
    """Messages waiting for the scan: one row per write (its messages have consecutive
    seq numbers in one conversation), inserted in the write's transaction and deleted
    once its messages are scanned. The periodic sweep sends again the rows whose task
    was lost. One row per write, not per message: the write path pays one insert."""

    workspace = models.ForeignKey("tenancy.Workspace", on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey(
        "memory.Conversation", on_delete=models.CASCADE, related_name="scan_requests"
    )
    first_seq = models.PositiveIntegerField()
    last_seq = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["workspace", "created_at"], name="scan_request_ws_created"),
            models.Index(fields=["created_at"], name="scan_request_created"),
        ]

    def __str__(self) -> str:
        return f"scan of {self.conversation_id} #{self.first_seq}-{self.last_seq}"


class MessageScan(models.Model):
    """A message the scan has read. Its findings are RedactionFinding rows (status
    DETECTED); this row says whether they describe the message as it is now: the keyed
    digest of the content they were found in, and the policy version that found them.
    Keyed by the message id, without a foreign key: the retention sweep deletes
    messages with raw SQL and deletes their scans itself, as it does their findings."""

    message_id = models.UUIDField(primary_key=True)
    workspace = models.ForeignKey("tenancy.Workspace", on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey(
        "memory.Conversation", on_delete=models.CASCADE, related_name="message_scans"
    )
    content_digest = models.CharField(max_length=64)
    policy_version = models.PositiveIntegerField()
    findings = models.PositiveIntegerField(default=0)
    scanned_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"scan of message {self.message_id}"


class RescanRun(models.Model):
    """One re-scan of a workspace's stored memory under its current policy (started
    from the dashboard or by ``rescan_redaction``), with its progress."""

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        RUNNING = "running", "running"
        COMPLETED = "completed", "completed"
        FAILED = "failed", "failed"

    OPEN_STATUSES = (Status.PENDING, Status.RUNNING)

    workspace = models.ForeignKey(
        "tenancy.Workspace", on_delete=models.CASCADE, related_name="rescan_runs"
    )
    tiers = models.JSONField(default=list)  # ["messages", "observations", "reflections"]
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    reason = models.TextField()
    requested_by = models.CharField(max_length=200)
    # The requester's role when they asked: the worker's events carry it.
    requested_by_role = models.CharField(max_length=50, blank=True, default="")
    # {"messages": {"total": n, "scanned": n, "findings": n, "skipped": n}, ...}
    counts = models.JSONField(default=dict, blank=True)
    total = models.PositiveBigIntegerField(default=0)  # objects to scan, every tier
    done = models.PositiveBigIntegerField(default=0)
    error = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    # Moved on with every batch: a RUNNING run that stops moving lost its worker.
    updated_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["workspace", "-created_at"], name="rescan_ws_created")]

    def __str__(self) -> str:
        return f"rescan {self.pk} ({self.status})"

    @property
    def is_open(self) -> bool:
        return self.status in self.OPEN_STATUSES


# --- retention, holds, erasure ----------------------------------------------------------------


class RetentionPolicy(models.Model):
    workspace = models.ForeignKey(
        "tenancy.Workspace", on_delete=models.CASCADE, related_name="retention_policies"
    )
    name = models.CharField(max_length=100)
    # Only conversations whose tags include this one; blank means every conversation.
    conversation_tag = models.CharField(max_length=100, blank=True, default="")
    # Days to keep each tier; null keeps it forever.
    message_days = models.PositiveIntegerField(null=True, blank=True)
    observation_days = models.PositiveIntegerField(null=True, blank=True)
    reflection_days = models.PositiveIntegerField(null=True, blank=True)
    # The read ledger's rows (``ContextRead``): how long the record of what agents were
    # served is kept, apart from what they were served.
    context_read_days = models.PositiveIntegerField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name"], name="retention_ws_name")
        ]

    def __str__(self) -> str:
        return self.name


class RetentionSweep(models.Model):
    """One run of the retention sweep (or a dry run), with its progress and counts."""

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        RUNNING = "running", "running"
        COMPLETED = "completed", "completed"
        FAILED = "failed", "failed"

    workspace = models.ForeignKey(
        "tenancy.Workspace", on_delete=models.CASCADE, related_name="retention_sweeps"
    )
    policy = models.ForeignKey(
        RetentionPolicy, null=True, blank=True, on_delete=models.SET_NULL, related_name="sweeps"
    )
    dry_run = models.BooleanField(default=False)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    # {"messages": n, "observations": n, "reflections": n}: to delete (dry run) or deleted.
    counts = models.JSONField(default=dict, blank=True)
    total = models.PositiveBigIntegerField(default=0)  # rows due when the sweep started
    done = models.PositiveBigIntegerField(default=0)  # rows deleted so far
    triggered_by = models.CharField(max_length=200, blank=True, default="")
    # The requester's role when they asked: the worker's events carry it.
    triggered_by_role = models.CharField(max_length=50, blank=True, default="")
    error = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"retention sweep {self.pk} ({self.status})"


class LegalHold(models.Model):
    """Overrides every retention rule and blocks deletion of a conversation, or of every
    conversation of an end user, until released."""

    workspace = models.ForeignKey(
        "tenancy.Workspace", on_delete=models.CASCADE, related_name="legal_holds"
    )
    # Exactly one of the two is set.
    conversation = models.ForeignKey(
        "memory.Conversation",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="legal_holds",
    )
    end_user_id = models.CharField(max_length=255, blank=True, default="")
    reason = models.TextField()
    placed_by = models.CharField(max_length=200)
    placed_at = models.DateTimeField(default=timezone.now)
    released_by = models.CharField(max_length=200, blank=True, default="")
    released_at = models.DateTimeField(null=True, blank=True)
    release_reason = models.TextField(blank=True, default="")

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(conversation__isnull=False, end_user_id="")
                    | models.Q(conversation__isnull=True) & ~models.Q(end_user_id="")
                ),
                name="hold_targets_one_thing",
            )
        ]
        indexes = [
            models.Index(fields=["workspace", "end_user_id"], name="hold_ws_user"),
        ]

    def __str__(self) -> str:
        return f"hold on {self.conversation_id or self.end_user_id}"

    @property
    def is_active(self) -> bool:
        return self.released_at is None


class ErasureRequest(models.Model):
    """Right to be forgotten: delete every tier of one end user's memory."""

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        RUNNING = "running", "running"
        COMPLETED = "completed", "completed"
        REFUSED = "refused", "refused (legal hold)"
        FAILED = "failed", "failed"

    workspace = models.ForeignKey(
        "tenancy.Workspace", on_delete=models.CASCADE, related_name="erasure_requests"
    )
    end_user_id = models.CharField(max_length=255)
    reason = models.TextField()
    requested_by = models.CharField(max_length=200)
    # The requester's role when they asked: the worker's events carry it.
    requested_by_role = models.CharField(max_length=50, blank=True, default="")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    counts = models.JSONField(default=dict, blank=True)
    error = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"erasure {self.pk} ({self.status})"


# Which field of which memory model holds a redaction target's text.
REDACTION_TARGETS: dict[str, tuple[type[Message | Observation | Reflection], str]] = {
    RedactionFinding.TargetType.MESSAGE: (Message, "content"),
    RedactionFinding.TargetType.OBSERVATION: (Observation, "text"),
    RedactionFinding.TargetType.REFLECTION: (Reflection, "text"),
}


class ContextRead(models.Model):
    """One context served to an agent, over REST or MCP: the read ledger. What proves which
    context entered an agent for a request: who read it (the key and its scope), how
    (format, budget, the query's digest), from which versions of the conversation
    (``memory_version``, ``last_seq``) and the SHA-256 of the body served, or named by a
    304. Ids, digests and counts only; the rows go with their conversation.

    Written in batches by each web worker (governance/ledger/buffer.py), never in the
    request: ``writer`` names the process and ``writer_seq`` numbers its reads, so a gap
    shows a read whose row is not there (lost, or gone with its conversation)."""

    class Edge(models.TextChoices):
        REST = "rest", "REST"
        MCP = "mcp", "MCP"

    # A UUID as every tier retention sweeps and erasure hashes has (their lines, their
    # SQL); the order of reads is served_at, then writer_seq.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey("tenancy.Workspace", on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey(
        "memory.Conversation", on_delete=models.CASCADE, related_name="context_reads"
    )
    served_at = models.DateTimeField()
    api_key = models.ForeignKey(
        "tenancy.ApiKey", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    key_scope = models.CharField(max_length=10)
    edge = models.CharField(max_length=4, choices=Edge.choices)
    format = models.CharField(max_length=10)
    max_tokens = models.PositiveIntegerField(null=True)
    # The keyed digest of the question asked with the read (``audit_text_digest``); "" without.
    query_digest = models.CharField(max_length=64, blank=True, default="")
    recall = models.PositiveSmallIntegerField(null=True)
    memory_version = models.PositiveIntegerField()
    last_seq = models.PositiveIntegerField()
    body_sha256 = models.CharField(max_length=64)
    # With a query: the SHA-256 of the body before its recalled section was added (the
    # context a rebuild can check; the ledger keeps no question to recall again). "" without.
    base_sha256 = models.CharField(max_length=64, blank=True, default="")
    token_count = models.PositiveIntegerField(null=True)
    status = models.PositiveSmallIntegerField()  # 200, or 304 (the caller had the body)
    # Whether the body held values in place of pseudonyms (the policy let agents see
    # them), and the shape's version (memory.context.caches.RENDER_VERSION): what a
    # rebuild must render with.
    reidentified = models.BooleanField(default=False)
    render_version = models.PositiveSmallIntegerField(default=0)
    writer = models.CharField(max_length=100)
    writer_seq = models.PositiveBigIntegerField()

    class Meta:
        indexes = [
            models.Index(fields=["conversation", "served_at"], name="context_read_conv_served"),
            models.Index(fields=["workspace", "served_at"], name="context_read_ws_served"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["writer", "writer_seq"], name="context_read_writer_seq")
        ]

    def __str__(self) -> str:
        return f"context read {self.pk} of {self.conversation_id}"

    def as_dict(self) -> dict[str, Any]:
        """The row as the API and the audit export show it."""
        return {
            "id": str(self.pk),
            "conversationId": str(self.conversation_id),
            "servedAt": self.served_at.isoformat(),
            "apiKeyId": str(self.api_key_id) if self.api_key_id else None,
            "keyScope": self.key_scope,
            "edge": self.edge,
            "format": self.format,
            "maxTokens": self.max_tokens,
            "queryDigest": self.query_digest or None,
            "recall": self.recall,
            "memoryVersion": self.memory_version,
            "lastSeq": self.last_seq,
            "bodySha256": self.body_sha256,
            "baseSha256": self.base_sha256 or None,
            "tokenCount": self.token_count,
            "status": self.status,
            "reidentified": self.reidentified,
            "renderVersion": self.render_version,
            "writer": self.writer,
            "writerSeq": self.writer_seq,
        }


class ContextManifest(models.Model):
    """What a memory version of a conversation served: its pins, and its reflections and
    observations each at its note version (memory/context/rebuild.py's ``Manifest``),
    from which the read ledger's rows are rendered again. Ids and numbers only; noted by
    the worker that first renders the version's memory block, written with the ledger's
    batches; goes with the conversation, and with the ledger rows that name it."""

    conversation = models.ForeignKey(
        "memory.Conversation", on_delete=models.CASCADE, related_name="+"
    )
    memory_version = models.PositiveIntegerField()
    noted_at = models.DateTimeField()
    manifest = models.JSONField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "memory_version"], name="context_manifest_version"
            )
        ]

    def __str__(self) -> str:
        return f"manifest of {self.conversation_id} at memory version {self.memory_version}"
