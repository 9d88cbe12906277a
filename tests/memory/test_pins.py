"""Pinned verbatim facts: pinned over the API, audited, served verbatim and first in every
context format, never trimmed; gone with their conversation, their message or an unpin."""

from __future__ import annotations

import json
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.actors import SYSTEM_ACTOR
from governance.audit.writer import audit_text_digest
from governance.erasure import erasure_execute, erasure_request_create
from governance.models import AuditEvent
from governance.redaction.review import redaction_rescan
from governance.redaction.targets import requote_pins
from memory.models import Message, Pin
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from memory.services.pins import pin_create
from tests.governance.builders import set_policy
from tests.memory.factories import ObservationFactory, ReflectionFactory

CONTRACT = "Per clause 7.2, the refund is due within 14 days of the return."


@pytest.fixture
def blender_conversation_id(api):
    """The id of a three-message conversation whose second message is CONTRACT."""
    conversation_id = api.post("/v1/conversations", {"userId": "dana"}, format="json").json()["id"]
    api.post(
        f"/v1/conversations/{conversation_id}/messages/bulk",
        {
            "messages": [
                {"role": "user", "content": "Hi, I returned the blender."},
                {"role": "assistant", "content": CONTRACT},
                {"role": "user", "content": "Thanks, noted."},
            ]
        },
        format="json",
    )
    return conversation_id


def _message(conversation_id: str, seq: int) -> Message:
    return Message.objects.get(conversation_id=conversation_id, seq=seq)


def _pin(api, conversation_id: str, **body):
    return api.post(f"/v1/conversations/{conversation_id}/pins", body, format="json")


def _context(api, conversation_id: str, **query):
    return api.get(f"/v1/conversations/{conversation_id}/context", query)


# --- create, list, delete ------------------------------------------------------------------------


def test_an_agent_pins_a_span_and_the_quote_is_stored_verbatim_and_audited(
    api, blender_conversation_id
):
    message = _message(blender_conversation_id, 2)

    response = _pin(
        api,
        blender_conversation_id,
        messageId=str(message.pk),
        start=4,
        end=14,
        reason="contract term",
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["text"] == "clause 7.2" == CONTRACT[4:14]
    assert (body["messageId"], body["start"], body["end"]) == (str(message.pk), 4, 14)
    assert body["conversationId"] == blender_conversation_id
    assert body["tokenCount"] > 0
    assert body["createdBy"].startswith("api_key:")
    event = AuditEvent.objects.get(action="pin.create")
    assert event.target_id == body["id"]
    assert "clause 7.2" not in str(event.after)  # the trail holds a digest of the quote
    assert event.after["textDigest"] == audit_text_digest("clause 7.2")
    assert event.reason == "contract term"


def test_a_pin_without_a_span_quotes_the_whole_message(api, blender_conversation_id):
    body = _pin(
        api, blender_conversation_id, messageId=str(_message(blender_conversation_id, 2).pk)
    ).json()

    assert (body["start"], body["end"], body["text"]) == (None, None, CONTRACT)


def test_pins_are_listed_oldest_first(api, blender_conversation_id):
    first = _pin(
        api, blender_conversation_id, messageId=str(_message(blender_conversation_id, 2).pk)
    ).json()
    second = _pin(
        api, blender_conversation_id, messageId=str(_message(blender_conversation_id, 1).pk)
    ).json()

    listed = api.get(f"/v1/conversations/{blender_conversation_id}/pins").json()

    assert [p["id"] for p in listed["pins"]] == [first["id"], second["id"]]
    assert listed["pins"][0] == first


def test_unpinning_needs_a_reason_and_is_audited(api, blender_conversation_id):
    pin_id = _pin(
        api, blender_conversation_id, messageId=str(_message(blender_conversation_id, 2).pk)
    ).json()["id"]
    url = f"/v1/conversations/{blender_conversation_id}/pins/{pin_id}"

    refused = api.delete(url)
    assert refused.status_code == 400
    assert (refused.json()["code"], refused.json()["field"]) == ("reason_required", "reason")
    assert Pin.objects.filter(pk=pin_id).exists()

    assert api.delete(url, {"reason": "superseded by clause 8"}, format="json").status_code == 204
    assert not Pin.objects.filter(pk=pin_id).exists()
    event = AuditEvent.objects.get(action="pin.delete")
    assert (event.target_id, event.reason) == (pin_id, "superseded by clause 8")
    assert event.before["textDigest"] == audit_text_digest(CONTRACT)
    assert api.delete(url + "?reason=again").status_code == 404


@pytest.mark.parametrize(
    ("span", "field"),
    [
        ({"start": 10, "end": 5}, "end"),
        ({"start": 3, "end": 3}, "end"),
        ({"start": 0, "end": len(CONTRACT) + 1}, "end"),
        ({"start": len(CONTRACT) + 1}, "start"),
        ({"start": -1, "end": 4}, "start"),
    ],
)
def test_a_span_outside_the_message_or_empty_is_refused(api, blender_conversation_id, span, field):
    response = _pin(
        api, blender_conversation_id, messageId=str(_message(blender_conversation_id, 2).pk), **span
    )

    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == ("invalid_span", field)
    assert not Pin.objects.exists()


def test_a_whitespace_only_span_is_refused(api, blender_conversation_id):
    message = _message(blender_conversation_id, 2)
    space = CONTRACT.index(" ")

    response = _pin(
        api, blender_conversation_id, messageId=str(message.pk), start=space, end=space + 1
    )

    assert response.status_code == 400
    assert response.json()["code"] == "empty_span"
    assert not Pin.objects.exists()


def test_another_workspaces_message_cannot_be_pinned(api, other_api, blender_conversation_id):
    theirs = other_api.post("/v1/conversations", {}, format="json").json()["id"]
    other_api.post(
        f"/v1/conversations/{theirs}/messages", {"role": "user", "content": "secret"}, format="json"
    )
    their_message = _message(theirs, 1)

    response = _pin(api, blender_conversation_id, messageId=str(their_message.pk))
    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == ("unknown_message", "messageId")
    # Nor can their conversation be reached at all.
    assert _pin(api, theirs, messageId=str(their_message.pk)).status_code == 404
    assert api.get(f"/v1/conversations/{theirs}/pins").status_code == 404
    assert not Pin.objects.exists()
    assert not AuditEvent.objects.filter(action="pin.create").exists()


def test_another_conversations_pin_cannot_be_deleted_through_this_one(api, blender_conversation_id):
    other = api.post("/v1/conversations", {}, format="json").json()["id"]
    pin_id = _pin(
        api, blender_conversation_id, messageId=str(_message(blender_conversation_id, 2).pk)
    ).json()["id"]

    response = api.delete(f"/v1/conversations/{other}/pins/{pin_id}?reason=x")

    assert response.status_code == 404
    assert Pin.objects.filter(pk=pin_id).exists()


# --- the context ----------------------------------------------------------------------------------


@pytest.fixture
def pinned(api, blender_conversation_id):
    ReflectionFactory(conversation_id=blender_conversation_id, text="User returned a blender.")
    ObservationFactory(conversation_id=blender_conversation_id, text="User asked about a refund.")
    _pin(
        api,
        blender_conversation_id,
        messageId=str(_message(blender_conversation_id, 2).pk),
        start=0,
        end=25,
    )
    return blender_conversation_id


def test_pins_are_first_in_the_json_context(api, pinned):
    body = _context(api, pinned).json()

    assert list(body)[:2] == ["conversationId", "pins"]
    assert [p["text"] for p in body["pins"]] == [CONTRACT[:25]]


def test_pins_are_a_pinned_section_before_reflections_in_the_text_context(api, pinned):
    text = _context(api, pinned, format="text").content.decode()

    assert text.startswith(f"## Pinned\n{CONTRACT[:25]}\n\n## Reflections\n")


def test_pins_open_the_memory_system_message(api, pinned):
    [memory, *_] = _context(api, pinned, format="messages").json()["messages"]

    assert memory["role"] == "system"
    body = memory["content"].split("\n\n", 1)[1]
    assert body.startswith(f"## Pinned\n{CONTRACT[:25]}\n\n## Reflections\n")


def test_a_conversation_without_pins_has_no_pinned_section(api, blender_conversation_id):
    assert "## Pinned" not in _context(api, blender_conversation_id, format="text").content.decode()
    assert _context(api, blender_conversation_id).json()["pins"] == []


@pytest.mark.parametrize("fmt", ["json", "text", "messages"])
def test_a_tiny_budget_trims_everything_but_the_pins(api, pinned, fmt):
    response = _context(api, pinned, format=fmt, max_tokens=1)

    content = response.content.decode()
    assert CONTRACT[:25] in content
    assert "User returned a blender." not in content
    assert "User asked about a refund." not in content
    assert "Thanks, noted." not in content
    if fmt != "text":
        body = json.loads(content)
        assert body["trimmed"] == {"recentMessages": 3, "observations": 1, "reflections": 1}
        assert body["tokenCount"] > body["maxTokens"]  # the pins alone exceed it, and say so


def test_pinning_and_unpinning_change_the_cached_context_at_once(api, blender_conversation_id):
    before = _context(api, blender_conversation_id, format="text")
    pin_id = _pin(
        api, blender_conversation_id, messageId=str(_message(blender_conversation_id, 2).pk)
    ).json()["id"]

    pinned = _context(
        api, blender_conversation_id, format="text", HTTP_IF_NONE_MATCH=before["ETag"]
    )
    assert pinned.status_code == 200 and "## Pinned" in pinned.content.decode()

    api.delete(f"/v1/conversations/{blender_conversation_id}/pins/{pin_id}?reason=wrong quote")
    assert "## Pinned" not in _context(api, blender_conversation_id, format="text").content.decode()


# --- governance ------------------------------------------------------------------------------


def test_deleting_the_conversation_deletes_its_pins(api, blender_conversation_id):
    _pin(api, blender_conversation_id, messageId=str(_message(blender_conversation_id, 2).pk))

    response = api.delete(f"/v1/conversations/{blender_conversation_id}?reason=customer asked")

    assert response.status_code == 204
    assert not Pin.objects.exists()


def test_erasure_of_the_end_user_deletes_their_pins_with_a_receipt(
    api, workspace, blender_conversation_id
):
    _pin(api, blender_conversation_id, messageId=str(_message(blender_conversation_id, 2).pk))
    request = erasure_request_create(
        workspace=workspace, actor=SYSTEM_ACTOR, end_user_id="dana", reason="GDPR"
    )

    assert erasure_execute(request_id=request.pk).request.status == "completed"

    assert not Pin.objects.exists()
    [receipt] = AuditEvent.objects.filter(action="erasure.delete_conversation")
    assert receipt.after["counts"]["pins"] == 1


def test_a_pin_of_a_message_redacted_at_ingest_holds_the_redacted_text(api, workspace):
    set_policy(workspace, redact_at_ingest=True, keep_originals=False)
    conversation = api.post("/v1/conversations", {}, format="json").json()["id"]
    api.post(
        f"/v1/conversations/{conversation}/messages",
        {"role": "user", "content": "Write to me at dana.smith@example.com about the refund."},
        format="json",
    )

    body = _pin(api, conversation, messageId=str(_message(conversation, 1).pk)).json()

    assert "dana.smith@example.com" not in body["text"]
    assert "EMAIL_ADDRESS" in body["text"]
    assert body["text"] == _message(conversation, 1).content
    assert (
        "dana.smith@example.com" not in _context(api, conversation, format="text").content.decode()
    )


def test_a_message_redacted_later_is_quoted_again_by_its_pins(api, workspace):
    set_policy(workspace, keep_originals=False)
    conversation_id = api.post("/v1/conversations", {}, format="json").json()["id"]
    content = "Refund due by Friday. Mail dana.smith@example.com with the receipt."
    api.post(
        f"/v1/conversations/{conversation_id}/messages",
        {"role": "user", "content": content},
        format="json",
    )
    message = _message(conversation_id, 1)
    start = content.index("Mail")
    whole = _pin(api, conversation_id, messageId=str(message.pk)).json()["id"]
    around = _pin(api, conversation_id, messageId=str(message.pk), start=start).json()["id"]
    before = _pin(api, conversation_id, messageId=str(message.pk), start=0, end=21).json()["id"]
    inside = _pin(
        api, conversation_id, messageId=str(message.pk), start=start + 8, end=start + 12
    ).json()["id"]

    # Stored messages are rewritten where the policy redacts at ingest: a re-scan after
    # the policy changed redacts those written before.
    set_policy(workspace, redact_at_ingest=True)
    redaction_rescan(workspace=workspace, tiers=["messages"])

    message.refresh_from_db()
    assert "dana.smith@example.com" not in message.content
    pins = {pin.pk: pin for pin in Pin.objects.all()}
    assert pins[uuid.UUID(whole)].text == message.content
    assert pins[uuid.UUID(before)].text == "Refund due by Friday."
    redacted = message.content[start:]
    assert pins[uuid.UUID(around)].text == redacted and "EMAIL_ADDRESS" in redacted
    # A quote of part of the address now quotes its replacement instead.
    assert "EMAIL_ADDRESS" in pins[uuid.UUID(inside)].text
    for pin in pins.values():
        assert "dana" not in pin.text and pin.text in message.content
    text = _context(api, conversation_id, format="text").content.decode()
    assert "dana.smith@example.com" not in text


def test_one_redaction_batch_quotes_every_redacted_messages_pins_again(api, workspace):
    set_policy(workspace, keep_originals=False)
    conversation_id = api.post("/v1/conversations", {}, format="json").json()["id"]
    addresses = ["dana.smith@example.com", "li.wei@example.org", "sam.k@example.net"]
    api.post(
        f"/v1/conversations/{conversation_id}/messages/bulk",
        {
            "messages": [
                {"role": "user", "content": f"Refund by Friday. Mail {a}."} for a in addresses
            ]
        },
        format="json",
    )
    messages = [_message(conversation_id, seq) for seq in (1, 2, 3)]
    for message in messages:
        _pin(api, conversation_id, messageId=str(message.pk))
        _pin(api, conversation_id, messageId=str(message.pk), start=message.content.index("Mail"))

    set_policy(workspace, redact_at_ingest=True)
    redaction_rescan(workspace=workspace, tiers=["messages"])

    for message in messages:
        message.refresh_from_db()
        quotes = sorted(Pin.objects.filter(message=message).values_list("text", flat=True))
        assert quotes == sorted([message.content, message.content[message.content.index("Mail") :]])
        assert all("@" not in quote and "EMAIL_ADDRESS" in quote for quote in quotes)


def _pinned_messages(workspace, count: int) -> list[tuple[uuid.UUID, str, str]]:
    """``count`` messages, each pinned whole, around its address and on the address alone;
    returns (message id, old text, new text) with the address removed from the text."""
    conversation = conversation_create(workspace=workspace)
    messages = messages_append(
        conversation=conversation,
        items=[
            MessageInput(role="user", content=f"Mail user{n}@example.com by Friday.")
            for n in range(count)
        ],
    )
    changes = []
    for message in messages:
        start = message.content.index("user")
        end = message.content.index(" by")
        for span in ((None, None), (0, end + 3), (start, end)):
            pin_create(
                conversation=conversation,
                actor=SYSTEM_ACTOR,
                message_id=message.pk,
                start=span[0],
                end=span[1],
            )
        changes.append(
            (message.pk, message.content, message.content[:start] + message.content[end:])
        )
    return changes


def test_requoting_pins_takes_the_same_queries_for_one_message_or_many(workspace):
    one, many = _pinned_messages(workspace, 1), _pinned_messages(workspace, 8)
    counts = []
    for changes in (one, many):
        with CaptureQueriesContext(connection) as queries:
            requote_pins(changes=changes)
        counts.append(len(queries))

    # Read the pins, update the kept ones, delete the emptied ones: whatever the batch.
    assert counts[0] == counts[1] <= 3
    for message_id, _, new in many:
        assert sorted(Pin.objects.filter(message_id=message_id).values_list("text", flat=True)) == [
            "Mail  by",
            new,
        ]


def test_the_metrics_count_pins_among_the_tokens_served(api, pinned, blender_conversation_id):
    metrics = api.get(f"/v1/metrics?conversationId={blender_conversation_id}").json()
    [pin] = api.get(f"/v1/conversations/{blender_conversation_id}/pins").json()["pins"]
    assert metrics["tiers"]["pinTokens"] == pin["tokenCount"] > 0
    tiers = metrics["tiers"]
    assert metrics["servedTokens"] == (
        tiers["pinTokens"]
        + tiers["reflectionTokens"]
        + tiers["observationTokens"]
        + tiers["unobservedMessageTokens"]
    )
