"""Legal holds: placed on a conversation or an end user, they block every deletion (a
DELETE is 409 and says which hold) until released with a reason."""

from __future__ import annotations

import pytest

from core.errors import MemdeskError
from governance.holds import legal_hold_place, legal_hold_release
from governance.models import LegalHold
from governance.selectors import active_hold_for_conversation
from memory.models import Conversation, Message
from memory.services.conversations import conversation_delete
from tests.governance.builders import ADMIN, conversation_with_tiers, events


def _place(admin_api, **body):
    return admin_api.post("/v1/legal-holds", {"reason": "Smith v. Acme", **body}, format="json")


def test_a_held_conversation_cannot_be_deleted_until_the_hold_is_released(
    api, admin_api, workspace
):
    conversation = conversation_with_tiers(workspace, user_id="u-1")
    placed = _place(admin_api, conversationId=str(conversation.pk))
    assert placed.status_code == 201, placed.content
    hold = placed.json()
    assert (hold["conversationId"], hold["userId"], hold["active"]) == (
        str(conversation.pk),
        None,
        True,
    )

    refused = api.delete(f"/v1/conversations/{conversation.pk}")

    assert refused.status_code == 409
    body = refused.json()
    assert body["code"] == "legal_hold"
    assert f"Legal hold {hold['id']}" in body["message"]
    assert f"on conversation {conversation.pk}" in body["message"]
    assert Message.objects.filter(conversation=conversation).count() == 5
    assert not events(workspace, "conversation.delete")

    released = admin_api.post(
        f"/v1/legal-holds/{hold['id']}/release", {"reason": "case closed"}, format="json"
    )
    assert released.status_code == 200
    assert (released.json()["active"], released.json()["releaseReason"]) == (False, "case closed")

    assert api.delete(f"/v1/conversations/{conversation.pk}").status_code == 204
    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    # The released hold went with the conversation; its history stays in the audit trail.
    assert not LegalHold.objects.exists()
    place, release = events(workspace, "legal_hold.place"), events(workspace, "legal_hold.release")
    assert place[0].reason == "Smith v. Acme" and release[0].reason == "case closed"
    assert place[0].after["conversationId"] == str(conversation.pk)
    assert release[0].after["releasedBy"] == place[0].after["placedBy"]


def test_a_hold_on_an_end_user_covers_all_their_conversations_even_later_ones(
    api, admin_api, workspace
):
    before = conversation_with_tiers(workspace, user_id="u-7")
    assert _place(admin_api, userId="u-7").status_code == 201
    after = conversation_with_tiers(workspace, user_id="u-7")
    someone_else = conversation_with_tiers(workspace, user_id="u-8")

    for conversation in (before, after):
        response = api.delete(f"/v1/conversations/{conversation.pk}")
        assert response.status_code == 409
        assert "on end user 'u-7'" in response.json()["message"]
    assert api.delete(f"/v1/conversations/{someone_else.pk}").status_code == 204
    assert Conversation.objects.filter(user_id="u-7").count() == 2


def test_the_service_refuses_too_whoever_asks(workspace):
    conversation = conversation_with_tiers(workspace, user_id="u-1")
    hold = legal_hold_place(workspace=workspace, actor=ADMIN, reason="audit", end_user_id="u-1")

    with pytest.raises(MemdeskError) as refused:
        conversation_delete(conversation=conversation, actor=ADMIN, reason="cleanup")

    assert (refused.value.code, refused.value.status_code) == ("legal_hold", 409)
    assert active_hold_for_conversation(conversation=conversation) == hold
    legal_hold_release(hold=hold, actor=ADMIN, reason="done")
    assert active_hold_for_conversation(conversation=conversation) is None
    conversation_delete(conversation=conversation, actor=ADMIN, reason="cleanup")


def test_two_holds_must_both_be_released(api, admin_api, workspace):
    conversation = conversation_with_tiers(workspace, user_id="u-1")
    first = _place(admin_api, conversationId=str(conversation.pk)).json()
    second = _place(admin_api, userId="u-1").json()

    admin_api.post(f"/v1/legal-holds/{first['id']}/release", {"reason": "x"}, format="json")
    still = api.delete(f"/v1/conversations/{conversation.pk}")
    assert still.status_code == 409
    assert f"Legal hold {second['id']}" in still.json()["message"]


def test_holds_are_listed_and_filtered(admin_api, workspace):
    conversation = conversation_with_tiers(workspace)
    on_conversation = _place(admin_api, conversationId=str(conversation.pk)).json()
    on_user = _place(admin_api, userId="u-2").json()
    admin_api.post(f"/v1/legal-holds/{on_user['id']}/release", {"reason": "x"}, format="json")

    def ids(query: str) -> list[int]:
        response = admin_api.get("/v1/legal-holds" + query)
        assert response.status_code == 200
        return [h["id"] for h in response.json()["holds"]]

    assert ids("") == [on_user["id"], on_conversation["id"]]
    assert ids("?active=true") == [on_conversation["id"]]
    assert ids("?active=false") == [on_user["id"]]
    assert ids(f"?conversationId={conversation.pk}") == [on_conversation["id"]]
    assert ids("?userId=u-2") == [on_user["id"]]
    assert ids("?limit=1") == [on_user["id"]]
    assert (
        admin_api.get(f"/v1/legal-holds/{on_user['id']}")
        .json()["releasedBy"]
        .startswith("api_key:")
    )


@pytest.mark.parametrize(
    ("query", "error", "field"),
    [
        ("?active=maybe", "invalid_active", "active"),
        ("?conversationId=conv-1", "invalid_id", "conversationId"),
        ("?limit=0", "invalid_limit", "limit"),
    ],
)
def test_a_bad_hold_filter_is_refused_naming_it(admin_api, query, error, field):
    response = admin_api.get("/v1/legal-holds" + query)
    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == (error, field)


@pytest.mark.parametrize(
    ("body", "status", "error", "field"),
    [
        ({}, 400, "invalid_hold_target", None),
        ({"userId": "u", "conversationId": "{conversation}"}, 400, "invalid_hold_target", None),
        ({"userId": "u", "reason": "  "}, 400, "reason_required", "reason"),
        ({"userId": "u", "reason": None}, 400, "invalid_request", "reason"),
        ({"userId": 12}, 400, "invalid_request", "userId"),
        ({"userId": "u" * 256}, 400, "invalid_request", "userId"),
        ({"conversationId": "conv-1"}, 400, "invalid_id", "conversationId"),
        ({"conversationId": "{theirs}"}, 404, "not_found", None),
    ],
)
def test_bad_hold_requests_are_refused_clearly(
    admin_api, workspace, other_workspace, body, status, error, field
):
    mine = conversation_with_tiers(workspace, old=0, new=1, with_memory=False)
    theirs = conversation_with_tiers(other_workspace, old=0, new=1, with_memory=False)
    body = {
        key: value.format(conversation=mine.pk, theirs=theirs.pk)
        if isinstance(value, str)
        else value
        for key, value in {"reason": "why", **body}.items()
    }

    response = admin_api.post("/v1/legal-holds", body, format="json")

    assert response.status_code == status, response.content
    assert response.json()["code"] == error
    assert response.json().get("field") == field
    assert not LegalHold.objects.exists()


def test_release_needs_a_reason_and_happens_once(admin_api, workspace, other_workspace):
    hold = _place(admin_api, userId="u-1").json()
    url = f"/v1/legal-holds/{hold['id']}/release"

    no_reason = admin_api.post(url, {}, format="json")
    assert (no_reason.status_code, no_reason.json()["code"]) == (400, "reason_required")
    assert admin_api.post(url, {"reason": "done"}, format="json").status_code == 200
    twice = admin_api.post(url, {"reason": "done"}, format="json")
    assert (twice.status_code, twice.json()["code"]) == (409, "hold_already_released")
    assert len(events(workspace, "legal_hold.release")) == 1

    theirs = legal_hold_place(
        workspace=other_workspace, actor=ADMIN, reason="theirs", end_user_id="u-1"
    )
    assert admin_api.get(f"/v1/legal-holds/{theirs.pk}").status_code == 404
    released = admin_api.post(
        f"/v1/legal-holds/{theirs.pk}/release", {"reason": "x"}, format="json"
    )
    assert released.status_code == 404
    assert admin_api.get("/v1/legal-holds/first").status_code == 400
    assert LegalHold.objects.get(pk=theirs.pk).is_active


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/v1/legal-holds"),
        ("post", "/v1/legal-holds"),
        ("get", "/v1/legal-holds/{id}"),
        ("post", "/v1/legal-holds/{id}/release"),
    ],
)
def test_agent_keys_cannot_see_place_or_release_holds(api, workspace, method, path):
    hold = legal_hold_place(workspace=workspace, actor=ADMIN, reason="r", end_user_id="u")

    url = path.format(id=hold.pk)
    if method == "get":
        response = api.get(url)
    else:
        response = api.post(url, {"userId": "v", "reason": "r"}, format="json")

    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"
    assert LegalHold.objects.get().is_active
    assert LegalHold.objects.count() == 1
