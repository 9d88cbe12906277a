"""More compliance pages: /compliance/erasure/ (right to be forgotten) and
/compliance/redaction/ (the redaction policy editor and its live preview)."""

from __future__ import annotations

import pytest

from core.actors import SYSTEM_ACTOR
from governance.erasure import erasure_execute, erasure_request_create
from governance.holds import legal_hold_place
from governance.models import AuditEvent, ErasureRequest, RedactionPolicy
from memory.models import Conversation, Message
from memory.services import conversation_create
from tests.dashboard.factories import chat
from tests.governance.test_redaction_support import set_policy

HX = {"HTTP_HX_REQUEST": "true"}
ROLE_403 = '<strong class="required-role">compliance officer</strong>'


# --- erasure --------------------------------------------------------------------------------------


@pytest.fixture
def dana(workspace) -> Conversation:
    """End user dana with one conversation of six messages."""
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Refund")
    chat(conversation)
    return conversation


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
def test_viewers_and_reviewers_cannot_see_or_request_erasure(login, role, dana):
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
def test_the_erasure_page_lists_requests_with_status_and_counts(login, role, workspace, dana):
    erasure = erasure_request_create(
        workspace=workspace, actor=SYSTEM_ACTOR, end_user_id="dana", reason="asked by email"
    )
    erasure_execute(request_id=erasure.pk)
    html = login(role).get("/compliance/erasure/").content.decode()
    assert f'id="erasure-{erasure.pk}"' in html and "<code>dana</code>" in html
    assert "completed" in html and "messages: 6" in html
    assert 'href="/compliance/erasure/"' in html and 'aria-current="page">Erasure' in html


def test_requesting_erasure_queues_it_and_is_audited(login, dana):
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


def test_requesting_erasure_without_js_redirects_to_its_detail(login, dana):
    response = login("admin").post(
        "/compliance/erasure/request/", {"end_user": "dana", "reason": "gdpr"}
    )
    erasure = ErasureRequest.objects.get()
    assert response["Location"] == f"/compliance/erasure/{erasure.pk}/"


def test_a_legal_hold_refuses_erasure_with_the_reason_next_to_the_form(login, workspace, dana):
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
    assert Message.objects.filter(conversation=dana).count() == 6


@pytest.mark.parametrize(
    ("data", "field_error", "message"),
    [
        ({"end_user": "", "reason": "gdpr"}, "end_user", "Give the end user id to erase."),
        ({"end_user": "dana", "reason": ""}, "reason", "Give a reason: every erasure"),
        ({"end_user": "   ", "reason": "gdpr"}, "end_user", "Give the end user id to erase."),
    ],
)
def test_a_bad_request_is_refused_next_to_its_field(login, dana, data, field_error, message):
    response = login("compliance").post("/compliance/erasure/request/", data, **HX)
    assert response.status_code == 422
    html = response.content.decode()
    assert message in html
    assert f'id="id_{field_error}"' in html
    assert not ErasureRequest.objects.exists()


def test_the_detail_is_polled_while_pending_then_shows_the_receipt(login, dana):
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
    assert not Conversation.objects.filter(pk=dana.pk).exists()


def test_another_workspaces_erasure_request_is_not_found(login, other_workspace):
    theirs = erasure_request_create(
        workspace=other_workspace, actor=SYSTEM_ACTOR, end_user_id="eve", reason="gdpr"
    )
    client = login("compliance")
    assert client.get(f"/compliance/erasure/{theirs.pk}/").status_code == 404
    assert "<code>eve</code>" not in client.get("/compliance/erasure/").content.decode()


def test_requesting_erasure_needs_the_csrf_token(csrf_client, dana):
    response = csrf_client("compliance").post(
        "/compliance/erasure/request/", {"end_user": "dana", "reason": "gdpr"}
    )
    assert response.status_code == 403
    assert not ErasureRequest.objects.exists()


def test_erasure_refuses_get_on_the_request_url(login, dana):
    assert login("compliance").get("/compliance/erasure/request/").status_code == 405


# --- redaction policy -----------------------------------------------------------------------------

EMAIL = "dana.pierce@example.com"


def _policy_post(**changes: object) -> dict[str, object]:
    data: dict[str, object] = {
        "entities": ["EMAIL_ADDRESS", "PHONE_NUMBER"],
        "score_threshold": "0.5",
        "default_operator": "replace",
        "operators": "EMAIL_ADDRESS=mask",
        "allow_list": "support@acme.test",
        "deny_list": "ORD-123456\nProject Falcon",
        "review_min_score": "0.4",
        "review_max_score": "0.7",
        "keep_originals": "on",
        "reason": "DPIA 2026-04: mask e-mail addresses",
    }
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
def test_viewers_and_reviewers_cannot_see_or_change_the_policy(login, role, workspace):
    client = login(role)
    for response in (
        client.get("/compliance/redaction/"),
        client.post("/compliance/redaction/save/", _policy_post()),
        client.post("/compliance/redaction/preview/", {"text": EMAIL}, **HX),
    ):
        assert response.status_code == 403
        assert ROLE_403 in response.content.decode()
    assert not RedactionPolicy.objects.exists()
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize("role", ["compliance", "admin"])
def test_the_editor_shows_the_policy_without_creating_it(login, role, workspace):
    html = login(role).get("/compliance/redaction/").content.decode()
    assert "version 1" in html and 'name="score_threshold" value="0.5"' in html
    assert "keyup changed delay:400ms from:#preview-input" in html
    assert 'type="checkbox" name="entities" value="EMAIL_ADDRESS"' in html
    assert 'aria-current="page">Redaction policy' in html
    assert not RedactionPolicy.objects.exists()  # reads never create it


def test_saving_the_policy_bumps_the_version_and_is_audited(login, workspace):
    client = login("compliance")
    response = client.post("/compliance/redaction/save/", _policy_post(), **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="policy"') and "<html" not in html
    assert "Redaction policy saved: version 2." in html
    policy = RedactionPolicy.objects.get(workspace=workspace)
    assert policy.version == 2
    assert policy.entities == ["EMAIL_ADDRESS", "PHONE_NUMBER"]
    assert policy.operators == {"EMAIL_ADDRESS": "mask"}
    assert policy.allow_list == ["support@acme.test"]
    assert policy.deny_list == ["ORD-123456", "Project Falcon"]
    assert policy.keep_originals and not policy.redact_at_ingest
    event = AuditEvent.objects.get(action="redaction_policy.update")
    assert event.actor_role == "compliance" and event.after["version"] == 2
    assert event.reason == "DPIA 2026-04: mask e-mail addresses"
    assert "Project Falcon" not in str(event.after)  # lists are kept as digests
    # Saving the same again changes nothing: no new version, no new event.
    again = client.post("/compliance/redaction/save/", _policy_post(), **HX).content.decode()
    assert "Nothing changed." in again and "version 2" in again
    assert AuditEvent.objects.filter(action="redaction_policy.update").count() == 1


def test_saving_without_js_redirects_back_with_the_message(login, workspace):
    client = login("admin")
    response = client.post("/compliance/redaction/save/", _policy_post(redact_at_ingest="on"))
    assert response["Location"] == "/compliance/redaction/?saved=2"
    html = client.get("/compliance/redaction/").content.decode()
    assert "Redaction policy saved: version 2." in html
    assert RedactionPolicy.objects.get(workspace=workspace).redact_at_ingest


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"score_threshold": "1.5"}, "score_threshold", "Must be between 0 and 1."),
        ({"entities": ["SHOE_SIZE"]}, "entities", "Select a valid choice"),
        ({"operators": "EMAIL_ADDRESS=shout"}, "operators", "shout is not an operator"),
        ({"operators": "SHOE_SIZE=mask"}, "operators", "SHOE_SIZE is not an entity type"),
        ({"operators": "EMAIL_ADDRESS"}, "operators", "Write ENTITY=operator"),
        ({"review_min_score": "0.8"}, "review_min_score", "Must not be above “Review below"),
        ({"default_operator": "burn"}, "default_operator", "Choose one of the operators"),
        ({"reason": ""}, "reason", "Give a reason"),
    ],
)
def test_a_bad_policy_is_refused_next_to_its_field(login, workspace, changes, field, message):
    response = login("compliance").post(
        "/compliance/redaction/save/", _policy_post(**changes), **HX
    )
    assert response.status_code == 422
    html = response.content.decode()
    # The error follows the field's input (see _field.html) and comes before the next one.
    field_at = html.index(f'name="{field}"')
    assert message in html[field_at:]
    end = "</fieldset>" if field != "reason" else 'id="save-policy"'
    assert html.index(message, field_at) < html.index(end, field_at)
    assert 'id="form-error-summary"' in html
    assert not AuditEvent.objects.filter(action="redaction_policy.update").exists()


def test_the_preview_shows_the_redacted_text_and_findings(login, workspace):
    client = login("compliance")
    client.post("/compliance/redaction/save/", _policy_post(), **HX)
    response = client.post(
        "/compliance/redaction/preview/", {"text": f"Write to {EMAIL} about Project Falcon."}, **HX
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="preview-result"') and "<html" not in html
    assert 'id="preview-draft"' in html and "Change the policy to compare." in html
    assert "EMAIL_ADDRESS" in html and "DENY_LIST" in html
    preview = html[html.index('<pre id="preview-text">') : html.index("</pre>")]
    assert EMAIL not in preview and "Project Falcon" not in preview
    assert f"<mark>{EMAIL}</mark>" in html  # the finding's value, from the typed text
    assert response["Cache-Control"] == "private, no-store"
    assert not AuditEvent.objects.filter(action__startswith="redaction_finding").exists()
    empty = client.post("/compliance/redaction/preview/", {"text": "Nothing here."}, **HX)
    assert 'id="preview-none"' in empty.content.decode()


def test_the_preview_works_without_js(login, workspace):
    html = (
        login("compliance")
        .post("/compliance/redaction/preview/", {"text": f"Mail {EMAIL}"})
        .content.decode()
    )
    assert "<html" in html and "EMAIL_ADDRESS" in html and 'id="preview-text"' in html


def test_the_preview_uses_this_workspaces_policy_only(login, workspace, other_workspace):
    set_policy(other_workspace, deny_list=["Project Falcon"])
    html = (
        login("compliance")
        .post("/compliance/redaction/preview/", {"text": "About Project Falcon."}, **HX)
        .content.decode()
    )
    assert "DENY_LIST" not in html


def test_every_policy_post_needs_the_csrf_token(csrf_client, workspace):
    client = csrf_client("compliance")
    assert client.post("/compliance/redaction/save/", _policy_post()).status_code == 403
    assert client.post("/compliance/redaction/preview/", {"text": EMAIL}).status_code == 403
    assert not RedactionPolicy.objects.exists()
