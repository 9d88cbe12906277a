"""/compliance/review/: the redaction review queue, its counts and filters, and
each decision (one or in bulk) with its reason, audited."""

from __future__ import annotations

import pytest

from governance.models import AuditEvent, RedactionFinding
from memory.models import Observation
from memory.pipeline.reflector import observations_for_reflection
from memory.services.conversations import conversation_create
from tests.memory.factories import ObservationFactory

HX = {"HTTP_HX_REQUEST": "true"}


PHONE = "(977) 625-2661"


def _pending(conversation, count: int = 1):
    for n in range(count):
        ObservationFactory(conversation=conversation, text=f"User said {PHONE} on call {n}.")
    observations_for_reflection(conversation=conversation)
    return list(RedactionFinding.objects.filter(status="pending_review").order_by("id"))


def test_viewers_cannot_open_or_decide_the_review_queue(login, quiet_conversation):
    [finding] = _pending(quiet_conversation)
    client = login("viewer")
    for response in (
        client.get("/compliance/review/"),
        client.post(f"/compliance/review/{finding.pk}/approve/"),
        client.post("/compliance/review/bulk/", {"decision": "approve", "finding": finding.pk}),
    ):
        assert response.status_code == 403
        assert '<strong class="required-role">reviewer</strong>' in response.content.decode()
    assert RedactionFinding.objects.get(pk=finding.pk).status == "pending_review"


def test_a_reviewer_works_the_review_queue_and_sees_nothing_else_of_compliance(
    login, quiet_conversation, workspace
):
    [finding] = _pending(quiet_conversation)
    client = login("reviewer")
    nav = client.get("/conversations/").content.decode()
    assert 'href="/compliance/review/"' in nav and 'href="/compliance/audit/"' not in nav
    page = client.get("/compliance/review/").content.decode()
    assert f'id="finding-{finding.pk}"' in page
    assert 'href="/compliance/audit/"' not in page  # the compliance nav shows the queue only

    decided = client.post(
        f"/compliance/review/{finding.pk}/dismiss/", {"reason": "a support line, not theirs"}
    )
    assert decided.status_code == 302
    assert RedactionFinding.objects.get(pk=finding.pk).status != "pending_review"
    event = AuditEvent.objects.get(workspace=workspace, action="redaction_finding.dismiss")
    assert event.actor_role == "reviewer"
    assert event.reason == "a support line, not theirs"
    for page in ("/compliance/audit/", "/compliance/redaction/", "/compliance/holds/"):
        assert client.get(page).status_code == 403


def test_the_queue_shows_the_text_with_the_finding_marked(login, quiet_conversation):
    [finding] = _pending(quiet_conversation)
    response = login("compliance").get("/compliance/review/")
    assert response.status_code == 200
    html = response.content.decode()
    assert f'<mark class="finding-value">{PHONE}</mark>' in html
    assert "User said " in html and " on call 0." in html
    assert f'id="finding-{finding.pk}"' in html and "PHONE_NUMBER" in html
    fragment = login("admin").get("/compliance/review/", **HX).content.decode()
    assert fragment.lstrip().startswith('<section id="queue"') and "<html" not in fragment


def test_approving_redacts_the_value_and_writes_an_audit_event(login, quiet_conversation):
    [finding] = _pending(quiet_conversation)
    response = login("compliance").post(
        f"/compliance/review/{finding.pk}/approve/", {"reason": "a phone"}, **HX
    )
    assert response.status_code == 200
    assert "redacted after review" in response.content.decode()
    finding.refresh_from_db()
    assert finding.status == "approved"
    assert PHONE not in Observation.objects.get(pk=finding.target_id).text
    event = AuditEvent.objects.get(action="redaction_finding.approve")
    assert (event.target_id, event.reason, event.actor_role) == (
        str(finding.pk),
        "a phone",
        "compliance",
    )


def test_dismissing_keeps_the_value_and_without_js_redirects_back(login, quiet_conversation):
    [finding] = _pending(quiet_conversation)
    client = login("admin")
    response = client.post(f"/compliance/review/{finding.pk}/dismiss/", {"reason": "not PII"})
    assert response.status_code == 302 and response["Location"] == "/compliance/review/"
    finding.refresh_from_db()
    assert finding.status == "dismissed"
    assert PHONE in Observation.objects.get(pk=finding.target_id).text
    assert AuditEvent.objects.filter(action="redaction_finding.dismiss").count() == 1
    html = client.get("/compliance/review/").content.decode()
    assert f"Finding {finding.pk} kept after review." in html
    assert "Nothing waiting for review" in html


def test_deciding_twice_is_refused_with_the_reason(login, quiet_conversation):
    [finding] = _pending(quiet_conversation)
    client = login("compliance")
    client.post(f"/compliance/review/{finding.pk}/approve/", {"reason": "a phone"}, **HX)
    again = client.post(f"/compliance/review/{finding.pk}/dismiss/", {"reason": "no"}, **HX)
    assert again.status_code == 422
    assert "already decided" in again.content.decode()
    assert RedactionFinding.objects.get(pk=finding.pk).status == "approved"


def test_bulk_approve_decides_every_checked_finding(login, quiet_conversation):
    first, second, third = _pending(quiet_conversation, 3)
    response = login("compliance").post(
        "/compliance/review/bulk/",
        {"decision": "approve", "finding": [first.pk, second.pk], "reason": "phones"},
        **HX,
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "2 of 2 findings approved." in html and f'id="finding-{third.pk}"' in html
    statuses = dict(RedactionFinding.objects.values_list("pk", "status"))
    assert (statuses[first.pk], statuses[second.pk], statuses[third.pk]) == (
        "approved",
        "approved",
        "pending_review",
    )
    assert AuditEvent.objects.filter(action="redaction_finding.approve").count() == 2


def test_bulk_dismiss_without_js_and_with_nothing_ticked(login, quiet_conversation):
    [finding] = _pending(quiet_conversation)
    client = login("compliance")
    response = client.post("/compliance/review/bulk/", {"decision": "dismiss"})
    assert response.status_code == 302
    assert "Tick at least one finding first." in client.get("/compliance/review/").content.decode()
    bulk = {"decision": "dismiss", "finding": [finding.pk], "reason": "a test number"}
    client.post("/compliance/review/bulk/", bulk)
    assert RedactionFinding.objects.get(pk=finding.pk).status == "dismissed"
    assert client.post("/compliance/review/bulk/", {"decision": "burn"}).status_code == 404


def test_another_workspaces_finding_is_not_found(login, foreign_conversation, other_workspace):
    theirs = conversation_create(workspace=other_workspace, user_id="eve")
    [finding] = _pending(theirs)
    client = login("compliance")
    assert client.post(f"/compliance/review/{finding.pk}/approve/").status_code == 404
    assert client.post(f"/compliance/review/{finding.pk}/burn/").status_code == 404
    bulk = {"decision": "approve", "finding": [finding.pk], "reason": "x"}
    client.post("/compliance/review/bulk/", bulk)
    assert RedactionFinding.objects.get(pk=finding.pk).status == "pending_review"
    assert f'id="finding-{finding.pk}"' not in client.get("/compliance/review/").content.decode()


# Kept beside the route walk (tests/dashboard/test_csrf.py), which plants a token of its own:
# this one sends the token the review page itself sets, in the header htmx sends it in, and
# checks the decision is then made.
def test_every_review_post_needs_the_csrf_token(csrf_client, quiet_conversation):
    [finding] = _pending(quiet_conversation)
    client = csrf_client("compliance")
    assert client.post(f"/compliance/review/{finding.pk}/approve/").status_code == 403
    bulk = {"decision": "approve", "finding": [finding.pk]}
    assert client.post("/compliance/review/bulk/", bulk).status_code == 403
    assert RedactionFinding.objects.get(pk=finding.pk).status == "pending_review"
    page = client.get("/compliance/review/")
    token = page.cookies["csrftoken"].value
    response = client.post(
        f"/compliance/review/{finding.pk}/approve/", {"reason": "a phone"}, HTTP_X_CSRFTOKEN=token
    )
    assert response.status_code == 302
    assert RedactionFinding.objects.get(pk=finding.pk).status == "approved"


def _findings(conversation, texts):
    for text in texts:
        ObservationFactory(conversation=conversation, text=text)
    observations_for_reflection(conversation=conversation)
    return list(RedactionFinding.objects.filter(status="pending_review").order_by("id"))


@pytest.fixture
def pending(workspace):
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Call notes")
    return conversation, _findings(conversation, [f"Call {PHONE} now.", f"Or {PHONE} later."])


def test_the_queue_counts_and_names_the_conversation(login, pending):
    conversation, findings = pending
    html = login("compliance").get("/compliance/review/").content.decode()
    assert f"{len(findings)} findings pending" in html
    assert f"{len(findings)} PHONE_NUMBER" in html
    assert 'class="finding-conversation">Call notes <span class="muted">(dana)</span>' in html


def test_the_queue_filters_by_entity_type_and_score(login, pending):
    _, findings = pending
    client = login("compliance")
    score = findings[0].score
    html = client.get(f"/compliance/review/?entity_type=PHONE_NUMBER&min_score={score}").content
    assert html.decode().count('<tr id="finding-') == len(findings)
    above = client.get(f"/compliance/review/?min_score={min(score + 0.01, 1)}").content.decode()
    assert '<tr id="finding-' not in above and "matches these filters" in above
    bad = client.get("/compliance/review/?min_score=0.9&max_score=0.1").content.decode()
    assert "Must be above “Score from”." in bad


def test_a_decision_without_a_reason_is_refused_and_changes_nothing(login, pending):
    _, [finding, *_] = pending
    client = login("compliance")
    response = client.post(f"/compliance/review/{finding.pk}/approve/", **HX)
    assert response.status_code == 422 and "Give a reason" in response.content.decode()
    bulk = client.post(
        "/compliance/review/bulk/", {"decision": "dismiss", "finding": [finding.pk]}, **HX
    )
    assert bulk.status_code == 422 and "Give a reason" in bulk.content.decode()
    assert RedactionFinding.objects.get(pk=finding.pk).status == "pending_review"
    assert not AuditEvent.objects.filter(action__startswith="redaction_finding.").exists()


def test_each_decision_is_audited_with_the_typed_reason(login, pending):
    _, [first, second] = pending
    client = login("compliance")
    client.post(f"/compliance/review/{first.pk}/dismiss/", {"reason": "test number"}, **HX)
    response = client.post(
        "/compliance/review/bulk/",
        {"decision": "approve", "finding": [second.pk], "reason": "a real phone"},
        **HX,
    )
    assert "1 of 1 finding approved." in response.content.decode()
    reasons = dict(
        AuditEvent.objects.filter(action__startswith="redaction_finding.").values_list(
            "action", "reason"
        )
    )
    assert reasons == {
        "redaction_finding.dismiss": "test number",
        "redaction_finding.approve": "a real phone",
    }


def test_bulk_buttons_show_progress_and_keep_the_filters(login, pending):
    html = login("compliance").get("/compliance/review/?entity_type=PHONE_NUMBER").content.decode()
    assert 'hx-indicator="#bulk-progress"' in html and 'id="bulk-progress"' in html
    assert '<input type="hidden" name="entity_type" value="PHONE_NUMBER">' in html
