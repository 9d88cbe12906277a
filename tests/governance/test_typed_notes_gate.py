"""Notes people and agents type go through the redaction gate as the Observer's do: an
added or edited observation and an edited reflection are stored as the policy keeps
them, so neither the agent's context, nor a viewer's page, nor the audit trail holds the
raw values. Their tags, topics and ticket id follow the text (issue 24)."""

from __future__ import annotations

import json

import pytest

from governance.models import AuditEvent, RedactionFinding, RedactionPolicy
from memory.models import Observation, ObservationVersion, Reflection
from tests.governance.builders import earlier_version
from tests.memory.factories import ObservationFactory, ReflectionFactory

TYPED = "Joyce Wu (joyce.wu@example.com, 859-787-9085) has a promo code."
RAW_VALUES = ("Joyce", "joyce.wu@example.com", "859-787-9085")


def _holds_raw(text: str) -> list[str]:
    return [value for value in RAW_VALUES if value in text]


def _events_text(**filters: object) -> str:
    return json.dumps(
        [
            [e.before, e.after, e.reason]
            for e in AuditEvent.objects.filter(**filters).order_by("sequence")
        ]
    )


@pytest.fixture
def new_conversation_id(curator_api) -> str:
    return curator_api.post("/v1/conversations", {}, format="json").json()["id"]


def test_an_observation_an_agent_adds_is_stored_and_served_pseudonymised(
    curator_api, new_conversation_id
):
    response = curator_api.post(
        f"/v1/conversations/{new_conversation_id}/observations",
        {"text": TYPED, "priority": "high"},
        format="json",
    )
    assert response.status_code == 201
    assert _holds_raw(response.json()["content"]) == []
    row = Observation.objects.get(pk=response.json()["id"])
    assert _holds_raw(row.text) == []
    assert "<PERSON_" in row.text and "<EMAIL_ADDRESS_" in row.text
    assert "has a promo code" in row.text
    context = curator_api.get(f"/v1/conversations/{new_conversation_id}/context")
    assert context.status_code == 200
    assert _holds_raw(context.content.decode()) == []
    assert RedactionFinding.objects.filter(target_id=row.pk, target_type="observation").exists()
    # The trail records the note as stored: the typed values are in no event.
    assert _holds_raw(_events_text(target_id=str(row.pk))) == []


def test_an_observation_edit_over_the_api_is_stored_pseudonymised(curator_api, conversation):
    observation = ObservationFactory(conversation=conversation, text="User has a promo code.")
    response = curator_api.patch(
        f"/v1/conversations/{conversation.pk}/observations/{observation.pk}",
        {"content": TYPED, "reason": "added who"},
        format="json",
    )
    assert response.status_code == 200, response.content
    observation.refresh_from_db()
    assert _holds_raw(observation.text) == [] and observation.version == 2
    # The version the edit replaced is what was stored before: nothing raw.
    assert _holds_raw(ObservationVersion.objects.get(observation_id=observation.pk).text) == []
    context = curator_api.get(f"/v1/conversations/{conversation.pk}/context?format=json")
    assert _holds_raw(context.content.decode()) == []


def test_a_reflection_edit_is_stored_pseudonymised(curator_api, reflected_conversation):
    reflection = Reflection.objects.filter(conversation=reflected_conversation).first()
    response = curator_api.patch(
        f"/v1/conversations/{reflected_conversation.pk}/reflections/{reflection.pk}",
        {"content": TYPED, "reason": "merged"},
        format="json",
    )
    assert response.status_code == 200, response.content
    reflection.refresh_from_db()
    assert _holds_raw(reflection.text) == []
    assert _holds_raw(_events_text(target_id=str(reflection.pk))) == []


def test_a_reflection_edit_is_redacted_even_when_observations_are_not(
    curator_api, workspace, reflected_conversation
):
    """Nothing becomes a reflection unredacted: the policy's switch for observations
    does not reach reflections."""
    RedactionPolicy.objects.update_or_create(
        workspace=workspace, defaults={"redact_before_observation": False}
    )
    reflection = Reflection.objects.filter(conversation=reflected_conversation).first()
    curator_api.patch(
        f"/v1/conversations/{reflected_conversation.pk}/reflections/{reflection.pk}",
        {"content": TYPED, "reason": "merged"},
        format="json",
    )
    reflection.refresh_from_db()
    assert _holds_raw(reflection.text) == []


def test_an_observation_is_kept_as_typed_when_the_policy_does_not_redact_observations(
    curator_api, workspace, new_conversation_id
):
    RedactionPolicy.objects.update_or_create(
        workspace=workspace, defaults={"redact_before_observation": False}
    )
    response = curator_api.post(
        f"/v1/conversations/{new_conversation_id}/observations",
        {"text": TYPED},
        format="json",
    )
    assert Observation.objects.get(pk=response.json()["id"]).text == TYPED


def test_a_revert_to_a_version_stored_before_the_gate_is_redacted_again(
    curator_api, conversation
):
    """A version kept before this gate existed (or under another policy) holds what was
    typed then; reverting to it goes through the gate as a new edit does."""
    observation = ObservationFactory(
        conversation=conversation, text="User has a promo code.", version=2
    )
    earlier_version(observation, text=TYPED)
    response = curator_api.post(
        f"/v1/conversations/{conversation.pk}/observations/{observation.pk}/revert",
        {"version": 1, "reason": "put back"},
        format="json",
    )
    assert response.status_code == 200, response.content
    observation.refresh_from_db()
    assert _holds_raw(observation.text) == []


# --- metadata follows the text ---------------------------------------------------------


def test_an_edit_that_drops_an_order_id_drops_its_tag_and_ticket(curator_api, conversation):
    observation = ObservationFactory(
        conversation=conversation,
        text="Order ZEBRA-7781 arrived damaged; refund promised.",
        tags=["fact", "order:ZEBRA-7781"],
        ticket_id="ZEBRA-7781",
        topics=["refund"],
    )
    response = curator_api.patch(
        f"/v1/conversations/{conversation.pk}/observations/{observation.pk}",
        {"content": "The parcel arrived damaged; a replacement was promised.", "reason": "id"},
        format="json",
    )
    assert response.status_code == 200, response.content
    observation.refresh_from_db()
    assert (observation.tags, observation.ticket_id, observation.topics) == (["fact"], "", [])
    context = curator_api.get(f"/v1/conversations/{conversation.pk}/context?format=json")
    assert "ZEBRA-7781" not in context.content.decode()


def test_an_edit_that_names_a_new_order_tags_it(curator_api, conversation):
    observation = ObservationFactory(
        conversation=conversation, text="Refund promised.", tags=["fact"], topics=["refund"]
    )
    curator_api.patch(
        f"/v1/conversations/{conversation.pk}/observations/{observation.pk}",
        {"content": "Refund promised for order ORD-5521.", "reason": "which order"},
        format="json",
    )
    observation.refresh_from_db()
    assert (observation.tags, observation.topics) == (["fact", "order:ORD-5521"], ["refund"])


def test_a_reflection_edit_drops_the_topic_it_removed(curator_api, reflected_conversation):
    reflection = ReflectionFactory(
        conversation=reflected_conversation, text="Headphones broke twice.", topics=["headphones"]
    )
    curator_api.patch(
        f"/v1/conversations/{reflected_conversation.pk}/reflections/{reflection.pk}",
        {"content": "The device broke twice.", "reason": "generic"},
        format="json",
    )
    reflection.refresh_from_db()
    assert reflection.topics == []
