"""The audit trail outlives the data it records (it is append-only and chained), so it
holds no memory text: a note's text, a pin's quote and a deleted conversation's title
are recorded as keyed digests and token counts. The words themselves live in the rows
and their versions, which erasure deletes (issue 24)."""

from __future__ import annotations

import json

from governance.audit.writer import audit_text_digest
from governance.models import AuditEvent
from memory.models import Message

WORDS = "parcel left behind the blue gate on Thursday"


def _trail() -> str:
    return json.dumps([[e.before, e.after] for e in AuditEvent.objects.all()])


def test_a_note_written_edited_and_deleted_leaves_no_words_in_the_trail(curator_api):
    conversation = curator_api.post("/v1/conversations", {}, format="json").json()["id"]
    base = f"/v1/conversations/{conversation}/observations"
    note = curator_api.post(base, {"text": f"User said the {WORDS}."}, format="json").json()
    curator_api.patch(
        f"{base}/{note['id']}", {"text": f"User said the {WORDS}, again.", "reason": "r"},
        format="json",
    )
    curator_api.delete(f"{base}/{note['id']}?reason=wrong")
    actions = list(AuditEvent.objects.values_list("action", flat=True))
    assert {"observation.create", "observation.edit", "observation.delete"} <= set(actions)
    assert "blue gate" not in _trail()
    created = AuditEvent.objects.get(action="observation.create")
    assert created.after["textDigest"] == audit_text_digest(f"User said the {WORDS}.")


def test_a_pin_and_a_deleted_conversation_leave_no_words_in_the_trail(curator_api):
    conversation = curator_api.post(
        "/v1/conversations", {"title": f"The {WORDS}"}, format="json"
    ).json()["id"]
    curator_api.post(
        f"/v1/conversations/{conversation}/messages",
        {"role": "user", "content": f"The {WORDS}."},
        format="json",
    )
    message = Message.objects.get(conversation_id=conversation)
    pin = curator_api.post(
        f"/v1/conversations/{conversation}/pins",
        {"messageId": str(message.pk), "reason": "delivery note"},
        format="json",
    )
    assert pin.status_code == 201, pin.content
    curator_api.delete(f"/v1/conversations/{conversation}/pins/{pin.json()['id']}?reason=done")
    curator_api.delete(f"/v1/conversations/{conversation}")
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"pin.create", "pin.delete", "conversation.delete"} <= actions
    assert "blue gate" not in _trail()
