"""The redaction gates the memory pipeline calls: at ingest, after the write (the scan),
before the Observer and before the Reflector. A gate that cannot let a run through
raises ``RedactionGateError``; the caller decides what that means for its run."""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from django.conf import settings
from django.utils import timezone

from core.actors import SYSTEM_ACTOR, Actor
from core.errors import MemdeskError
from core.inserts import insert
from core.queue import enqueue_on_commit_unless_queued
from governance.audit.writer import audit_record
from governance.models import (
    MessageScan,
    Pseudonym,
    RedactionFinding,
    RedactionPolicy,
    ScanRequest,
)
from governance.redaction import presidio, scan
from governance.redaction.labels import labels_in, well_formed
from governance.redaction.policy import redaction_policy_get_or_create
from governance.redaction.pseudonyms import (
    WorkspacePseudonyms,
    pseudonym_ids_seen_in,
    pseudonym_sightings_record,
    pseudonyms_forget_unheld,
)
from governance.redaction.reveal import Reidentifier
from governance.redaction.speakers import (
    conversation_speakers,
    roles_among,
    speaker_redacted,
)
from governance.redaction.targets import (
    RedactionConflict,
    finding_rows,
    finding_summary,
    keep_original,
    pseudonym_values,
    redact_targets,
)
from memory.engines.base import DraftObservation, DraftReflection
from memory.models import Conversation, Message, Observation, Reflection


class RedactionGateError(Exception):
    """A gate cannot let a pipeline run through now; ``retryable`` says whether the same
    run may pass later (a pending review, a concurrent edit)."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


def redaction_gate_for_reflection(
    *, conversation: Conversation, observations: Sequence[Observation]
) -> dict[str, str]:
    """The gate in front of the Reflector: redact the observations it is about to read
    (storing the redacted text, the findings, and the originals per policy) and return
    the text it may read, by observation id, with findings pending review masked too.

    Raises RedactionGateError (retryable), so the run goes back to PENDING, while the policy
    makes reflection wait for reviews and one is pending in this conversation, and when
    an observation was edited during the redaction."""
    policy = redaction_policy_get_or_create(workspace_id=conversation.workspace_id)
    # "Marketing said ...": a speaker named for a role is no one in the notes either.
    roles = roles_among(conversation_speakers(conversation.pk))
    try:
        texts = redact_targets(
            target_type=RedactionFinding.TargetType.OBSERVATION,
            targets=observations,
            policy=policy,
            allow=roles,
        )
    except RedactionConflict:
        raise RedactionGateError(
            "an observation changed while it was being redacted; the run will retry",
            retryable=True,
        ) from None
    if policy.reflection_waits_for_review:
        pending = RedactionFinding.objects.filter(
            conversation_id=conversation.pk, status=RedactionFinding.Status.PENDING_REVIEW
        ).count()
        if pending:
            raise RedactionGateError(
                f"reflection waits for {pending} redaction finding(s) pending review "
                "(the workspace's policy); the run will retry",
                retryable=True,
            )
    return texts


def observations_pending_review(*, observation_ids: Collection[str]) -> set[str]:
    """The observations among these with a personal-data finding awaiting review (staged
    approval holds back a reflection made from one: memory/approval/flags.py)."""
    if not observation_ids:
        return set()
    return {
        str(target)
        for target in RedactionFinding.objects.filter(
            target_type=RedactionFinding.TargetType.OBSERVATION,
            target_id__in=list(observation_ids),
            status=RedactionFinding.Status.PENDING_REVIEW,
        ).values_list("target_id", flat=True)
    }


def redaction_gate_for_written_note(*, note: Observation | Reflection, actor: Actor) -> None:
    """The gate in front of a note a person or an agent typed (added, edited or reverted
    to), called in the transaction that stored it and before its audit event: the note
    is redacted in place as the Observer's and the Reflector's notes are, with the same
    findings, sightings and kept originals (``redact_targets``), so no derived tier holds
    a value the policy redacts whichever door it came in by. An observation is redacted
    when the policy redacts before observation (the default); a reflection always, as
    the gate before the Reflector redacts what becomes a reflection. A finding in the
    policy's review band is applied at once: a typed note has no stored original to
    serve masked while it waits, so waiting would serve the value. ``note`` is updated
    in memory with the stored text.

    Raises RedactionGateError when a pseudonym the text uses was forgotten meanwhile
    (an erasure running at the same moment); the caller's transaction rolls back."""
    policy = redaction_policy_get_or_create(workspace_id=note.conversation.workspace_id)
    is_reflection = isinstance(note, Reflection)
    if not (is_reflection or policy.redact_before_observation):
        return
    roles = roles_among(conversation_speakers(note.conversation_id))
    try:
        redact_targets(
            target_type=(
                RedactionFinding.TargetType.REFLECTION
                if is_reflection
                else RedactionFinding.TargetType.OBSERVATION
            ),
            targets=[note],
            policy=policy,
            actor=actor,
            allow=roles,
            review=False,
        )
    except RedactionConflict:
        raise RedactionGateError(
            "the note changed or a pseudonym it uses was forgotten while it was being "
            "redacted; send it again",
            retryable=True,
        ) from None


def conversations_with_pii(*, conversation_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Which of these conversations hold detected personal data: any finding a person
    did not dismiss, in any tier, redacted or not (the dashboard's "PII found")."""
    return set(
        RedactionFinding.objects.filter(conversation_id__in=conversation_ids)
        .exclude(status=RedactionFinding.Status.DISMISSED)
        .values_list("conversation_id", flat=True)
        .distinct()
    )


def _typed_redaction(*, workspace_id: uuid.UUID, texts: Sequence[str]) -> list[str]:
    """``texts`` with what the workspace's policy finds replaced by its operators, the
    pseudonym operator by the entity type (``<CREDIT_CARD>``), pending findings
    included. For rows that are no redaction target (no findings, no sightings are
    recorded for them): no pseudonym is numbered for a value they hold. Empty texts
    do not load the engine."""
    if not any(texts):
        return list(texts)
    policy = redaction_policy_get_or_create(workspace_id=workspace_id)
    return _typed_redaction_under(policy, texts)


def _typed_redaction_under(policy: RedactionPolicy, texts: Sequence[str]) -> list[str]:
    """``_typed_redaction`` under a policy the caller has read already."""
    if not any(texts):
        return list(texts)
    spec = presidio.PolicySpec.of(policy)
    detections = presidio.engine().detect(
        list(texts), spec=spec, known=WorkspacePseudonyms(policy.workspace_id, allocate=False)
    )
    redacted = []
    for text, found in zip(texts, detections, strict=True):
        typed = [replace(d, operator="replace") if d.operator == "pseudonym" else d for d in found]
        redacted.append(presidio.redact_text(text, typed, spec=spec).engine_text)
    return redacted


@dataclass(frozen=True)
class ObserverReading:
    """What the Observer reads of one window, decided by one read of the policy.
    ``contents``, ``speakers`` and ``tool_outputs`` are in the order they were given:
    ``speakers`` holds each message's speaker's name as the engine may read it ("" for
    none): as stored, or, when the contents are redacted, redacted the same way (the
    pseudonym the contents give that person). The policy is kept for
    ``observer_run_summary``, so a run reads it once."""

    contents: tuple[str, ...]
    speakers: tuple[str, ...]
    tool_outputs: tuple[str, ...]
    redacts: bool
    policy: RedactionPolicy | None


def observer_reading(
    *, conversation: Conversation, messages: Sequence[Message], tool_outputs: Sequence[str]
) -> ObserverReading:
    """The Observer's gate, in one call and one query of the policy: what it reads of
    ``messages`` (contents and speakers' names) and of the window's tool calls'
    ``tool_outputs``. When the policy redacts before observation (a workspace with no
    policy row yet has the defaults, which do, stored as ``redaction_policy_get_or_create``
    does once there is something to redact), each message with its findings replaced by
    the policy's operators (the scan's findings when the scan is current, else it scans
    them first, recording the findings as the scan task would; the stored messages are
    not changed), each speaker's name redacted the same way, and the tool output with
    its values replaced by their entity type. Otherwise the texts and names as stored,
    without loading the engine. Raises ``RedactionGateError`` (retryable) when a message
    changed while it was being scanned."""
    policy = RedactionPolicy.objects.filter(workspace_id=conversation.workspace_id).first()
    redacts = (policy or RedactionPolicy()).redact_before_observation
    if redacts and policy is None and (messages or any(tool_outputs)):
        policy = redaction_policy_get_or_create(workspace_id=conversation.workspace_id)
    contents = [m.content for m in messages]
    speakers = [m.name for m in messages]
    outputs = list(tool_outputs)
    if redacts and policy is not None:
        if messages:
            try:
                contents, speakers = scan.observer_texts(policy=policy, messages=messages)
            except scan.ScanConflict:
                raise RedactionGateError(
                    "a message changed while it was being scanned; the run will retry",
                    retryable=True,
                ) from None
        outputs = _typed_redaction_under(policy, outputs)
    return ObserverReading(
        contents=tuple(contents),
        tool_outputs=tuple(outputs),
        redacts=redacts,
        policy=policy,
        speakers=tuple(speakers),
    )


Written = TypeVar("Written", DraftObservation, DraftReflection)


def labels_as_given(drafts: Sequence[Written], *, given: Iterable[str]) -> list[Written]:
    """What an engine wrote, each pseudonym it misspelt written as the label it was
    ``given`` (texts it read), and one it was never given as no label at all
    (``labels.well_formed``): what the pipeline stores never holds a malformed label."""
    known = labels_in(given)
    return [replace(draft, text=well_formed(draft.text, known)) for draft in drafts]


def observer_run_summary(
    *, conversation: Conversation, reading: ObserverReading | None, texts: Sequence[str]
) -> list[str]:
    """What an Observer run may keep of what its engine said beside the observations
    (the current task, the suggested response), under the policy ``reading`` was made
    with. Read from redacted messages, it holds nothing to redact. Read from messages as
    stored, its values are replaced by their entity type (``<CREDIT_CARD>``), pending
    ones included: a run row is no redaction target, so a value left in it would outlive
    the redaction of memory, and no pseudonym is numbered for it. Without a reading (a
    run whose window had nothing to observe) the policy is read here."""
    if not any(texts):
        return list(texts)
    if reading is None:
        reading = observer_reading(conversation=conversation, messages=[], tool_outputs=[])
    if reading.redacts:
        return list(texts)
    policy = reading.policy or redaction_policy_get_or_create(
        workspace_id=conversation.workspace_id
    )
    return _typed_redaction_under(policy, texts)


# --- reasoning steps and tool calls --------------------------------------------------------------


def _redacts_at_ingest(workspace_id: uuid.UUID) -> bool:
    """The policy's ``redact_at_ingest``, in one indexed query."""
    return bool(
        RedactionPolicy.objects.filter(workspace_id=workspace_id)
        .values_list("redact_at_ingest", flat=True)
        .first()
    )


def reasoning_redaction_at_ingest(
    *, workspace_id: uuid.UUID, texts: Sequence[str]
) -> list[str] | None:
    """The texts of a reasoning step or tool call to store, when the policy redacts
    messages at ingest: what it finds replaced by entity type (a tool's arguments and
    output hold personal data as often as messages do). None (one indexed query,
    without loading the engine) when it does not."""
    if not _redacts_at_ingest(workspace_id):
        return None
    return _typed_redaction(workspace_id=workspace_id, texts=texts)


def texts_masked_for_display(*, workspace_id: uuid.UUID, texts: Sequence[str]) -> list[str]:
    """Texts that are no redaction target (reasoning steps, tool calls, an agent's
    escalation reason, a reviewer's note) as the dashboard shows them to anyone: each
    value the policy's recognizers find masked as its entity type, as messages are
    masked on the page. One batched pass; empty texts do not load the engine."""
    return _typed_redaction(workspace_id=workspace_id, texts=texts)


def redaction_engine_status() -> str:
    """ "loaded" when this process has loaded the PII engine, "loadable" when its spaCy
    pipeline is installed (it loads on first use), "missing" when it is not: then every
    redaction, and every run of a policy that redacts, fails."""
    if presidio.engine_loaded():
        return "loaded"
    return "loadable" if importlib.util.find_spec(presidio.spacy_model_name()) else "missing"


def _scan_request(*, conversation: Conversation, messages: Sequence[Message]) -> None:
    """Have ``messages`` (one write's: consecutive seq numbers) scanned once the write
    commits: one ScanRequest row (the sweep sends again what a lost task never did) and
    one task. Call inside the transaction that inserts them; nothing here loads the
    engine."""
    # One row per write rather than one per message: 100 rows cost a 100-message bulk
    # write 3 ms of CPU more (of 5), one row costs nothing measurable.
    request = ScanRequest(
        workspace_id=conversation.workspace_id,
        conversation_id=conversation.pk,
        first_seq=min(m.seq for m in messages),
        last_seq=max(m.seq for m in messages),
    )
    insert([request])  # on every write: the statement written once
    # A scan task still waiting for a worker takes this request too (a task tops itself
    # up with its workspace's waiting requests): under a stream of writes the worker gets
    # one task per batch it can take, not one per write.
    enqueue_on_commit_unless_queued(
        scan.SCAN_TASK,
        [request.pk],
        str(conversation.workspace_id),
        mark=scan.scan_queued_mark(conversation.workspace_id),
    )


@dataclass
class _IngestRedaction:
    """What the engine found in message contents before they are stored; ``redact``
    applies it inside the transaction that stores them, to the contents and to the
    speakers' ``names`` (one per message, "" for none)."""

    policy: RedactionPolicy
    originals: list[str]
    detections: list[list[presidio.Detection]]
    names: list[str] = field(default_factory=list)
    conversation_id: uuid.UUID | None = None
    results: list[presidio.Redaction] = field(default_factory=list)
    stored_names: list[str] = field(default_factory=list)
    used: list[list[tuple[Pseudonym, str]]] = field(default_factory=list)
    pseudonyms: WorkspacePseudonyms | None = None

    def redact(self) -> list[str]:
        """The contents to store (the names to store are ``stored_names`` after it).
        Call inside the transaction that stores the messages: it numbers the new
        pseudonyms, which must not outlive a failed write. A first name alone gets the
        full name's pseudonym when one person in scope has it: the people the
        conversation already names, the write's speakers and the full names it holds."""
        spec = presidio.PolicySpec.of(self.policy)
        pseudonyms = WorkspacePseudonyms(self.policy.workspace_id)
        pseudonyms.preload(
            pair
            for text, found in zip(self.originals, self.detections, strict=True)
            for pair in pseudonym_values(text, found, [], spec)
        )
        names = self.names or [""] * len(self.originals)
        pseudonyms.people_in_scope(
            conversation_ids=[self.conversation_id] if self.conversation_id else [],
            speakers=names,
            mentioned=(
                text[d.start : d.end]
                for text, found in zip(self.originals, self.detections, strict=True)
                for d in found
                if d.entity_type == "PERSON"
            ),
        )
        self.results, self.stored_names, self.used = [], [], []
        for text, found, name in zip(self.originals, self.detections, names, strict=True):
            result = presidio.redact_text(text, found, spec=spec, pseudonyms=pseudonyms)
            self.results.append(result)
            self.stored_names.append(
                speaker_redacted(name, spec=spec, pseudonyms=pseudonyms) if name else ""
            )
            self.used.append(pseudonyms.take_used())
        self.pseudonyms = pseudonyms
        return self.texts

    @property
    def texts(self) -> list[str]:
        return [r.text for r in self.results]


def _ingest_redaction(
    *,
    workspace_id: uuid.UUID,
    contents: Sequence[str],
    redact: bool | None = None,
    names: Sequence[str] = (),
    conversation_id: uuid.UUID | None = None,
) -> _IngestRedaction | None:
    """Find what to redact in message contents before they are stored, when the policy
    says so (None otherwise, without loading the engine, after one indexed query unless
    the caller knows the policy's ``redact_at_ingest`` already: ``redact``).
    The caller stores ``redact()`` of the result, in its transaction. Findings pending
    review stay in the stored text until a person decides; engines never read them
    unmasked (the observation and reflection gates mask them)."""
    if not (_redacts_at_ingest(workspace_id) if redact is None else redact):
        return None
    policy = RedactionPolicy.objects.get(workspace_id=workspace_id)
    spec = presidio.PolicySpec.of(policy)
    detections = presidio.engine().detect_within(
        list(contents),
        spec=spec,
        seconds=settings.MEMDESK_SCAN_TEXT_SECONDS,
        known=WorkspacePseudonyms.known(
            workspace_id,
            conversation_ids=[conversation_id] if conversation_id else [],
            speakers=names,
        ),
    )
    unread = [index for index, found in enumerate(detections) if found is None]
    if unread:
        # Nothing is stored raw when the policy redacts at ingest: the write is refused.
        raise MemdeskError(
            "unscannable",
            f"Message {unread[0]} could not be scanned for personal data within "
            f"{settings.MEMDESK_SCAN_TEXT_SECONDS} s, and this workspace redacts messages "
            "before they are stored: send it as several shorter messages.",
            status_code=422,
            field="content",
        )
    return _IngestRedaction(
        policy=policy,
        originals=list(contents),
        detections=[found or [] for found in detections],
        names=[" ".join(name.split()) for name in names],
        conversation_id=conversation_id,
    )


def _ingest_record(
    *, conversation: Conversation, messages: Sequence[Message], ingest: _IngestRedaction
) -> None:
    """Store the findings (and originals, per policy), and where the pseudonyms' values
    were seen, of ``ingest.redact()`` for the messages just inserted. Call inside the
    transaction that inserts them."""
    policy = ingest.policy
    findings = []
    # Redacted by the scan's engine under the current policy: the scans are current.
    MessageScan.objects.bulk_create(
        MessageScan(
            message_id=message.pk,
            workspace_id=conversation.workspace_id,
            conversation_id=conversation.pk,
            content_digest=scan.content_digest(message.content),
            policy_version=policy.version,
            findings=len(result.findings),
            scanned_at=timezone.now(),
        )
        for message, result in zip(messages, ingest.results, strict=True)
    )
    allocated = ingest.pseudonyms.allocated if ingest.pseudonyms else set()
    announced: set[int] = set()  # new pseudonyms already named in an event
    for message, original, result, used in zip(
        messages, ingest.originals, ingest.results, ingest.used, strict=True
    ):
        if not result.findings:
            continue
        numbered = {p.pk for p, _ in used} & allocated - announced
        announced |= numbered
        kept = False
        if result.changed:
            kept = keep_original(
                policy=policy,
                target_type=RedactionFinding.TargetType.MESSAGE,
                target_id=message.pk,
                conversation_id=conversation.pk,
                text=original,
            )
        findings += finding_rows(
            policy=policy,
            conversation_id=conversation.pk,
            target_type=RedactionFinding.TargetType.MESSAGE,
            target_id=message.pk,
            findings=result.findings,
            pseudonyms=ingest.pseudonyms,
        )
        audit_record(
            workspace_id=policy.workspace_id,
            actor=SYSTEM_ACTOR,
            action="message.redact",
            target_type=RedactionFinding.TargetType.MESSAGE,
            target_id=str(message.pk),
            after={
                **finding_summary(result.findings),
                "textChanged": result.changed,
                "originalKept": kept,
                "policyVersion": policy.version,
                "newPseudonyms": len(numbered),
                "atIngest": True,
            },
        )
    RedactionFinding.objects.bulk_create(findings)
    pseudonym_sightings_record(
        target_type=RedactionFinding.TargetType.MESSAGE,
        uses=list(zip(messages, ingest.used, strict=True)),
    )


@dataclass(frozen=True)
class MessageIngest:
    """One message write's way through the gate, decided before the write's transaction
    (``message_ingest``): ``stored_contents`` inside it, before the insert, and
    ``record`` after the insert. ``redacts`` says whether the contents are redacted
    before they are stored (the policy's ``redact_at_ingest``)."""

    originals: tuple[str, ...]
    redaction: _IngestRedaction | None
    names: tuple[str, ...] = ()

    @property
    def redacts(self) -> bool:
        return self.redaction is not None

    def stored_contents(self) -> list[str]:
        """The contents to store: redacted, numbering new pseudonyms in the caller's
        transaction, when the policy redacts at ingest; as given otherwise."""
        return self.redaction.redact() if self.redaction else list(self.originals)

    def stored_name(self, index: int) -> str:
        """The speaker's name of the ``index``-th message to store, after
        ``stored_contents``: redacted as the contents are, when the policy redacts at
        ingest (``governance.redaction.speakers``); as given otherwise."""
        if self.redaction is not None and self.redaction.stored_names:
            return self.redaction.stored_names[index]
        return self.names[index] if index < len(self.names) else ""

    def record(self, *, conversation: Conversation, messages: Sequence[Message]) -> None:
        """After the insert, in the same transaction: the findings of a redaction at
        ingest (``_ingest_record``), or else the request to scan the messages
        once the write commits (``_scan_request``)."""
        if self.redaction is not None:
            _ingest_record(conversation=conversation, messages=messages, ingest=self.redaction)
        else:
            _scan_request(conversation=conversation, messages=messages)


def message_ingest(
    *,
    workspace_id: uuid.UUID,
    contents: Sequence[str],
    redact: bool | None = None,
    names: Sequence[str] = (),
    conversation_id: uuid.UUID | None = None,
) -> MessageIngest:
    """The append path's gate: what ``_ingest_redaction`` decides (``redact`` as it
    takes it), wrapped so the write calls ``stored_contents``, ``stored_name`` and
    ``record`` whichever way the policy goes. ``names`` are the messages' speakers' names
    ("" for none); ``conversation_id`` the conversation written to, whose people are in
    scope for first names. Call before the write's transaction: detection may load the
    engine, and the transaction should not wait for it."""
    return MessageIngest(
        originals=tuple(contents),
        redaction=_ingest_redaction(
            workspace_id=workspace_id,
            contents=contents,
            redact=redact,
            names=names,
            conversation_id=conversation_id,
        ),
        names=tuple(names),
    )


# --- pseudonyms in what memory serves and deletes ----------------------------------------------


# The workspace's redaction policy flags that the API's requests ask about with the
# conversation they read: ``agents_see_reidentified`` (agents are served values, not
# pseudonyms) and ``redact_at_ingest`` (messages are redacted before they are stored).
API_POLICY_FLAGS = ("agents_see_reidentified", "redact_at_ingest")


def policy_flag_sql(flag: str, workspace_id_column: str) -> str:
    """A subquery for one of ``API_POLICY_FLAGS`` of the workspace in
    ``workspace_id_column``, for a statement written by hand (NULL without a policy)."""
    if flag not in API_POLICY_FLAGS:
        raise ValueError(f"not a policy flag the API reads: {flag}")
    table = RedactionPolicy._meta.db_table
    return f'SELECT p.{flag} FROM "{table}" p WHERE p.workspace_id = {workspace_id_column}'


def reidentifier_for_api(
    *, workspace_id: uuid.UUID, allowed: bool | None = None
) -> Reidentifier | None:
    """What puts the values back into memory served to API keys, when the workspace's
    policy lets agents see re-identified memory; None otherwise. ``allowed`` is that
    answer when the caller has it already (``agents_see_reidentified_of``); without it,
    one indexed query."""
    if allowed is None:
        allowed = (
            RedactionPolicy.objects.filter(workspace_id=workspace_id)
            .values_list("agents_see_reidentified", flat=True)
            .first()
        )
    return Reidentifier.for_workspace(workspace_id) if allowed else None


def reidentifier_for_measurement(*, workspace_id: uuid.UUID) -> Reidentifier:
    """What puts the values back into memory texts that are compared with the messages
    (the recall estimate) and never shown nor stored."""
    return Reidentifier.for_workspace(workspace_id)


def conversation_pseudonyms(*, conversation_id: uuid.UUID) -> set[int]:
    """The pseudonyms seen in a conversation: read before deleting it, then passed to
    ``pseudonyms_release``."""
    return pseudonym_ids_seen_in(conversation_ids=[conversation_id])


def pseudonyms_release(
    *,
    workspace_id: uuid.UUID,
    pseudonym_ids: set[int],
    actor: Actor,
    conversation_id: uuid.UUID,
    reason: str = "",
) -> int:
    """After a conversation was deleted (its sightings with it): forget the pseudonyms
    no remaining message holds, audited. Returns how many."""
    return pseudonyms_forget_unheld(
        workspace_id=workspace_id,
        pseudonym_ids=pseudonym_ids,
        actor=actor,
        target_type="conversation",
        target_id=str(conversation_id),
        reason=reason,
    )
