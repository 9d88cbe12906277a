"""The compliance pages: /compliance/audit/ (audit log, diff, export, chain badge),
/compliance/review/ (redaction review queue), /compliance/holds/ (legal holds),
/compliance/originals/ (restricted originals), /compliance/retention/ (dry run, sweeps)."""

from __future__ import annotations

import json
import re

import pytest

from core.actors import SYSTEM_ACTOR
from core.errors import MemdeskError
from governance.audit import audit_record
from governance.holds import legal_hold_place
from governance.models import AuditEvent, LegalHold, RedactionFinding, RetentionSweep
from governance.retention import (
    retention_dry_run,
    retention_policy_create,
    retention_sweep,
)
from memory import pipeline
from memory.models import Conversation, Message, Observation
from memory.services import (
    MessageInput,
    conversation_create,
    conversation_delete,
    messages_append,
)
from tests.dashboard.factories import chat
from tests.governance.test_audit import _tamper
from tests.governance.test_redaction_support import set_policy
from tests.memory.factories import ObservationFactory

HX = {"HTTP_HX_REQUEST": "true"}


def _record(workspace, n: int, *, action: str = "test.event", target_type: str = "thing"):
    return [
        audit_record(
            workspace_id=workspace.pk,
            actor=SYSTEM_ACTOR,
            action=action,
            target_type=target_type,
            target_id=str(i),
            before={"text": f"old {i}", "priority": "low"},
            after={"text": f"new {i}", "priority": "low"},
            reason=f"reason {i}",
        )
        for i in range(n)
    ]


# --- who may open the audit log -------------------------------------------------------------------


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
def test_viewers_and_reviewers_get_the_403_page_naming_the_roles(login, role, workspace):
    for url in ("/compliance/audit/", "/compliance/audit/export.jsonl"):
        response = login(role).get(url)
        assert response.status_code == 403
        html = response.content.decode()
        assert "To manage policies, holds and erasure in <strong>acme</strong>" in html
        assert '<strong class="required-role">compliance officer</strong>' in html
        assert '<strong class="required-role">admin</strong>' in html
        assert f"Your role there is <strong>{role}</strong>" in html


@pytest.mark.parametrize("role", ["compliance", "admin"])
def test_compliance_officers_and_admins_see_the_log_newest_first(login, role, workspace):
    _record(workspace, 3)
    response = login(role).get("/compliance/audit/")
    assert response.status_code == 200
    html = response.content.decode()
    assert html.index('id="event-3"') < html.index('id="event-2"') < html.index('id="event-1"')
    assert "reason 2" in html
    assert "Chain verified: 3 events" in html
    assert 'href="/compliance/audit/"' in html  # the nav link


def test_the_nav_link_is_shown_only_to_roles_that_may_open_it(login, workspace):
    assert b'href="/compliance/audit/"' not in login("viewer").get("/conversations/").content
    assert b'href="/compliance/audit/"' not in login("reviewer").get("/conversations/").content
    assert b'href="/compliance/audit/"' in login("compliance").get("/conversations/").content


def test_another_workspaces_events_are_not_listed(login, workspace, other_workspace):
    _record(other_workspace, 2, action="theirs.event")
    _record(workspace, 1, action="ours.event")
    html = login("compliance").get("/compliance/audit/").content.decode()
    assert "ours.event" in html and "theirs.event" not in html
    assert "Chain verified: 1 event" in html
    export = b"".join(login("compliance").get("/compliance/audit/export.jsonl").streaming_content)
    assert b"theirs.event" not in export


# --- filters, pages, diff -------------------------------------------------------------------------


def test_filters_narrow_the_log(login, workspace):
    _record(workspace, 2, action="observation.update", target_type="observation")
    _record(workspace, 2, action="message.redact", target_type="message")
    client = login("compliance")
    html = client.get("/compliance/audit/?action=message.redact").content.decode()
    assert "message.redact" in html and "<code>observation.update</code>" not in html
    html = client.get("/compliance/audit/?target_type=observation").content.decode()
    assert "<code>observation.update</code>" in html and "<code>message.redact</code>" not in html
    html = client.get("/compliance/audit/?action=nothing.like.this").content.decode()
    assert "No audit events match these filters" in html


def test_older_events_page_on_from_the_last_event_shown(login, workspace):
    _record(workspace, 55)
    client = login("admin")
    html = client.get("/compliance/audit/").content.decode()
    assert 'id="event-55"' in html and 'id="event-6"' in html and 'id="event-5"' not in html
    next_query = re.search(r'href="/compliance/audit/\?(cursor=[^"]+)"', html).group(1)
    fragment = client.get(f"/compliance/audit/?{next_query}", **HX).content.decode()
    assert fragment.lstrip().startswith('<section id="events"') and "<html" not in fragment
    assert 'id="event-5"' in fragment and 'id="event-1"' in fragment
    assert 'id="event-6"' not in fragment and "Older events" not in fragment
    # A cursor that this server did not write is ignored: the newest page.
    assert 'id="event-55"' in client.get("/compliance/audit/?cursor=x").content.decode()


def test_each_event_shows_its_before_and_after_diff(login, workspace):
    _record(workspace, 1)
    html = login("compliance").get("/compliance/audit/").content.decode()
    assert '<span class="diff-del">-  &quot;text&quot;: &quot;old 0&quot;</span>' in html
    assert '<span class="diff-add">+  &quot;text&quot;: &quot;new 0&quot;</span>' in html
    assert '<span class="diff-ctx">   &quot;priority&quot;: &quot;low&quot;,</span>' in html


def test_a_broken_chain_is_flagged_at_the_broken_event(login, workspace):
    events = _record(workspace, 4)
    _tamper("UPDATE governance_auditevent SET reason = %s WHERE id = %s", ["x", events[1].pk])
    html = login("compliance").get("/compliance/audit/").content.decode()
    assert "Chain broken at event #2" in html and "Chain verified" not in html


# --- export ---------------------------------------------------------------------------------------


def test_the_export_streams_json_lines_oldest_first_with_the_filters(login, workspace):
    _record(workspace, 2, action="a.one")
    _record(workspace, 1, action="b.two")
    client = login("compliance")
    html = client.get("/compliance/audit/?action=a.one").content.decode()
    assert 'href="/compliance/audit/export.jsonl?action=a.one"' in html
    response = client.get("/compliance/audit/export.jsonl?action=a.one")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    assert "attachment" in response["Content-Disposition"]
    rows = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    assert [r["sequence"] for r in rows] == [1, 2]
    assert {r["action"] for r in rows} == {"a.one"}
    assert rows[0]["before"] == {"text": "old 0", "priority": "low"} and rows[0]["hash"]


def test_the_audit_log_refuses_post(login, workspace):
    assert login("admin").post("/compliance/audit/").status_code == 405


def test_the_audit_log_needs_sign_in(client, db):
    response = client.get("/compliance/audit/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


# --- redaction review queue -----------------------------------------------------------------------

PHONE = "(977) 625-2661"


def _pending(conversation, count: int = 1):
    for n in range(count):
        ObservationFactory(conversation=conversation, text=f"User said {PHONE} on call {n}.")
    pipeline.observations_for_reflection(conversation=conversation)
    return list(RedactionFinding.objects.filter(status="pending_review").order_by("id"))


@pytest.fixture
def quiet(workspace) -> Conversation:
    """A conversation with no messages: its only findings are the ones a test makes."""
    return conversation_create(workspace=workspace, user_id="dana", title="Call notes")


def test_viewers_cannot_open_or_decide_the_review_queue(login, quiet):
    [finding] = _pending(quiet)
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
    login, quiet, workspace
):
    [finding] = _pending(quiet)
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


def test_the_queue_shows_the_text_with_the_finding_marked(login, quiet):
    [finding] = _pending(quiet)
    response = login("compliance").get("/compliance/review/")
    assert response.status_code == 200
    html = response.content.decode()
    assert f'<mark class="finding-value">{PHONE}</mark>' in html
    assert "User said " in html and " on call 0." in html
    assert f'id="finding-{finding.pk}"' in html and "PHONE_NUMBER" in html
    fragment = login("admin").get("/compliance/review/", **HX).content.decode()
    assert fragment.lstrip().startswith('<section id="queue"') and "<html" not in fragment


def test_approving_redacts_the_value_and_writes_an_audit_event(login, quiet):
    [finding] = _pending(quiet)
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


def test_dismissing_keeps_the_value_and_without_js_redirects_back(login, quiet):
    [finding] = _pending(quiet)
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


def test_deciding_twice_is_refused_with_the_reason(login, quiet):
    [finding] = _pending(quiet)
    client = login("compliance")
    client.post(f"/compliance/review/{finding.pk}/approve/", {"reason": "a phone"}, **HX)
    again = client.post(f"/compliance/review/{finding.pk}/dismiss/", {"reason": "no"}, **HX)
    assert again.status_code == 422
    assert "already decided" in again.content.decode()
    assert RedactionFinding.objects.get(pk=finding.pk).status == "approved"


def test_bulk_approve_decides_every_checked_finding(login, quiet):
    first, second, third = _pending(quiet, 3)
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


def test_bulk_dismiss_without_js_and_with_nothing_ticked(login, quiet):
    [finding] = _pending(quiet)
    client = login("compliance")
    response = client.post("/compliance/review/bulk/", {"decision": "dismiss"})
    assert response.status_code == 302
    assert "Tick at least one finding first." in client.get("/compliance/review/").content.decode()
    bulk = {"decision": "dismiss", "finding": [finding.pk], "reason": "a test number"}
    client.post("/compliance/review/bulk/", bulk)
    assert RedactionFinding.objects.get(pk=finding.pk).status == "dismissed"
    assert client.post("/compliance/review/bulk/", {"decision": "burn"}).status_code == 404


def test_another_workspaces_finding_is_not_found(login, foreign, other_workspace):
    theirs = conversation_create(workspace=other_workspace, user_id="eve")
    [finding] = _pending(theirs)
    client = login("compliance")
    assert client.post(f"/compliance/review/{finding.pk}/approve/").status_code == 404
    assert client.post(f"/compliance/review/{finding.pk}/burn/").status_code == 404
    bulk = {"decision": "approve", "finding": [finding.pk], "reason": "x"}
    client.post("/compliance/review/bulk/", bulk)
    assert RedactionFinding.objects.get(pk=finding.pk).status == "pending_review"
    assert f'id="finding-{finding.pk}"' not in client.get("/compliance/review/").content.decode()


def test_every_review_post_needs_the_csrf_token(csrf_client, quiet):
    [finding] = _pending(quiet)
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


# --- legal holds ----------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
def test_viewers_and_reviewers_cannot_see_or_place_holds(login, role, quiet):
    client = login(role)
    for response in (
        client.get("/compliance/holds/"),
        client.post("/compliance/holds/place/", {"conversation": quiet.pk, "reason": "x"}),
    ):
        assert response.status_code == 403
        assert '<strong class="required-role">compliance officer</strong>' in (
            response.content.decode()
        )
    assert not LegalHold.objects.exists()


def test_a_hold_placed_on_a_conversation_blocks_its_deletion_and_is_audited(login, quiet):
    client = login("compliance")
    assert client.get(f"/compliance/holds/?conversation={quiet.pk}").status_code == 200
    response = client.post(
        "/compliance/holds/place/", {"conversation": str(quiet.pk), "reason": "Case 42"}, **HX
    )
    assert response.status_code == 201
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="holds">') and "<html" not in html
    hold = LegalHold.objects.get()
    assert f'id="hold-{hold.pk}"' in html and "Case 42" in html and "placed." in html
    assert hold.conversation_id == quiet.pk
    event = AuditEvent.objects.get(action="legal_hold.place")
    assert (event.target_id, event.reason) == (str(hold.pk), "Case 42")
    with pytest.raises(MemdeskError) as refused:
        conversation_delete(conversation=quiet, actor=SYSTEM_ACTOR, reason="cleanup")
    assert refused.value.code == "legal_hold"


def test_a_hold_on_an_end_user_without_js_redirects_to_the_list(login, quiet):
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
def test_a_bad_hold_is_refused_with_the_reason(login, quiet, data, message):
    response = login("compliance").post("/compliance/holds/place/", data)
    assert response.status_code == 422
    assert message in response.content.decode()
    assert not LegalHold.objects.exists()


def test_another_workspaces_conversation_or_hold_is_not_found(login, foreign, other_workspace):
    client = login("compliance")
    response = client.post(
        "/compliance/holds/place/", {"conversation": str(foreign.pk), "reason": "x"}
    )
    assert response.status_code == 422
    assert "No conversation with this id in this workspace." in response.content.decode()
    theirs = legal_hold_place(
        workspace=other_workspace, actor=SYSTEM_ACTOR, reason="theirs", conversation=foreign
    )
    assert "theirs" not in client.get("/compliance/holds/").content.decode()
    response = client.post(f"/compliance/holds/{theirs.pk}/release/", {"reason": "mine now"})
    assert response.status_code == 404
    assert LegalHold.objects.get(pk=theirs.pk).released_at is None


def test_releasing_a_hold_needs_a_reason_and_is_audited(login, workspace, quiet):
    hold = legal_hold_place(workspace=workspace, actor=SYSTEM_ACTOR, reason="r", conversation=quiet)
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


def test_every_hold_post_needs_the_csrf_token(csrf_client, workspace, quiet):
    hold = legal_hold_place(workspace=workspace, actor=SYSTEM_ACTOR, reason="r", conversation=quiet)
    client = csrf_client("compliance")
    place = {"end_user": "dana", "reason": "x"}
    assert client.post("/compliance/holds/place/", place).status_code == 403
    assert client.post(f"/compliance/holds/{hold.pk}/release/", {"reason": "x"}).status_code == 403
    assert LegalHold.objects.count() == 1 and LegalHold.objects.get().released_at is None


# --- restricted originals -------------------------------------------------------------------------

EMAIL = "dana.whitfield@example.com"


@pytest.fixture
def redacted_message(workspace, quiet) -> Message:
    set_policy(workspace, redact_at_ingest=True, keep_originals=True)
    messages_append(
        conversation=quiet, items=[MessageInput(role="user", content=f"My email is {EMAIL}")]
    )
    message = Message.objects.get(conversation=quiet)
    assert EMAIL not in message.content
    return message


@pytest.mark.parametrize("role", ["viewer", "reviewer", "admin"])
def test_only_the_compliance_officer_may_reveal_an_original(login, role, redacted_message):
    url = f"/compliance/originals/message/{redacted_message.pk}/"
    client = login(role)
    for response in (client.get(url), client.post(url)):
        assert response.status_code == 403
        html = response.content.decode()
        assert "To read restricted originals in <strong>acme</strong>" in html
        assert '<strong class="required-role">compliance officer</strong> role' in html
        assert f"Your role there is <strong>{role}</strong>" in html
        assert EMAIL not in html
    assert not AuditEvent.objects.filter(action="restricted_original.read").exists()


def test_revealing_shows_the_original_and_writes_an_audit_event(login, redacted_message):
    url = f"/compliance/originals/message/{redacted_message.pk}/"
    client = login("compliance")
    page = client.get(url).content.decode()
    assert 'id="reveal-original"' in page and EMAIL not in page
    assert not AuditEvent.objects.filter(action="restricted_original.read").exists()
    response = client.post(url, **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="original"') and "<html" not in html
    assert f"My email is {EMAIL}" in html
    assert response["Cache-Control"] == "private, no-store"
    event = AuditEvent.objects.get(action="restricted_original.read")
    assert (event.target_type, event.target_id, event.actor_role) == (
        "message",
        str(redacted_message.pk),
        "compliance",
    )
    assert EMAIL not in str(event.after)
    assert f"My email is {EMAIL}" in client.post(url).content.decode()  # without htmx too


def test_the_audit_log_links_redacted_messages_to_their_reveal(login, redacted_message):
    link = f'href="/compliance/originals/message/{redacted_message.pk}/"'
    assert link in login("compliance").get("/compliance/audit/").content.decode()
    assert link not in login("admin").get("/compliance/audit/").content.decode()


def test_an_original_that_is_not_kept_or_not_ours_is_not_found(
    login, workspace, quiet, foreign, other_workspace
):
    client = login("compliance")
    kept_nowhere = Message.objects.filter(conversation=foreign).first()
    assert client.post(f"/compliance/originals/message/{kept_nowhere.pk}/").status_code == 404
    assert client.post(f"/compliance/originals/essay/{kept_nowhere.pk}/").status_code == 404
    assert not AuditEvent.objects.filter(action="restricted_original.read").exists()


def test_another_workspaces_original_is_not_found(login, other_workspace):
    set_policy(other_workspace, redact_at_ingest=True, keep_originals=True)
    theirs = conversation_create(workspace=other_workspace, user_id="eve")
    messages_append(conversation=theirs, items=[MessageInput(role="user", content=EMAIL)])
    message = Message.objects.get(conversation=theirs)
    response = login("compliance").post(f"/compliance/originals/message/{message.pk}/")
    assert response.status_code == 404 and EMAIL not in response.content.decode()


def test_revealing_needs_the_csrf_token(csrf_client, redacted_message):
    client = csrf_client("compliance")
    response = client.post(f"/compliance/originals/message/{redacted_message.pk}/")
    assert response.status_code == 403 and EMAIL not in response.content.decode()
    assert not AuditEvent.objects.filter(action="restricted_original.read").exists()


# --- retention ------------------------------------------------------------------------------------


@pytest.fixture
def expiring(workspace, quiet) -> Conversation:
    """Six messages three days old, and a policy that keeps messages one day."""
    chat(quiet)
    retention_policy_create(
        workspace=workspace, actor=SYSTEM_ACTOR, name="short", message_days=1, reason="test"
    )
    return quiet


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
def test_viewers_and_reviewers_cannot_see_or_run_retention(login, role, expiring):
    client = login(role)
    for response in (
        client.get("/compliance/retention/"),
        client.post("/compliance/retention/dry-run/"),
        client.post("/compliance/retention/run/"),
    ):
        assert response.status_code == 403
        assert '<strong class="required-role">compliance officer</strong>' in (
            response.content.decode()
        )
    assert not RetentionSweep.objects.exists()


def test_the_retention_page_lists_the_policies(login, expiring):
    html = login("compliance").get("/compliance/retention/").content.decode()
    assert "short" in html and "1 days" in html and "forever" in html
    assert "No sweeps yet." in html


def test_a_dry_run_counts_without_deleting(login, expiring):
    client = login("compliance")
    response = client.post("/compliance/retention/dry-run/", **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<article id="sweep-status"') and "hx-trigger" not in html
    assert '<dd id="count-messages">6</dd>' in html and "nothing was deleted" in html
    assert Message.objects.filter(conversation=expiring).count() == 6
    response = client.post("/compliance/retention/dry-run/")
    sweep = RetentionSweep.objects.order_by("-pk").first()
    assert response["Location"] == f"/compliance/retention/sweeps/{sweep.pk}/"


def test_run_now_queues_a_sweep_that_the_page_polls_until_its_receipt(login, expiring):
    client = login("compliance")
    response = client.post("/compliance/retention/run/", **HX)
    assert response.status_code == 201
    sweep = RetentionSweep.objects.get(dry_run=False)
    url = f"/compliance/retention/sweeps/{sweep.pk}/"
    html = response.content.decode()
    assert f'hx-get="{url}"' in html and 'hx-trigger="every 2s"' in html
    assert "pending" in html and "0 / 0 rows deleted" in html
    assert AuditEvent.objects.filter(action="retention_sweep.request").count() == 1
    # A second sweep is refused while the first is open.
    again = client.post("/compliance/retention/run/", **HX)
    assert again.status_code == 422 and "still pending" in again.content.decode()
    assert client.post("/compliance/retention/run/").status_code == 302  # without JS
    assert "still pending" in client.get("/compliance/retention/").content.decode()

    retention_sweep(sweep_id=sweep.pk)  # what the worker does
    polled = client.get(url, **HX).content.decode()
    assert "hx-trigger" not in polled and "completed" in polled
    assert "6 / 6 rows deleted" in polled and '<dd id="count-messages">6</dd>' in polled
    assert not Message.objects.filter(conversation=expiring).exists()
    assert "Retention sweep" in client.get(url).content.decode()  # the whole page


def test_run_now_without_js_redirects_to_the_sweep(login, expiring):
    response = login("admin").post("/compliance/retention/run/")
    sweep = RetentionSweep.objects.get()
    assert response["Location"] == f"/compliance/retention/sweeps/{sweep.pk}/"


def test_another_workspaces_sweep_is_not_found(login, other_workspace):
    theirs = retention_dry_run(workspace=other_workspace, actor=SYSTEM_ACTOR)
    assert login("compliance").get(f"/compliance/retention/sweeps/{theirs.pk}/").status_code == 404


def test_every_retention_post_needs_the_csrf_token(csrf_client, expiring):
    client = csrf_client("compliance")
    assert client.post("/compliance/retention/dry-run/").status_code == 403
    assert client.post("/compliance/retention/run/").status_code == 403
    assert not RetentionSweep.objects.exists()
