"""What API keys read: pseudonyms by default; the values they stand for when the
workspace's policy lets agents see re-identified memory, in every context format and in
the observation, reflection and message reads, with the cache and ETag following."""

from __future__ import annotations

import json

import pytest

from governance.erasure import erasure_execute, erasure_request_create
from governance.models import AuditEvent
from memory.models import Conversation
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from tests.governance.builders import ADMIN, set_policy
from tests.memory.factories import ObservationFactory, ReflectionFactory

EMAIL = "dana.whitfield@example.com"
CARD = "4111 1111 1111 1111"


@pytest.fixture
def pseudonymised_conversation(workspace) -> Conversation:
    """A message pseudonymised at ingest, an observation and a reflection naming the
    same pseudonyms, and a message nobody observed yet."""
    set_policy(workspace, redact_at_ingest=True)
    conversation = conversation_create(workspace=workspace, user_id="dana")
    [said] = messages_append(
        conversation=conversation,
        items=[MessageInput(role="user", content=f"Mail {EMAIL}, card {CARD}.")],
    )
    ObservationFactory(
        conversation=conversation,
        text="User gave <EMAIL_ADDRESS_1> and paid with <CREDIT_CARD_1>.",
        window_start_seq=said.seq,
        window_end_seq=said.seq,
        source_message_ids=[str(said.pk)],
    )
    ReflectionFactory(conversation=conversation, text="<EMAIL_ADDRESS_1> is the customer.")
    messages_append(
        conversation=conversation,
        items=[MessageInput(role="user", content=f"Did you get {EMAIL}?")],
    )
    return Conversation.objects.get(pk=conversation.pk)


def _context(api, conversation: Conversation, fmt: str = "json", **params):
    query = "&".join([f"format={fmt}", *(f"{k}={v}" for k, v in params.items())])
    return api.get(f"/v1/conversations/{conversation.pk}/context?{query}")


def _allow(workspace, admin_api) -> None:
    response = admin_api.patch(
        "/v1/redaction/policy", {"agentsSeeReidentified": True}, format="json"
    )
    assert response.status_code == 200 and response.json()["agentsSeeReidentified"] is True


@pytest.mark.parametrize("fmt", ["json", "text", "messages"])
def test_agents_read_pseudonyms_by_default(api, pseudonymised_conversation, fmt):
    body = _context(api, pseudonymised_conversation, fmt).content.decode()

    assert "<EMAIL_ADDRESS_1>" in body and "<CREDIT_CARD_1>" in body
    assert EMAIL not in body and CARD not in body


@pytest.mark.parametrize("fmt", ["json", "text", "messages"])
def test_with_the_policy_flag_agents_read_the_values(
    api, admin_api, workspace, pseudonymised_conversation, fmt
):
    _allow(workspace, admin_api)

    response = _context(api, pseudonymised_conversation, fmt)

    body = response.content.decode()
    assert EMAIL in body and CARD in body
    assert "<EMAIL_ADDRESS_1>" not in body and "<CREDIT_CARD_1>" not in body
    if fmt != "text":
        json.loads(body)  # values are escaped as JSON, not pasted into it


def test_the_flag_is_a_policy_change_audited_as_one(
    admin_api, workspace, pseudonymised_conversation
):
    _allow(workspace, admin_api)

    event = AuditEvent.objects.filter(action="redaction_policy.update").latest("sequence")
    assert event.before["agentsSeeReidentified"] is False
    assert event.after["agentsSeeReidentified"] is True
    assert event.actor_role == "admin"


def test_the_etag_follows_the_flag(api, admin_api, workspace, pseudonymised_conversation):
    pseudonymised = _context(api, pseudonymised_conversation)
    assert _context(api, pseudonymised_conversation)["ETag"] == pseudonymised["ETag"]

    _allow(workspace, admin_api)
    reidentified = _context(api, pseudonymised_conversation)

    assert reidentified["ETag"] != pseudonymised["ETag"]
    again = api.get(
        f"/v1/conversations/{pseudonymised_conversation.pk}/context",
        HTTP_IF_NONE_MATCH=pseudonymised["ETag"],
    )
    assert again.status_code == 200 and EMAIL in again.content.decode()


def test_the_budget_is_fitted_to_the_values_served(
    api, admin_api, workspace, pseudonymised_conversation
):
    pseudonymised = _context(api, pseudonymised_conversation, max_tokens=100_000).json()[
        "tokenCount"
    ]
    _allow(workspace, admin_api)
    reidentified = _context(api, pseudonymised_conversation, max_tokens=100_000).json()[
        "tokenCount"
    ]
    assert reidentified > pseudonymised  # the values cost more tokens than their labels

    # A budget the pseudonyms would fit but the values do not: something must go.
    fitted = _context(api, pseudonymised_conversation, max_tokens=pseudonymised).json()

    assert fitted["tokenCount"] <= pseudonymised
    assert sum(fitted["trimmed"].values()) >= 1


def test_observation_reflection_and_message_reads_follow_the_flag(
    api, admin_api, workspace, pseudonymised_conversation
):
    base = f"/v1/conversations/{pseudonymised_conversation.pk}"
    before = [
        api.get(f"{base}/observations").content.decode(),
        api.get(f"{base}/reflections").content.decode(),
        api.get(f"{base}/messages").content.decode(),
    ]
    assert not any(EMAIL in body for body in before[:2])
    assert "<EMAIL_ADDRESS_1>" in before[2]  # the stored message is pseudonymised too

    _allow(workspace, admin_api)
    observation_id = api.get(f"{base}/observations").json()["observations"][0]["id"]
    after = [
        api.get(f"{base}/observations").json()["observations"][0]["text"],
        api.get(f"{base}/observations/{observation_id}").json()["text"],
        api.get(f"{base}/reflections").json()["reflections"][0]["text"],
        api.get(f"{base}/messages").json()["messages"][-1]["content"],
    ]
    assert after == [
        f"User gave {EMAIL} and paid with {CARD}.",
        f"User gave {EMAIL} and paid with {CARD}.",
        f"{EMAIL} is the customer.",
        f"Mail {EMAIL}, card {CARD}.",
    ]
    # Nothing was written back: the stored text keeps the pseudonyms.
    assert pseudonymised_conversation.observations.get().text.startswith(
        "User gave <EMAIL_ADDRESS_1>"
    )


def test_a_forgotten_pseudonym_is_served_anonymous_at_once(
    api, admin_api, workspace, pseudonymised_conversation
):
    _allow(workspace, admin_api)
    other = conversation_create(workspace=workspace, user_id="tomas")
    ObservationFactory(conversation=other, text="Tomas forwarded <EMAIL_ADDRESS_1>.")
    cached = _context(api, other)
    assert EMAIL in cached.content.decode()

    request = erasure_request_create(
        workspace=workspace, actor=ADMIN, end_user_id="dana", reason="forget me"
    )
    erasure_execute(request_id=request.pk)

    # Nothing about the other conversation changed, but its cached context named the
    # value: the render is keyed on the forgetting too.
    served = _context(api, other)
    assert EMAIL not in served.content.decode()
    assert "<EMAIL_ADDRESS_1>" in served.content.decode()
    assert served["ETag"] != cached["ETag"]


def test_another_workspace_cannot_reidentify_our_labels(
    make_client, other_workspace, workspace, pseudonymised_conversation
):
    set_policy(other_workspace, agents_see_reidentified=True)
    theirs = conversation_create(workspace=other_workspace)
    ObservationFactory(conversation=theirs, text="Someone mentioned <EMAIL_ADDRESS_1>.")
    stranger = make_client(other_workspace)

    body = stranger.get(f"/v1/conversations/{theirs.pk}/context").content.decode()

    assert EMAIL not in body and "<EMAIL_ADDRESS_1>" in body
