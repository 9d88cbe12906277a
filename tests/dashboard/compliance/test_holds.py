"""/compliance/holds/: placing a legal hold on a conversation or an end user, and
releasing it."""

from __future__ import annotations

import pytest

from core.actors import SYSTEM_ACTOR
from core.errors import MemdeskError
from governance.holds import legal_hold_place
from governance.models import AuditEvent, LegalHold
from memory.services.conversations import conversation_delete

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
def test_viewers_and_reviewers_cannot_see_or_place_holds(login, role, quiet_conversation):
    client = login(role)
    for response in (
        client.get("/compliance/holds/"),
        client.post(
            "/compliance/holds/place/", {"conversation": quiet_conversation.pk, "reason": "x"}
        ),
    ):
        assert response.status_code == 403
        assert '<strong class="required-role">compliance officer</strong>' in (
            response.content.decode()
        )
    assert not LegalHold.objects.exists()


def test_a_hold_placed_on_a_conversation_blocks_its_deletion_and_is_audited(
    login, quiet_conversation
):
    client = login("compliance")
    assert client.get(f"/compliance/holds/?conversation={quiet_conversation.pk}").status_code == 200
    response = client.post(
        "/compliance/holds/place/",
        {"conversation": str(quiet_conversation.pk), "reason": "Case 42"},
        **HX,
    )
    assert response.status_code == 201
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="holds">') and "<html" not in html
    hold = LegalHold.objects.get()
    assert f'id="hold-{hold.pk}"' in html and "Case 42" in html and "placed." in html
    assert hold.conversation_id == quiet_conversation.pk
    event = AuditEvent.objects.get(action="legal_hold.place")
    assert (event.target_id, event.reason) == (str(hold.pk), "Case 42")
    with pytest.raises(MemdeskError) as refused:
        conversation_delete(conversation=quiet_conversation, actor=SYSTEM_ACTOR, reason="cleanup")
    assert refused.value.code == "legal_hold"


def test_a_hold_on_an_end_user_without_js_redirects_to_the_list(login, quiet_conversation):
    client = login("admin")
    response = client.post("/compliance/holds/place/", {"end_user": "dana", "reason": "Claim"})
    assert response.status_code == 302 and response["Location"] == "/compliance/holds/"
    html = client.get("/compliance/holds/").content.decode()
    assert "end user <code>dana</code>" in html and "Claim" in html


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"conversation": "", "end_user": "", "reason": "x"}, "Give a conversation id or an end"),
        ({"end_user": "dana", "reason": ""}, "This field is required."),
        ({"conversation": "not-a-uuid", "reason": "x"}, "Paste a conversation id (a UUID)"),
    ],
)
def test_a_bad_hold_is_refused_with_the_reason(login, quiet_conversation, data, message):
    response = login("compliance").post("/compliance/holds/place/", data)
    assert response.status_code == 422
    assert message in response.content.decode()
    assert not LegalHold.objects.exists()


def test_another_workspaces_conversation_or_hold_is_not_found(
    login, foreign_conversation, other_workspace
):
    client = login("compliance")
    response = client.post(
        "/compliance/holds/place/", {"conversation": str(foreign_conversation.pk), "reason": "x"}
    )
    assert response.status_code == 422
    assert "No conversation with this id in this workspace." in response.content.decode()
    theirs = legal_hold_place(
        workspace=other_workspace,
        actor=SYSTEM_ACTOR,
        reason="theirs",
        conversation=foreign_conversation,
    )
    assert "theirs" not in client.get("/compliance/holds/").content.decode()
    response = client.post(f"/compliance/holds/{theirs.pk}/release/", {"reason": "mine now"})
    assert response.status_code == 404
    assert LegalHold.objects.get(pk=theirs.pk).released_at is None


def test_releasing_a_hold_needs_a_reason_and_is_audited(login, workspace, quiet_conversation):
    hold = legal_hold_place(
        workspace=workspace, actor=SYSTEM_ACTOR, reason="r", conversation=quiet_conversation
    )
    client = login("compliance")
    refused = client.post(f"/compliance/holds/{hold.pk}/release/", {"reason": " "}, **HX)
    assert refused.status_code == 422 and "A reason is required." in refused.content.decode()
    response = client.post(f"/compliance/holds/{hold.pk}/release/", {"reason": "settled"}, **HX)
    assert response.status_code == 200 and "released" in response.content.decode()
    hold.refresh_from_db()
    assert hold.released_at is not None and hold.release_reason == "settled"
    assert AuditEvent.objects.get(action="legal_hold.release").reason == "settled"
    assert "No active holds." in client.get("/compliance/holds/").content.decode()
    again = client.post(f"/compliance/holds/{hold.pk}/release/", {"reason": "x"})
    assert again.status_code == 302  # refused, reported on the list
    assert "already released" in client.get("/compliance/holds/").content.decode()


def test_a_release_reason_too_long_is_refused_whole_not_cut(login, workspace, quiet_conversation):
    hold = legal_hold_place(
        workspace=workspace, actor=SYSTEM_ACTOR, reason="r", conversation=quiet_conversation
    )
    client = login("compliance")
    # A crafted form: the page's field holds 1,000 characters.
    refused = client.post(f"/compliance/holds/{hold.pk}/release/", {"reason": "x" * 2001}, **HX)
    assert refused.status_code == 422
    assert "at most 2000 characters" in refused.content.decode()
    hold.refresh_from_db()
    assert hold.released_at is None
    assert not AuditEvent.objects.filter(action="legal_hold.release").exists()


def test_a_hold_on_an_unknown_user_warns_then_is_placed_when_confirmed(login, dana_conversation):
    client = login("compliance")
    response = client.post("/compliance/holds/place/", {"end_user": "dnaa", "reason": "claim"})
    assert response.status_code == 422
    html = response.content.decode()
    assert "check the spelling" in html and 'name="confirm_unknown"' in html
    assert not LegalHold.objects.exists()
    confirmed = client.post(
        "/compliance/holds/place/",
        {"end_user": "dnaa", "reason": "claim", "confirm_unknown": "on"},
    )
    assert confirmed.status_code == 302 and LegalHold.objects.get().end_user_id == "dnaa"
