"""A pseudonym's value lives as long as a raw message holds it: erasure, retention or a
deleted conversation that removes the last one forgets it (audited, counts only), and
the pseudonym left in derived memory is anonymous from then on."""

from __future__ import annotations

import pytest
from django.core.serializers import serialize

from governance.erasure import erasure_execute, erasure_request_create
from governance.models import AuditEvent, Pseudonym, PseudonymSighting
from governance.retention.plan import retention_sweep_request
from governance.retention.policies import retention_policy_create
from governance.retention.sweep import retention_sweep
from memory.models import Conversation, Message, Observation
from memory.pipeline.reflector import observations_for_reflection
from memory.services.conversations import conversation_create, conversation_delete
from memory.services.messages import MessageInput, messages_append
from tenancy.models import Workspace
from tests.governance.builders import ADMIN, days_ago, set_policy
from tests.memory.factories import ObservationFactory

EMAIL = "dana.whitfield@example.com"
OTHER_EMAIL = "tomas.berg@example.com"


@pytest.fixture(autouse=True)
def _redact_at_ingest(workspace):
    set_policy(workspace, redact_at_ingest=True)


def _say(workspace: Workspace, content: str, *, user_id: str = "", age_days: float = 0) -> Message:
    conversation = conversation_create(workspace=workspace, user_id=user_id)
    [message] = messages_append(
        conversation=conversation,
        items=[
            MessageInput(
                role="user", content=content, created_at=days_ago(age_days) if age_days else None
            )
        ],
    )
    return message


def _pseudonym(label_number: int = 1) -> Pseudonym:
    return Pseudonym.objects.get(entity_type="EMAIL_ADDRESS", number=label_number)


def _erase(workspace: Workspace, user_id: str):
    request = erasure_request_create(
        workspace=workspace, actor=ADMIN, end_user_id=user_id, reason="right to be forgotten"
    )
    return erasure_execute(request_id=request.pk).request


def _sweep(workspace: Workspace):
    retention_policy_create(workspace=workspace, actor=ADMIN, name="default", message_days=30)
    sweep = retention_sweep_request(workspace=workspace, actor=ADMIN)
    return retention_sweep(sweep_id=sweep.pk)


def assert_forgotten(pseudonym: Pseudonym) -> None:
    pseudonym.refresh_from_db()
    assert pseudonym.forgotten_at is not None and not pseudonym.is_held
    assert (pseudonym.digest, pseudonym.value_encrypted) == ("", "")
    assert not pseudonym.sightings.exists()


# --- erasure --------------------------------------------------------------------------------------


def test_erasing_the_last_message_holding_a_value_forgets_its_pseudonym(workspace):
    _say(workspace, f"Mail {EMAIL}", user_id="dana")
    kept = _say(workspace, f"Mail {OTHER_EMAIL}", user_id="tomas")

    request = _erase(workspace, "dana")

    assert request.status == "completed"
    assert request.counts["pseudonymsForgotten"] == 1
    assert_forgotten(_pseudonym(1))
    assert _pseudonym(2).is_held and _pseudonym(2).sightings.get().target_id == kept.pk
    event = AuditEvent.objects.get(action="redaction.pseudonym.forget")
    assert (event.target_type, event.target_id) == ("erasure_request", str(request.pk))
    assert event.after == {"forgotten": 1, "byEntity": {"EMAIL_ADDRESS": 1}}
    assert EMAIL not in serialize("json", AuditEvent.objects.all())
    assert EMAIL not in serialize("json", Pseudonym.objects.all())


def test_a_value_another_conversation_still_holds_keeps_its_pseudonym(workspace):
    _say(workspace, f"Mail {EMAIL}", user_id="dana")
    _say(workspace, f"Dana wrote from {EMAIL}", user_id="tomas")

    request = _erase(workspace, "dana")

    assert "pseudonymsForgotten" not in request.counts
    pseudonym = _pseudonym(1)
    assert pseudonym.is_held and pseudonym.sightings.count() == 1
    assert not AuditEvent.objects.filter(action="redaction.pseudonym.forget").exists()


def test_a_forgotten_pseudonym_reveals_nothing_and_its_number_is_never_given_again(
    admin_api, workspace
):
    _say(workspace, f"Mail {EMAIL}", user_id="dana")
    _erase(workspace, "dana")

    response = admin_api.post(
        "/v1/redaction/pseudonyms/EMAIL_ADDRESS_1/reveal", {"reason": "audit"}, format="json"
    )

    assert response.status_code == 200
    assert (response.json()["held"], response.json()["value"]) == (False, None)
    assert response.json()["forgottenAt"]
    # The audited attempt says what was (not) shown.
    event = AuditEvent.objects.get(action="redaction.pseudonym.reveal")
    assert event.after["held"] is False
    # The same value seen again is a new pseudonym: the old one stays anonymous.
    again = _say(workspace, f"Mail {EMAIL}", user_id="dana")
    assert Message.objects.get(pk=again.pk).content == "Mail <EMAIL_ADDRESS_2>"


# --- retention ------------------------------------------------------------------------------------


def test_retention_forgets_a_value_whose_last_message_expired(workspace):
    conversation = _say(workspace, f"Mail {EMAIL}", age_days=100).conversation
    # Derived memory naming the pseudonym survives the messages.
    observation = ObservationFactory(conversation=conversation, text="User gave <EMAIL_ADDRESS_1>.")

    sweep = _sweep(workspace)

    assert sweep.counts["messages"] == 1
    assert_forgotten(_pseudonym(1))
    event = AuditEvent.objects.get(action="redaction.pseudonym.forget")
    assert (event.target_type, event.target_id) == ("retention_sweep", str(sweep.pk))
    [batch] = AuditEvent.objects.filter(action="retention.delete")
    assert batch.after["counts"]["pseudonymsForgotten"] == 1
    assert batch.after["counts"]["pseudonymSightings"] == 1
    assert Observation.objects.get(pk=observation.pk).text == "User gave <EMAIL_ADDRESS_1>."


def test_retention_keeps_a_value_a_newer_message_still_holds(workspace):
    old = _say(workspace, f"Mail {EMAIL}", age_days=100)
    new = _say(workspace, f"Still {EMAIL}")

    _sweep(workspace)

    assert not Message.objects.filter(pk=old.pk).exists()
    pseudonym = _pseudonym(1)
    assert pseudonym.is_held
    assert list(pseudonym.sightings.values_list("target_id", flat=True)) == [new.pk]


def test_an_observation_value_goes_with_the_message_that_said_it(workspace):
    set_policy(workspace, redact_at_ingest=False)
    conversation = conversation_create(workspace=workspace)
    said, other = messages_append(
        conversation=conversation,
        items=[
            MessageInput(role="user", content=f"My email is {EMAIL}", created_at=days_ago(100)),
            MessageInput(role="assistant", content="Thanks, noted."),
        ],
    )
    ObservationFactory(
        conversation=conversation,
        text=f"User's email is {EMAIL}.",
        source_message_ids=[str(said.pk), str(other.pk)],
    )
    observations_for_reflection(conversation=conversation)
    assert _pseudonym(1).is_held

    _sweep(workspace)

    # The raw message that held the value expired; the newer bystander never held it.
    assert Message.objects.filter(pk=other.pk).exists()
    assert_forgotten(_pseudonym(1))
    assert Observation.objects.get().text == "User's email is <EMAIL_ADDRESS_1>."


# --- a deleted conversation -----------------------------------------------------------------------


def test_deleting_a_conversation_forgets_what_only_it_held(workspace):
    message = _say(workspace, f"Mail {EMAIL} and {OTHER_EMAIL}")
    _say(workspace, f"Also {OTHER_EMAIL}")

    conversation_delete(
        conversation=Conversation.objects.get(pk=message.conversation_id),
        actor=ADMIN,
        reason="duplicate",
    )

    assert_forgotten(_pseudonym(1))
    assert _pseudonym(2).is_held
    event = AuditEvent.objects.get(action="redaction.pseudonym.forget")
    assert (event.target_type, event.target_id, event.reason) == (
        "conversation",
        str(message.conversation_id),
        "duplicate",
    )
    assert PseudonymSighting.objects.count() == 1
