"""The audit events' filters are defined once (governance/audit/filters.py) and read by
two edges: ``GET /v1/audit/events`` (camelCase names, a 400 for a bad value) and the
compliance audit log page (its bookmarkable names, a form error beside the field). The
same filter gives both the same events, and a bad value loses nothing else."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from core.actors import SYSTEM_ACTOR, Actor
from governance.audit.writer import audit_record
from memory.models import Message
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append


def _event(workspace, action: str, target_type: str = "thing", target_id: str = "1", **kw):
    return audit_record(
        workspace_id=workspace.pk,
        actor=kw.pop("actor", SYSTEM_ACTOR),
        action=action,
        target_type=target_type,
        target_id=target_id,
        reason="r",
        **kw,
    )


@pytest.fixture
def officer(member):
    client = Client()
    user = member("compliance")
    client.force_login(user)
    client.user = user
    return client


@pytest.fixture
def compliance_api(make_client, workspace):
    return make_client(workspace, scope="compliance")


def _api_actions(api, query: dict[str, str]) -> list[str]:
    response = api.get("/v1/audit/events", query)
    assert response.status_code == 200, response.json()
    return [e["action"] for e in response.json()["events"] if e["action"] != "api_key.create"]


def _page_actions(client, query: dict[str, str]) -> list[str]:
    html = client.get("/compliance/audit/", query).content.decode()
    events = html.split('id="events"')[1]
    actions = re.findall(r'<tr id="event-\d+".*?<code>([a-z_.]+)</code>', events, re.S)
    return [action for action in actions if action != "api_key.create"]  # the API's own key


def test_the_api_and_the_page_answer_the_same_filter_with_the_same_events(
    officer, compliance_api, workspace
):
    person = Actor(type="user", id=str(officer.user.pk), role="compliance")
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Refund")
    messages_append(conversation=conversation, items=[MessageInput(role="user", content="Hi")])
    message = Message.objects.get(conversation=conversation)
    _event(workspace, "legal_hold.place", actor=person)
    _event(workspace, "message.redact", "message", str(message.pk), actor=person)
    _event(workspace, "observation.update", "observation", "a")
    _event(workspace, "erasure.request")
    cases = [
        ({"actionPrefix": "observation."}, {"action": "observation."}),
        ({"actor": officer.user.username.upper()}, {"actor": officer.user.username.upper()}),
        ({"actor": "system"}, {"actor": "system"}),
        ({"conversation": str(conversation.pk)}, {"conversation": str(conversation.pk)}),
        ({"targetType": "message"}, {"target_type": "message"}),
    ]
    for api_query, page_query in cases:
        from_api = _api_actions(compliance_api, api_query)
        assert from_api, api_query
        assert from_api == _page_actions(officer, page_query), (api_query, page_query)
    assert _api_actions(compliance_api, {"actor": officer.user.username}) == [
        "message.redact",
        "legal_hold.place",
    ]


def test_the_api_action_is_a_whole_name_and_action_prefix_a_prefix(compliance_api, workspace):
    _event(workspace, "redaction.rescan")
    _event(workspace, "redaction.rescan_request")
    assert _api_actions(compliance_api, {"action": "redaction.rescan"}) == ["redaction.rescan"]
    assert _api_actions(compliance_api, {"actionPrefix": "redaction.rescan"}) == [
        "redaction.rescan_request",
        "redaction.rescan",
    ]


@pytest.mark.parametrize(
    ("name", "value", "code"),
    [
        ("since", "nonsense", "invalid_datetime"),
        ("until", "2024-02-30T00:00:00", "invalid_datetime"),
        ("actorType", "robot", "invalid_actorType"),
        ("conversation", "not-a-uuid", "invalid_conversation"),
    ],
)
def test_a_bad_api_filter_is_a_400_naming_the_parameter(compliance_api, name, value, code):
    for path in ("/v1/audit/events", "/v1/audit/events/export"):
        response = compliance_api.get(path, {name: value, "action": "x"})
        assert response.status_code == 400
        body = response.json()
        assert set(body) == {"error", "code", "message", "field"}
        assert (body["code"], body["field"]) == (code, name)


def test_a_bad_date_on_the_page_is_shown_beside_its_field_and_the_other_filters_hold(
    officer, workspace
):
    _event(workspace, "observation.update")
    _event(workspace, "erasure.request")
    html = officer.get("/compliance/audit/", {"since": "nonsense", "action": "erasure"})
    html = html.content.decode()
    assert html.count('<tr id="event-') == 1 and "<code>erasure.request</code>" in html
    assert "Enter a valid date." in html.split('id="events"')[0]
    # The export link repeats the valid filter only.
    assert 'href="/compliance/audit/export.jsonl?action=erasure"' in html


def test_an_unknown_conversation_matches_nothing_on_both_edges(
    officer, compliance_api, workspace, other_workspace
):
    theirs = conversation_create(workspace=other_workspace, user_id="eve", title="Theirs")
    _event(other_workspace, "conversation.update", "conversation", str(theirs.pk))
    _event(workspace, "conversation.update", "conversation", str(theirs.pk))
    assert _api_actions(compliance_api, {"conversation": str(theirs.pk)}) == []
    html = officer.get("/compliance/audit/", {"conversation": str(theirs.pk)}).content.decode()
    assert "No conversation with this id in this workspace." in html
    assert html.count('<tr id="event-') == 0
    # The export link keeps the filter: it exports nothing rather than everything.
    assert f"export.jsonl?conversation={theirs.pk}" in html


def test_the_api_since_and_until_are_instants_and_the_page_days_inclusive(
    officer, compliance_api, workspace
):
    event = _event(workspace, "today.event")
    at = event.created_at
    day = at.date().isoformat()
    assert _api_actions(compliance_api, {"since": at.isoformat()}) == ["today.event"]
    assert _api_actions(compliance_api, {"until": at.isoformat()}) == []
    assert _page_actions(officer, {"since": day, "until": day}) == ["today.event"]
