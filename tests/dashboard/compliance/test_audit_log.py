"""/compliance/audit/: who may open the audit log, its filters and pages, each
event's diff and links, the chain badge, and the JSON Lines export."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from core.actors import SYSTEM_ACTOR
from governance.audit.writer import audit_record
from governance.holds import legal_hold_place
from memory.models import Message
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from tests.governance.builders import set_policy, tamper
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
    tamper("UPDATE governance_auditevent SET reason = %s WHERE id = %s", ["x", events[1].pk])
    html = login("compliance").get("/compliance/audit/").content.decode()
    assert "Chain broken at event #2" in html and "Chain verified" not in html


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


EMAIL = "dana.pierce@example.com"


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


def test_the_conversation_filter_finds_events_on_it_and_its_items(
    login, workspace, dana_conversation
):
    other = conversation_create(workspace=workspace, user_id="eve", title="Other")
    message = Message.objects.filter(conversation=dana_conversation).first()
    _event(workspace, "conversation.update", "conversation", str(dana_conversation.pk))
    _event(workspace, "message.redact", "message", str(message.pk))
    _event(workspace, "conversation.update", "conversation", str(other.pk))
    legal_hold_place(
        workspace=workspace, actor=SYSTEM_ACTOR, reason="claim", conversation=dana_conversation
    )
    client = login("compliance")
    html = client.get(f"/compliance/audit/?conversation={dana_conversation.pk}").content.decode()
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


def test_targets_link_to_what_they_name(login, workspace, dana_conversation):
    observation = ObservationFactory(conversation=dana_conversation, text="Wants a refund.")
    hold = legal_hold_place(
        workspace=workspace, actor=SYSTEM_ACTOR, reason="x", conversation=dana_conversation
    )
    _event(workspace, "observation.update", "observation", str(observation.pk))
    _event(workspace, "observation.delete", "observation", "00000000-0000-0000-0000-000000000000")
    html = login("compliance").get("/compliance/audit/").content.decode()
    history = f"/conversations/{dana_conversation.pk}/observations/{observation.pk}/history/"
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


def test_an_observations_history_links_to_its_audit_events(login, dana_conversation):
    observation = ObservationFactory(conversation=dana_conversation, text="Wants a refund.")
    url = f"/conversations/{dana_conversation.pk}/observations/{observation.pk}/history/"
    link = f"/compliance/audit/?target_type=observation&amp;target_id={observation.pk}"
    assert link in login("compliance").get(url).content.decode()
    assert link not in login("reviewer").get(url).content.decode()
