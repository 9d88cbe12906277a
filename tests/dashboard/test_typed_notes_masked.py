"""A note a reviewer types on the conversation page is stored as the redaction policy
keeps it, so a viewer never reads the typed values on any page (issue 24)."""

from __future__ import annotations

import pytest

from memory.models import Observation
from tests.memory.factories import ObservationFactory

TYPED = "Joyce Wu (joyce.wu@example.com, 859-787-9085) has a promo code."
RAW_VALUES = ("Joyce", "joyce.wu@example.com", "859-787-9085")


def _holds_raw(text: str) -> list[str]:
    return [value for value in RAW_VALUES if value in text]


@pytest.mark.parametrize("viewer_page", ["", "context/", "observations/"])
def test_a_reviewers_edit_reaches_a_viewer_pseudonymised(login, conversation, viewer_page):
    observation = ObservationFactory(conversation=conversation, text="User has a promo code.")
    edited = login("reviewer").post(
        f"/conversations/{conversation.pk}/observations/{observation.pk}/edit/",
        {"text": TYPED, "priority": "high", "reason": "added who"},
        HTTP_HX_REQUEST="true",
    )
    assert edited.status_code in (200, 302), edited
    assert _holds_raw(edited.content.decode()) == []
    observation.refresh_from_db()
    assert _holds_raw(observation.text) == [] and observation.version == 2
    column = {"HTTP_HX_REQUEST": "true"} if viewer_page == "observations/" else {}
    page = login("viewer").get(f"/conversations/{conversation.pk}/{viewer_page}", **column)
    assert page.status_code == 200
    assert _holds_raw(page.content.decode()) == []
    history = login("viewer").get(
        f"/conversations/{conversation.pk}/observations/{observation.pk}/history/"
    )
    assert _holds_raw(history.content.decode()) == []


def test_a_note_a_reviewer_adds_on_the_page_is_stored_pseudonymised(login, conversation):
    response = login("reviewer").post(
        f"/conversations/{conversation.pk}/observations/add/",
        {"text": TYPED, "priority": "medium", "reason": "from the call"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 201, response.content
    assert _holds_raw(response.content.decode()) == []
    assert [_holds_raw(o.text) for o in Observation.objects.filter(conversation=conversation)] == [
        []
    ]
