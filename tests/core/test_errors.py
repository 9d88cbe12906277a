"""Services name fields as the code does; the API answers with the names on the wire."""

from __future__ import annotations

import pytest

from core.errors import wire_field


@pytest.mark.parametrize(
    ("field", "renames", "wire"),
    [
        ("conversation_id", None, "conversationId"),
        ("messages[1].created_at", None, "messages[1].createdAt"),
        ("operators.EMAIL_ADDRESS", None, "operators.EMAIL_ADDRESS"),
        ("limit", None, "limit"),
        ("max_tokens", None, "max_tokens"),
        ("end_user_id", {"end_user_id": "userId"}, "userId"),
        ("custom_recognizers[0].context_words", None, "customRecognizers[0].contextWords"),
    ],
)
def test_a_service_field_is_answered_with_its_wire_name(field, renames, wire):
    assert wire_field(field, renames) == wire
