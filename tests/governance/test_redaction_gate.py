"""The redaction gate: the Reflector reads only redacted observations, findings are
recorded without values, uncertain ones wait for a person, and the policy decides what
happens to originals and whether reflection waits."""

from __future__ import annotations

from dataclasses import dataclass
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.serializers import serialize

from core.actors import SYSTEM_ACTOR
from governance.models import AuditEvent, RedactionFinding, RedactionPolicy, RestrictedOriginal
from governance.redaction import presidio as redaction
from governance.redaction.pseudonyms import WorkspacePseudonyms
from governance.redaction.review import redaction_finding_approve, redaction_finding_dismiss
from memory.engines.base import DraftReflection, SourceObservation
from memory.models import Conversation, Message, Observation, Reflection
from memory.pipeline.observer import observer_run_execute
from memory.pipeline.reflector import observations_for_reflection, reflector_run_execute
from memory.pipeline.scheduling import observer_schedule, reflector_schedule
from memory.services.messages import MessageInput, messages_append
from memory.services.observations import observation_update
from tests.governance.builders import set_policy
from tests.memory.factories import ObservationFactory, ReflectionFactory

EMAIL = "dana.whitfield@example.com"
CARD = "4111 1111 1111 1111"
PHONE = "(977) 625-2661"  # no context word: in the review band
NOTES = [
    f"User's email is {EMAIL} and she wants the invoice there.",
    f"User paid with card {CARD} on Feb 10.",
    f"User said {PHONE} is the best number to reach her.",
    "User said Crystal Minh when asked for her name.",
    "User prefers a refund over a replacement.",
    "Tool crm: Account has been pulled up for Alessandro Phoenix.",
    "User's server is at 192.168.10.14 and the IBAN is DE89 3704 0044 0532 0130 00.",
]


def detected_values(texts: list[str], policy: RedactionPolicy) -> set[str]:
    """Every value the policy's detectors find in ``texts``, applied or pending review."""
    spec = redaction.PolicySpec.of(policy)
    found = redaction.engine().detect(texts, spec=spec)
    return {text[d.start : d.end] for text, ds in zip(texts, found, strict=True) for d in ds}


@dataclass
class EchoEngine:
    """A Reflector that copies every observation it reads into its own reflection: what
    the gate lets through is exactly what gets stored."""

    name = "extractive"
    model = ""
    prompt_version = ""
    seen: list[str] | None = None

    def observe(self, messages, *, previous_observations, now, fidelity="balanced"):
        raise AssertionError("not used")

    def reflect(self, observations: list[SourceObservation], *, now):
        self.seen = [o.text for o in observations]
        return [
            DraftReflection(
                text=o.text,
                priority=o.priority,
                referenced_at=None,
                source_observation_ids=[o.id],
            )
            for o in observations
        ]


def _observations(conversation: Conversation, texts: list[str]) -> list[Observation]:
    return [ObservationFactory(conversation=conversation, text=t) for t in texts]


def _reflect(conversation: Conversation, *, final: bool = True):
    run = reflector_schedule(conversation=conversation, trigger="manual")
    return reflector_run_execute(run_id=run.pk, final_attempt=final).run


@pytest.fixture
def echo(fake_engine) -> EchoEngine:
    return fake_engine(EchoEngine())


def test_a_reflection_never_holds_a_value_the_detectors_find_in_its_input(
    workspace, conversation, echo
):
    policy = set_policy(
        workspace,
        custom_recognizers=[
            {
                "name": "order",
                "entity": "ORDER_ID",
                "pattern": r"\bORD-\d{6}\b",
                "score": 0.9,
                "context": ["order"],
            }
        ],
        deny_list=["Project Bluebird"],
    )
    inputs = [*NOTES, "Order ORD-123456 is late.", "User works on Project Bluebird."]
    _observations(conversation, inputs)
    values = detected_values(inputs, policy)
    assert {EMAIL, CARD, PHONE, "Crystal Minh", "ORD-123456", "Project Bluebird"} <= values

    run = _reflect(conversation)

    assert run.status == "succeeded"
    reflections = " ".join(Reflection.objects.values_list("text", flat=True))
    assert reflections  # the echo engine stored what it read
    assert not [v for v in values if v in reflections]
    assert not [v for v in values if v in " ".join(echo.seen or [])]
    assert "<EMAIL_ADDRESS_1>" in reflections and "<ORDER_ID_1>" in reflections


def test_the_extractive_reflector_behind_the_gate_keeps_no_value_either(workspace, conversation):
    policy = set_policy(workspace)
    # Each note said twice: the Reflector merges the repeats, so it writes them all.
    _observations(conversation, [*NOTES, *NOTES])
    values = detected_values(NOTES, policy)

    assert _reflect(conversation).status == "succeeded"

    reflections = " ".join(Reflection.objects.values_list("text", flat=True)).lower()
    assert reflections
    assert not [v for v in values if v.lower() in reflections]


def test_observations_are_stored_redacted_with_findings_and_no_values(workspace, conversation):
    [observation] = _observations(conversation, [NOTES[0]])
    version = Conversation.objects.get(pk=conversation.pk).memory_version

    _reflect(conversation)

    observation.refresh_from_db()
    assert EMAIL not in observation.text and "<EMAIL_ADDRESS_1>" in observation.text
    assert observation.version == 1  # no version kept: it would keep the value
    assert Conversation.objects.get(pk=conversation.pk).memory_version > version
    finding = RedactionFinding.objects.get(target_id=observation.pk)
    assert (finding.target_type, finding.entity_type, finding.status, finding.operator) == (
        "observation",
        "EMAIL_ADDRESS",
        "applied",
        "pseudonym",
    )
    assert finding.pseudonym.label == "<EMAIL_ADDRESS_1>"
    # Offsets point at the replacement in the stored text.
    assert observation.text[finding.start : finding.end] == "<EMAIL_ADDRESS_1>"
    event = AuditEvent.objects.get(action="observation.redact", target_id=str(observation.pk))
    assert event.after["applied"] == 1 and event.after["textChanged"] is True
    assert EMAIL not in serialize("json", RedactionFinding.objects.all())
    assert EMAIL not in serialize("json", AuditEvent.objects.all())
    # Destroyed by default: the original exists nowhere.
    assert not RestrictedOriginal.objects.exists()
    assert EMAIL not in serialize("json", Observation.objects.all())


def test_a_kept_original_is_restricted(workspace, conversation):
    set_policy(workspace, keep_originals=True)
    [observation] = _observations(conversation, [NOTES[0]])

    _reflect(conversation)

    original = RestrictedOriginal.objects.get(target_id=observation.pk)
    assert (original.target_type, original.text) == ("observation", NOTES[0])


def test_uncertain_findings_are_masked_for_the_reflector_and_queued(workspace, conversation, echo):
    [observation] = _observations(conversation, [NOTES[2]])

    _reflect(conversation)

    finding = RedactionFinding.objects.get(target_id=observation.pk)
    assert (finding.entity_type, finding.status) == ("PHONE_NUMBER", "pending_review")
    observation.refresh_from_db()
    # Stored as it was, pointed at, until a person decides; never shown to the engine.
    assert observation.text[finding.start : finding.end] == PHONE
    assert echo.seen == ["User said <PHONE_NUMBER_1> is the best number to reach her."]
    assert finding.pseudonym.label == "<PHONE_NUMBER_1>"  # what approval would write
    assert PHONE not in Reflection.objects.get().text


def test_approving_redacts_the_value_and_moves_other_findings(workspace, conversation):
    text = f"User said {PHONE} and then {EMAIL} was confirmed."
    [observation] = _observations(conversation, [text])
    observations_for_reflection(conversation=conversation)
    pending = RedactionFinding.objects.get(status="pending_review")
    version = Conversation.objects.get(pk=conversation.pk).memory_version

    approved = redaction_finding_approve(finding=pending, actor=SYSTEM_ACTOR, reason="a phone")

    observation.refresh_from_db()
    assert approved.status == "approved" and approved.reviewed_at is not None
    assert PHONE not in observation.text
    for finding in RedactionFinding.objects.filter(target_id=observation.pk):
        assert observation.text[finding.start : finding.end] == f"<{finding.entity_type}_1>"
        assert finding.pseudonym.label == f"<{finding.entity_type}_1>"
    assert Conversation.objects.get(pk=conversation.pk).memory_version == version + 1
    event = AuditEvent.objects.get(action="redaction_finding.approve")
    assert (event.target_id, event.reason) == (str(pending.pk), "a phone")
    assert event.before["status"] == "pending_review" and event.after["status"] == "approved"
    assert event.after["pseudonym"] == "<PHONE_NUMBER_1>" and PHONE not in str(event.after)


def test_dismissing_keeps_the_value_and_can_allow_it_for_good(workspace, conversation):
    [observation] = _observations(conversation, [NOTES[2]])
    observations_for_reflection(conversation=conversation)
    pending = RedactionFinding.objects.get(status="pending_review")

    redaction_finding_dismiss(finding=pending, actor=SYSTEM_ACTOR, add_to_allow_list=True)

    observation.refresh_from_db()
    assert PHONE in observation.text
    policy = workspace.redaction_policy
    policy.refresh_from_db()
    assert policy.allow_list == [PHONE] and policy.version == 2
    actions = list(AuditEvent.objects.values_list("action", flat=True).order_by("sequence"))
    assert actions[-2:] == ["redaction_policy.update", "redaction_finding.dismiss"]
    assert PHONE not in serialize("json", AuditEvent.objects.all())
    # The next observation with the same number is no longer a finding.
    later = _observations(conversation, [f"Call {PHONE} after six."])[0]
    texts = observations_for_reflection(conversation=conversation)
    assert not RedactionFinding.objects.filter(target_id=later.pk).exists()
    assert any(PHONE in o.text for o in texts)


def test_a_decided_finding_cannot_be_decided_again(workspace, conversation):
    _observations(conversation, [NOTES[2]])
    observations_for_reflection(conversation=conversation)
    pending = RedactionFinding.objects.get(status="pending_review")
    redaction_finding_dismiss(finding=pending, actor=SYSTEM_ACTOR)

    with pytest.raises(Exception, match="already decided"):
        redaction_finding_approve(finding=pending, actor=SYSTEM_ACTOR)


def test_a_finding_whose_text_was_edited_since_is_stale(workspace, conversation):
    [observation] = _observations(conversation, [NOTES[2]])
    observations_for_reflection(conversation=conversation)
    pending = RedactionFinding.objects.get(status="pending_review")
    Observation.objects.filter(pk=observation.pk).update(text="User prefers email now, really.")

    with pytest.raises(Exception, match="changed since it was recorded") as raised:
        redaction_finding_approve(finding=pending, actor=SYSTEM_ACTOR)

    assert raised.value.status_code == 409
    assert RedactionFinding.objects.get(pk=pending.pk).status == "pending_review"


def test_a_value_moved_by_an_edit_is_still_masked(workspace, conversation, echo):
    [observation] = _observations(conversation, [NOTES[2]])
    observations_for_reflection(conversation=conversation)
    observation_update(
        observation=observation,
        actor=SYSTEM_ACTOR,
        reason="context",
        text=f"Earlier today, after a long call, she said {PHONE} is best; mail {EMAIL}.",
    )

    _reflect(conversation)

    assert echo.seen and PHONE not in echo.seen[0] and EMAIL not in echo.seen[0]
    assert RedactionFinding.objects.filter(target_id=observation.pk).count() == 3


def test_running_the_gate_twice_records_nothing_twice(workspace, conversation):
    _observations(conversation, NOTES)
    observations_for_reflection(conversation=conversation)
    count = RedactionFinding.objects.count()
    events = AuditEvent.objects.count()

    observations_for_reflection(conversation=conversation)

    assert RedactionFinding.objects.count() == count
    assert AuditEvent.objects.count() == events


def test_reflection_waits_for_reviews_when_the_policy_says_so(workspace, conversation):
    set_policy(workspace, reflection_waits_for_review=True)
    _observations(conversation, [NOTES[2], NOTES[4], NOTES[4]])  # a repeat to condense

    run = _reflect(conversation, final=False)

    assert run.status == "retrying"  # the worker tries it again later
    assert "pending review" in run.error
    assert not Reflection.objects.exists()
    assert Observation.objects.filter(status="active").count() == 3

    redaction_finding_approve(
        finding=RedactionFinding.objects.get(status="pending_review"), actor=SYSTEM_ACTOR
    )
    run = reflector_run_execute(run_id=run.pk, final_attempt=False).run

    assert run.status == "succeeded"
    assert Reflection.objects.exists()
    assert PHONE not in " ".join(Reflection.objects.values_list("text", flat=True))


def test_without_the_wait_reflection_proceeds_with_reviews_pending(workspace, conversation):
    _observations(conversation, [NOTES[2], NOTES[4]])

    assert _reflect(conversation).status == "succeeded"
    assert RedactionFinding.objects.filter(status="pending_review").count() == 1


def test_redaction_at_ingest_stores_redacted_content_and_keeps_the_original(
    workspace, conversation
):
    set_policy(workspace, redact_at_ingest=True, keep_originals=True)

    [message] = messages_append(
        conversation=conversation, items=[MessageInput(role="user", content=NOTES[0])]
    )

    stored = Message.objects.get(pk=message.pk)
    assert EMAIL not in stored.content and "<EMAIL_ADDRESS_1>" in stored.content
    assert stored.token_count < len(NOTES[0])
    assert RestrictedOriginal.objects.get(target_id=message.pk).text == NOTES[0]
    finding = RedactionFinding.objects.get(target_id=message.pk)
    assert (finding.target_type, finding.status) == ("message", "applied")
    assert stored.content[finding.start : finding.end] == "<EMAIL_ADDRESS_1>"
    assert AuditEvent.objects.filter(action="message.redact", target_id=str(message.pk)).exists()


def test_redaction_at_ingest_can_destroy_the_original(workspace, conversation):
    set_policy(workspace, redact_at_ingest=True, keep_originals=False)

    messages_append(
        conversation=conversation,
        items=[MessageInput(role="user", content=t) for t in (NOTES[0], NOTES[1])],
    )

    assert not RestrictedOriginal.objects.exists()
    everything = serialize("json", [*Message.objects.all(), *AuditEvent.objects.all()])
    assert EMAIL not in everything and CARD not in everything
    assert RedactionFinding.objects.filter(target_type="message").count() == 2


def test_with_no_message_redaction_the_write_path_never_loads_the_engine(
    workspace, conversation, monkeypatch
):
    def refuse() -> None:
        raise AssertionError("the redaction engine was loaded on the write path")

    monkeypatch.setattr(redaction, "engine", refuse)
    [message] = messages_append(
        conversation=conversation, items=[MessageInput(role="user", content=NOTES[0])]
    )
    assert Message.objects.get(pk=message.pk).content == NOTES[0]


def test_redaction_before_observation_feeds_the_observer_redacted_messages(workspace, conversation):
    set_policy(workspace, redact_before_observation=True)
    messages_append(
        conversation=conversation,
        items=[MessageInput(role="user", content=t) for t in (NOTES[0], NOTES[2], NOTES[4])],
    )
    run = observer_schedule(conversation=conversation, trigger="manual")

    assert observer_run_execute(run_id=run.pk).run.status == "succeeded"

    observations = " ".join(Observation.objects.values_list("text", flat=True))
    assert observations
    assert EMAIL not in observations and PHONE not in observations
    # The messages keep what the agent wrote (masked by role in the dashboard); the gate
    # recorded what it found in them, which also flags the conversation.
    messages = " ".join(Message.objects.values_list("content", flat=True))
    assert EMAIL in messages and PHONE in messages
    detected = set(
        RedactionFinding.objects.filter(target_type="message", status="detected").values_list(
            "entity_type", flat=True
        )
    )
    assert {"EMAIL_ADDRESS", "PHONE_NUMBER"} <= detected
    # Nothing waits for review: the stored messages are not redacted, so there is
    # nothing to decide (the Observer's copy masks the uncertain phone number too).
    assert set(RedactionFinding.objects.values_list("target_type", "status")) == {
        ("message", "detected")
    }


def test_rescan_redacts_existing_memory_in_batches_and_is_idempotent(workspace, conversation):
    observations = _observations(conversation, NOTES[:3])
    reflection = ReflectionFactory(conversation=conversation, text=f"User's email: {EMAIL}")
    out = StringIO()

    call_command("rescan_redaction", "--workspace", "acme", "--batch-size", "2", stdout=out)

    printed = out.getvalue()
    assert "observations: 2/3" in printed and "observations: 3/3" in printed
    assert "reflections: 1/1" in printed and "rescan finished" in printed
    assert EMAIL not in printed and PHONE not in printed
    reflection.refresh_from_db()
    assert EMAIL not in reflection.text
    assert all(EMAIL not in o.text for o in Observation.objects.all())
    assert RedactionFinding.objects.filter(target_id=observations[2].pk).get().status == (
        "pending_review"
    )
    count = RedactionFinding.objects.count()

    call_command("rescan_redaction", "--workspace", "acme", stdout=StringIO())
    assert RedactionFinding.objects.count() == count


def test_rescan_of_messages_scans_them_and_keeps_their_text(workspace, conversation):
    messages_append(conversation=conversation, items=[MessageInput(role="user", content=NOTES[1])])
    out = StringIO()

    call_command("rescan_redaction", "--tier", "messages", stdout=out)

    assert "messages: 1 scanned" in out.getvalue() and CARD not in out.getvalue()
    assert CARD in Message.objects.get().content
    [finding] = RedactionFinding.objects.filter(target_type="message")
    assert (finding.entity_type, finding.status) == ("CREDIT_CARD", "detected")


def test_rescan_of_messages_redacts_them_where_the_policy_redacts_at_ingest(
    workspace, conversation
):
    messages_append(conversation=conversation, items=[MessageInput(role="user", content=NOTES[1])])
    set_policy(workspace, redact_at_ingest=True)
    out = StringIO()

    call_command("rescan_redaction", "--tier", "messages", stdout=out)

    assert "messages: 1 scanned" in out.getvalue()
    assert CARD not in Message.objects.get().content
    [finding] = RedactionFinding.objects.filter(target_type="message")
    assert (finding.entity_type, finding.status) == ("CREDIT_CARD", "applied")


def test_rescan_names_an_unknown_workspace(db):
    with pytest.raises(Exception, match="No workspace named 'nope'"):
        call_command("rescan_redaction", "--workspace", "nope", stdout=StringIO())


def test_a_speaker_named_for_a_role_stays_as_written_in_the_notes(workspace, conversation):
    """A meeting whose speakers a client named by role: "Marketing said ..." is no person
    before reflection either (the ingest scan left the name as written), even where the
    workspace once took the word for a person ("Thanks, Marketing"), while a speaker who
    is a person is still pseudonymised where a note names them."""
    WorkspacePseudonyms(workspace.pk).label("PERSON", "Marketing")
    messages_append(
        conversation=conversation,
        items=[
            MessageInput(role="user", content="We could do whatever we like.", name="Marketing"),
            MessageInput(role="user", content="We'll get panned.", name="Project Manager"),
            MessageInput(role="user", content="Keep the cost down.", name="User Interface"),
            MessageInput(role="user", content="I moved to Leeds.", name="Dana Whitfield"),
        ],
    )
    notes = [
        "User Interface got Project Manager's note about keeping the cost down; Marketing "
        "said the criteria based on Real Reactions' goals, marketing strategies; Project "
        "Manager said Marketing got point five there",
        "Dana Whitfield said she moved to Leeds last week",
    ]
    _observations(conversation, notes)

    texts = sorted(o.text for o in observations_for_reflection(conversation=conversation))

    assert texts[0].startswith("<PERSON_") and "Dana Whitfield" not in texts[0]
    assert texts[1] == notes[0]
