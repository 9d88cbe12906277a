"""/compliance/erasure/ (right to be forgotten): requests, their progress and
receipts, and the end user id checked before a hold or an erasure."""

from __future__ import annotations

import json

import pytest

from core.actors import SYSTEM_ACTOR
from governance.erasure import erasure_execute, erasure_request_create
from governance.holds import legal_hold_place
from governance.models import AuditEvent, ErasureRequest
from memory.models import Conversation, Message
from memory.services.conversations import conversation_create

HX = {"HTTP_HX_REQUEST": "true"}


def test_the_user_id_check_counts_conversations_or_warns(login, workspace, dana_conversation):
    conversation_create(workspace=workspace, user_id="dana", title="Second")
    client = login("compliance")
    known = client.get("/compliance/end-users/check/?end_user=dana&target=x", **HX)
    assert 'id="x"' in known.content.decode()
    assert "Covers 2 conversations." in known.content.decode()
    unknown = client.get("/compliance/end-users/check/?end_user=Dana", **HX).content.decode()
    assert "No conversation in this workspace has the end user id “Dana”" in unknown
    assert "Did you mean “dana”?" in unknown
    assert login("reviewer").get("/compliance/end-users/check/?end_user=dana").status_code == 403


def test_erasing_an_unknown_user_warns_instead_of_completing_with_nothing(login, dana_conversation):
    client = login("compliance")
    response = client.post("/compliance/erasure/request/", {"end_user": "dnaa", "reason": "gdpr"})
    assert response.status_code == 422
    assert "check the spelling" in response.content.decode()
    assert not ErasureRequest.objects.exists()
    client.post(
        "/compliance/erasure/request/",
        {"end_user": "dnaa", "reason": "gdpr", "confirm_unknown": "on"},
    )
    erasure = ErasureRequest.objects.get()
    erasure_execute(request_id=erasure.pk)
    html = client.get(f"/compliance/erasure/{erasure.pk}/").content.decode()
    assert "nothing was stored under the end user id" in html
    listing = client.get("/compliance/erasure/").content.decode()
    assert "nothing was stored under this id" in listing


def test_the_receipt_shows_its_hash_downloads_as_json_and_prints(login, dana_conversation):
    client = login("compliance")
    client.post("/compliance/erasure/request/", {"end_user": "dana", "reason": "gdpr art. 17"})
    erasure = ErasureRequest.objects.get()
    erasure_execute(request_id=erasure.pk)
    event = AuditEvent.objects.get(action="erasure.complete")
    html = client.get(f"/compliance/erasure/{erasure.pk}/").content.decode()
    assert event.after["idsSha256"] in html and event.hash in html
    assert f'href="/compliance/erasure/{erasure.pk}/receipt.json"' in html
    assert "data-print" in html
    download = client.get(f"/compliance/erasure/{erasure.pk}/receipt.json")
    assert download["Content-Disposition"] == (
        f'attachment; filename="erasure-receipt-{erasure.pk}.json"'
    )
    receipt = json.loads(download.content)
    assert receipt["endUserId"] == "dana" and receipt["status"] == "completed"
    assert receipt["counts"]["messages"] == 6
    assert receipt["idsSha256"] == event.after["idsSha256"]
    assert receipt["auditEvent"]["hash"] == event.hash


def test_the_erasure_list_polls_while_a_request_is_open(login, dana_conversation):
    client = login("compliance")
    client.post("/compliance/erasure/request/", {"end_user": "dana", "reason": "gdpr"})
    html = client.get("/compliance/erasure/").content.decode()
    assert 'hx-get="/compliance/erasure/requests/"' in html and "1 request in progress" in html
    erasure_execute(request_id=ErasureRequest.objects.get().pk)
    fragment = client.get("/compliance/erasure/requests/", **HX).content.decode()
    assert fragment.lstrip().startswith('<section id="requests"')
    assert "hx-trigger" not in fragment and "completed" in fragment


def test_hold_and_erasure_start_from_the_conversation_page_prefilled(login, dana_conversation):
    client = login("compliance")
    page = client.get(f"/conversations/{dana_conversation.pk}/").content.decode()
    assert f'href="/compliance/holds/?conversation={dana_conversation.pk}"' in page
    assert 'href="/compliance/erasure/?user=dana"' in page
    assert (
        f'value="{dana_conversation.pk}"'
        in client.get(f"/compliance/holds/?conversation={dana_conversation.pk}").content.decode()
    )
    assert 'value="dana"' in client.get("/compliance/holds/?user=dana").content.decode()
    assert 'value="dana"' in client.get("/compliance/erasure/?user=dana").content.decode()
    reviewer = login("reviewer").get(f"/conversations/{dana_conversation.pk}/").content.decode()
    assert "/compliance/holds/" not in reviewer


ROLE_403 = '<strong class="required-role">compliance officer</strong>'


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
def test_viewers_and_reviewers_cannot_see_or_request_erasure(login, role, dana_conversation):
    client = login(role)
    for response in (
        client.get("/compliance/erasure/"),
        client.post("/compliance/erasure/request/", {"end_user": "dana", "reason": "gdpr"}),
    ):
        assert response.status_code == 403
        html = response.content.decode()
        assert ROLE_403 in html and f"Your role there is <strong>{role}</strong>" in html
    assert not ErasureRequest.objects.exists()


@pytest.mark.parametrize("role", ["compliance", "admin"])
def test_the_erasure_page_lists_requests_with_status_and_counts(
    login, role, workspace, dana_conversation
):
    erasure = erasure_request_create(
        workspace=workspace, actor=SYSTEM_ACTOR, end_user_id="dana", reason="asked by email"
    )
    erasure_execute(request_id=erasure.pk)
    html = login(role).get("/compliance/erasure/").content.decode()
    assert f'id="erasure-{erasure.pk}"' in html and "<code>dana</code>" in html
    assert "completed" in html and "messages: 6" in html
    assert 'href="/compliance/erasure/"' in html and 'aria-current="page">Erasure' in html


def test_requesting_erasure_queues_it_and_is_audited(login, dana_conversation):
    client = login("compliance")
    response = client.post(
        "/compliance/erasure/request/", {"end_user": "dana", "reason": "gdpr art. 17"}, **HX
    )
    assert response.status_code == 201
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="erasure"') and "<html" not in html
    erasure = ErasureRequest.objects.get()
    assert erasure.status == "pending" and f"Erasure request {erasure.pk} queued." in html
    event = AuditEvent.objects.get(action="erasure.request")
    assert (event.target_id, event.actor_role, event.reason) == (
        str(erasure.pk),
        "compliance",
        "gdpr art. 17",
    )


def test_requesting_erasure_without_js_redirects_to_its_detail(login, dana_conversation):
    response = login("admin").post(
        "/compliance/erasure/request/", {"end_user": "dana", "reason": "gdpr"}
    )
    erasure = ErasureRequest.objects.get()
    assert response["Location"] == f"/compliance/erasure/{erasure.pk}/"


def test_a_legal_hold_refuses_erasure_with_the_reason_next_to_the_form(
    login, workspace, dana_conversation
):
    legal_hold_place(
        workspace=workspace, actor=SYSTEM_ACTOR, reason="litigation 42", end_user_id="dana"
    )
    response = login("compliance").post(
        "/compliance/erasure/request/", {"end_user": "dana", "reason": "gdpr"}, **HX
    )
    assert response.status_code == 422
    html = response.content.decode()
    erasure = ErasureRequest.objects.get()
    assert erasure.status == "refused"
    assert 'id="erasure-refused"' in html and f"Erasure request {erasure.pk} refused" in html
    assert "legal hold" in html.lower()
    assert AuditEvent.objects.filter(action="erasure.refuse").count() == 1
    assert Message.objects.filter(conversation=dana_conversation).count() == 6


@pytest.mark.parametrize(
    ("data", "field_error", "message"),
    [
        ({"end_user": "", "reason": "gdpr"}, "end_user", "Give the end user id to erase."),
        ({"end_user": "dana", "reason": ""}, "reason", "Give a reason: every erasure"),
        ({"end_user": "   ", "reason": "gdpr"}, "end_user", "Give the end user id to erase."),
    ],
)
def test_a_bad_request_is_refused_next_to_its_field(
    login, dana_conversation, data, field_error, message
):
    response = login("compliance").post("/compliance/erasure/request/", data, **HX)
    assert response.status_code == 422
    html = response.content.decode()
    assert message in html
    assert f'id="id_{field_error}"' in html
    assert not ErasureRequest.objects.exists()


def test_the_detail_is_polled_while_pending_then_shows_the_receipt(login, dana_conversation):
    client = login("compliance")
    client.post("/compliance/erasure/request/", {"end_user": "dana", "reason": "gdpr"})
    erasure = ErasureRequest.objects.get()
    url = f"/compliance/erasure/{erasure.pk}/"
    page = client.get(url).content.decode()
    assert "Erasure request" in page and "<html" in page
    polled = client.get(url, **HX).content.decode()
    assert polled.lstrip().startswith('<article id="erasure-status"')
    assert f'hx-get="{url}"' in polled and 'hx-trigger="every 2s"' in polled
    assert "pending" in polled

    erasure_execute(request_id=erasure.pk)  # what the worker does
    polled = client.get(url, **HX).content.decode()
    assert "hx-trigger" not in polled and "completed" in polled
    assert '<dd id="count-messages">6</dd>' in polled
    assert not Conversation.objects.filter(pk=dana_conversation.pk).exists()


def test_another_workspaces_erasure_request_is_not_found(login, other_workspace):
    theirs = erasure_request_create(
        workspace=other_workspace, actor=SYSTEM_ACTOR, end_user_id="eve", reason="gdpr"
    )
    client = login("compliance")
    assert client.get(f"/compliance/erasure/{theirs.pk}/").status_code == 404
    assert "<code>eve</code>" not in client.get("/compliance/erasure/").content.decode()


def test_erasure_refuses_get_on_the_request_url(login, dana_conversation):
    assert login("compliance").get("/compliance/erasure/request/").status_code == 405
