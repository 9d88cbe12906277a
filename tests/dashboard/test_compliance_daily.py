"""The compliance pages as an officer uses them every day: the audit log's filters and
links, the review queue's counts, filters and reasons, the redaction policy editor's
draft preview and errors, retention policies edited in the dashboard with a dry run
that names conversations, and the end user id checked before a hold or an erasure."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from core.actors import SYSTEM_ACTOR
from governance.audit import audit_record
from governance.erasure import erasure_execute
from governance.holds import legal_hold_place
from governance.models import (
    AuditEvent,
    ErasureRequest,
    LegalHold,
    RedactionFinding,
    RedactionPolicy,
    RescanRun,
    RetentionPolicy,
)
from governance.retention import retention_policy_create
from memory import pipeline
from memory.models import Conversation, Message
from memory.services import MessageInput, conversation_create, messages_append
from tests.dashboard.factories import chat
from tests.governance.test_redaction_support import set_policy
from tests.memory.factories import ObservationFactory

HX = {"HTTP_HX_REQUEST": "true"}
PHONE = "(977) 625-2661"
EMAIL = "dana.pierce@example.com"


@pytest.fixture
def dana(workspace) -> Conversation:
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Refund")
    chat(conversation)
    return conversation


def _event(workspace, action: str, target_type: str = "thing", target_id: str = "1", **kw):
    return audit_record(
        workspace_id=workspace.pk,
        actor=kw.pop("actor", SYSTEM_ACTOR),
        action=action,
        target_type=target_type,
        target_id=target_id,
        reason=kw.pop("reason", "r"),
        **kw,
    )


def _rows(html: str) -> int:
    return html.count('<tr id="event-')


# --- 7. audit log ---------------------------------------------------------------------------------


def test_the_action_filter_matches_a_prefix_and_stays_in_the_url(login, workspace):
    _event(workspace, "observation.update")
    _event(workspace, "observation.delete")
    _event(workspace, "erasure.request")
    client = login("compliance")
    html = client.get("/compliance/audit/?action=observation.").content.decode()
    assert _rows(html) == 2 and "erasure.request" not in html.split('id="events"')[1]
    assert 'value="observation."' in html
    assert 'href="/compliance/audit/export.jsonl?action=observation."' in html


def test_the_actor_filter_takes_a_user_name(login, workspace, member):
    officer = member("compliance")
    actor = SYSTEM_ACTOR.__class__(type="user", id=str(officer.pk), role="compliance")
    _event(workspace, "legal_hold.place", actor=actor)
    _event(workspace, "retention_sweep.run")
    html = login("admin").get(f"/compliance/audit/?actor={officer.username}").content.decode()
    assert _rows(html) == 1 and "legal_hold.place" in html
    assert f"{officer.username} <span" in html  # the name, not only "user 12"
    system = login("admin").get("/compliance/audit/?actor=system").content.decode()
    assert _rows(system) == 1 and "retention_sweep.run" in system


def test_the_date_range_is_inclusive_and_a_reversed_range_is_explained(login, workspace):
    _event(workspace, "today.event")
    today = timezone.localdate().isoformat()
    yesterday = (timezone.localdate() - timedelta(days=1)).isoformat()
    client = login("compliance")
    assert (
        _rows(client.get(f"/compliance/audit/?since={today}&until={today}").content.decode()) == 1
    )
    assert _rows(client.get(f"/compliance/audit/?until={yesterday}").content.decode()) == 0
    html = client.get(f"/compliance/audit/?since={today}&until={yesterday}").content.decode()
    assert "The end date is before the start date." in html


def test_the_conversation_filter_finds_events_on_it_and_its_items(login, workspace, dana):
    other = conversation_create(workspace=workspace, user_id="eve", title="Other")
    message = Message.objects.filter(conversation=dana).first()
    _event(workspace, "conversation.update", "conversation", str(dana.pk))
    _event(workspace, "message.redact", "message", str(message.pk))
    _event(workspace, "conversation.update", "conversation", str(other.pk))
    legal_hold_place(workspace=workspace, actor=SYSTEM_ACTOR, reason="claim", conversation=dana)
    client = login("compliance")
    html = client.get(f"/compliance/audit/?conversation={dana.pk}").content.decode()
    assert _rows(html) == 3 and str(other.pk) not in html.split('id="events"')[1]
    bad = client.get("/compliance/audit/?conversation=nope").content.decode()
    assert "Paste a conversation id" in bad


def test_the_target_filter_and_the_export_honour_the_filters(login, workspace):
    _event(workspace, "observation.update", "observation", "a")
    _event(workspace, "observation.update", "observation", "b")
    _event(workspace, "reflection.update", "reflection", "a")
    client = login("compliance")
    html = client.get("/compliance/audit/?target_type=observation&target_id=a").content.decode()
    assert _rows(html) == 1
    export = client.get("/compliance/audit/export.jsonl?action=observation&target_id=a")
    lines = [json.loads(line) for line in b"".join(export.streaming_content).splitlines()]
    assert [(e["action"], e["targetId"]) for e in lines] == [("observation.update", "a")]
    everything = client.get("/compliance/audit/export.jsonl")
    assert len(b"".join(everything.streaming_content).splitlines()) == 3


def test_targets_link_to_what_they_name(login, workspace, dana):
    observation = ObservationFactory(conversation=dana, text="Wants a refund.")
    hold = legal_hold_place(workspace=workspace, actor=SYSTEM_ACTOR, reason="x", conversation=dana)
    _event(workspace, "observation.update", "observation", str(observation.pk))
    _event(workspace, "observation.delete", "observation", "00000000-0000-0000-0000-000000000000")
    html = login("compliance").get("/compliance/audit/").content.decode()
    history = f"/conversations/{dana.pk}/observations/{observation.pk}/history/"
    assert f'href="{history}" class="target-link"' in html
    assert f'href="/compliance/holds/#hold-{hold.pk}" class="target-link"' in html
    # A target that no longer exists has no link.
    assert 'class="target-link"><code>00000000-0000-0000-0000-000000000000' not in html


def test_reveal_original_only_where_an_original_is_kept(login, workspace):
    set_policy(workspace, redact_at_ingest=True, keep_originals=True)
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Email")
    messages_append(
        conversation=conversation,
        items=[
            MessageInput(role="user", content=f"Mail me at {EMAIL}"),
            MessageInput(role="user", content="Nothing personal here."),
        ],
    )
    with_pii, plain = Message.objects.filter(conversation=conversation).order_by("seq")
    _event(workspace, "message.test", "message", str(with_pii.pk))
    _event(workspace, "message.test", "message", str(plain.pk))
    html = login("compliance").get("/compliance/audit/?action=message.test").content.decode()
    assert f'href="/compliance/originals/message/{with_pii.pk}/"' in html
    assert f"/compliance/originals/message/{plain.pk}/" not in html
    # The admin manages compliance but may not read originals: no link at all.
    admin = login("admin").get("/compliance/audit/?action=message.test").content.decode()
    assert "/compliance/originals/" not in admin


def test_an_observations_history_links_to_its_audit_events(login, dana):
    observation = ObservationFactory(conversation=dana, text="Wants a refund.")
    url = f"/conversations/{dana.pk}/observations/{observation.pk}/history/"
    link = f"/compliance/audit/?target_type=observation&amp;target_id={observation.pk}"
    assert link in login("compliance").get(url).content.decode()
    assert link not in login("reviewer").get(url).content.decode()


# --- 8. review queue ------------------------------------------------------------------------------


def _findings(conversation, texts):
    for text in texts:
        ObservationFactory(conversation=conversation, text=text)
    pipeline.observations_for_reflection(conversation=conversation)
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


# --- 9. redaction policy --------------------------------------------------------------------------


def _policy(**changes):
    data = {
        "entities": ["EMAIL_ADDRESS", "PHONE_NUMBER"],
        "score_threshold": "0.5",
        "default_operator": "replace",
        "operators": "",
        "allow_list": "",
        "deny_list": "",
        "review_min_score": "0.4",
        "review_max_score": "0.7",
        "reason": "DPIA review",
    }
    data.update(changes)
    return data


def test_every_error_is_shown_at_once_in_the_forms_words(login, workspace):
    response = login("compliance").post(
        "/compliance/redaction/save/",
        _policy(
            score_threshold="2",
            operators="EMAIL_ADDRESS=shout\nNOPE=mask",
            review_min_score="0.9",
            reason="",
        ),
        **HX,
    )
    assert response.status_code == 422
    html = response.content.decode()
    summary = html[html.index('id="form-error-summary"') : html.index("</ul>")]
    for label in ("Score threshold", "Per-entity operators", "Review from score", "Reason"):
        assert f">{label}</a>" in summary
    assert "shout is not an operator" in summary and "NOPE is not an entity type" in summary
    assert "reviewMaxScore" not in html and "scoreThreshold" not in html
    assert not AuditEvent.objects.filter(action="redaction_policy.update").exists()


def test_the_preview_compares_the_draft_with_the_saved_policy(login, workspace):
    set_policy(workspace, entities=["EMAIL_ADDRESS"], default_operator="replace")
    client = login("compliance")
    response = client.post(
        "/compliance/redaction/preview/",
        {
            **_policy(entities=["EMAIL_ADDRESS"], deny_list="Project Falcon"),
            "text": (f"Mail {EMAIL} about Project Falcon."),
        },
        **HX,
    )
    html = response.content.decode()
    saved = html[html.index('id="preview-saved"') : html.index('id="preview-draft"')]
    draft = html[html.index('id="preview-draft"') :]
    assert "DENY_LIST" not in saved and "DENY_LIST" in draft
    assert "Project Falcon" in saved.split("</pre>")[0]
    assert "Project Falcon" not in draft.split("</pre>")[0]
    assert not AuditEvent.objects.filter(action="redaction_policy.update").exists()
    assert RedactionPolicy.objects.get(workspace=workspace).deny_list == []
    invalid = client.post(
        "/compliance/redaction/preview/", {**_policy(score_threshold="7"), "text": EMAIL}, **HX
    ).content.decode()
    assert 'id="draft-invalid"' in invalid


def test_after_a_save_the_page_offers_a_rescan_that_runs_with_progress(login, workspace):
    client = login("compliance")
    response = client.post("/compliance/redaction/save/", _policy(), **HX)
    html = response.content.decode()
    assert 'id="rescan-offer"' in html and "Re-scan stored data under version 2?" in html
    assert AuditEvent.objects.get(action="redaction_policy.update").reason == "DPIA review"
    started = client.post(
        "/compliance/redaction/rescan/start/",
        {"tiers": ["messages", "observations", "reflections"], "reason": "policy v2"},
        **HX,
    )
    assert started.status_code == 201 and 'id="rescan-status"' in started.content.decode()
    assert RescanRun.objects.get().reason == "policy v2"
    # Without JS the save redirects to the page, which makes the same offer.
    page = client.get("/compliance/redaction/?saved=2").content.decode()
    assert 'id="rescan-offer"' in page
    assert 'id="rescan-offer"' not in client.get("/compliance/redaction/").content.decode()


# --- 10. retention --------------------------------------------------------------------------------


def _retention(**changes):
    data = {
        "name": "Support chats",
        "conversation_tag": "",
        "message_days": "1",
        "observation_days": "",
        "reflection_days": "",
        "enabled": "on",
        "reason": "Retention schedule v3",
    }
    data.update(changes)
    return data


def test_a_policy_is_created_and_edited_in_the_dashboard_with_a_reason(login, workspace):
    client = login("compliance")
    assert client.get("/compliance/retention/policies/new/").status_code == 200
    response = client.post("/compliance/retention/policies/new/", _retention())
    assert response.status_code == 302
    policy = RetentionPolicy.objects.get(workspace=workspace)
    assert (policy.message_days, policy.observation_days) == (1, None)
    created = AuditEvent.objects.get(action="retention_policy.create")
    assert created.reason == "Retention schedule v3"
    url = f"/compliance/retention/policies/{policy.pk}/"
    assert 'value="Support chats"' in client.get(url).content.decode()
    client.post(url, _retention(message_days="30", reason="Longer for disputes"))
    policy.refresh_from_db()
    assert policy.message_days == 30
    assert AuditEvent.objects.get(action="retention_policy.update").reason == "Longer for disputes"
    assert "Support chats" in client.get("/compliance/retention/").content.decode()


def test_a_bad_retention_policy_shows_every_error_in_the_forms_words(login, workspace):
    retention_policy_create(workspace=workspace, actor=SYSTEM_ACTOR, name="Default", reason="x")
    response = login("compliance").post(
        "/compliance/retention/policies/new/", _retention(message_days="0", reason="")
    )
    assert response.status_code == 422
    html = response.content.decode()
    assert "Keep it at least 1 day" in html and "Give a reason" in html
    duplicate = login("compliance").post("/compliance/retention/policies/new/", _retention())
    assert "already governs every untagged conversation" in duplicate.content.decode()
    assert RetentionPolicy.objects.count() == 1


def test_another_workspaces_policy_is_not_found(login, other_workspace):
    theirs = retention_policy_create(
        workspace=other_workspace, actor=SYSTEM_ACTOR, name="Theirs", reason="x"
    )
    assert (
        login("compliance").get(f"/compliance/retention/policies/{theirs.pk}/").status_code == 404
    )


def test_the_dry_run_lists_conversations_and_those_held_back(login, workspace, dana):
    held = conversation_create(workspace=workspace, user_id="eve", title="Disputed")
    chat(held)
    legal_hold_place(workspace=workspace, actor=SYSTEM_ACTOR, reason="claim", end_user_id="eve")
    retention_policy_create(
        workspace=workspace, actor=SYSTEM_ACTOR, name="short", message_days=1, reason="x"
    )
    client = login("compliance")
    response = client.post("/compliance/retention/dry-run/")
    html = client.get(response["Location"]).content.decode()
    assert "1 conversation would lose rows" in html
    assert f'<tr id="due-{dana.pk}">' in html and "Refund" in html
    assert "1 conversation with expired rows is held back by a legal hold" in html
    assert "Disputed" in html.split('id="held-conversations"')[1]


# --- 11. holds and erasure ------------------------------------------------------------------------


def test_the_user_id_check_counts_conversations_or_warns(login, workspace, dana):
    conversation_create(workspace=workspace, user_id="dana", title="Second")
    client = login("compliance")
    known = client.get("/compliance/end-users/check/?end_user=dana&target=x", **HX)
    assert 'id="x"' in known.content.decode()
    assert "Covers 2 conversations." in known.content.decode()
    unknown = client.get("/compliance/end-users/check/?end_user=Dana", **HX).content.decode()
    assert "No conversation in this workspace has the end user id “Dana”" in unknown
    assert "Did you mean “dana”?" in unknown
    assert login("reviewer").get("/compliance/end-users/check/?end_user=dana").status_code == 403


def test_a_hold_on_an_unknown_user_warns_then_is_placed_when_confirmed(login, dana):
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


def test_erasing_an_unknown_user_warns_instead_of_completing_with_nothing(login, dana):
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


def test_the_receipt_shows_its_hash_downloads_as_json_and_prints(login, dana):
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


def test_the_erasure_list_polls_while_a_request_is_open(login, dana):
    client = login("compliance")
    client.post("/compliance/erasure/request/", {"end_user": "dana", "reason": "gdpr"})
    html = client.get("/compliance/erasure/").content.decode()
    assert 'hx-get="/compliance/erasure/requests/"' in html and "1 request in progress" in html
    erasure_execute(request_id=ErasureRequest.objects.get().pk)
    fragment = client.get("/compliance/erasure/requests/", **HX).content.decode()
    assert fragment.lstrip().startswith('<section id="requests"')
    assert "hx-trigger" not in fragment and "completed" in fragment


def test_hold_and_erasure_start_from_the_conversation_page_prefilled(login, dana):
    client = login("compliance")
    page = client.get(f"/conversations/{dana.pk}/").content.decode()
    assert f'href="/compliance/holds/?conversation={dana.pk}"' in page
    assert 'href="/compliance/erasure/?user=dana"' in page
    assert (
        f'value="{dana.pk}"'
        in client.get(f"/compliance/holds/?conversation={dana.pk}").content.decode()
    )
    assert 'value="dana"' in client.get("/compliance/holds/?user=dana").content.decode()
    assert 'value="dana"' in client.get("/compliance/erasure/?user=dana").content.decode()
    reviewer = login("reviewer").get(f"/conversations/{dana.pk}/").content.decode()
    assert "/compliance/holds/" not in reviewer
