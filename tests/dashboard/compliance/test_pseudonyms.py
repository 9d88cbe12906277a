"""Pseudonyms in the dashboard: /compliance/pseudonyms/ lists labels (never values) and
reveals one for the compliance officer and the admin, with a reason, audited; the
policy editor sets the agents' re-identification, and the preview and the review queue
show the pseudonym a value becomes."""

from __future__ import annotations

import pytest
from django.core.serializers import serialize

from governance.erasure import erasure_execute, erasure_request_create
from governance.models import AuditEvent, RedactionFinding, RedactionPolicy
from memory.pipeline.reflector import observations_for_reflection
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from tenancy.models import Capability, Role, roles_with
from tests.governance.builders import ADMIN, set_policy
from tests.memory.factories import ObservationFactory

HX = {"HTTP_HX_REQUEST": "true"}
EMAIL = "dana.pierce@example.com"
PHONE = "(977) 625-2661"


@pytest.fixture
def pseudonymised(workspace):
    """One message of end user dana, its e-mail address pseudonymised at ingest."""
    set_policy(workspace, redact_at_ingest=True)
    conversation = conversation_create(workspace=workspace, user_id="dana")
    messages_append(
        conversation=conversation, items=[MessageInput(role="user", content=f"Mail {EMAIL}")]
    )
    return conversation


def _reveal(client, label: str = "<EMAIL_ADDRESS_1>", reason: str = "subject access request"):
    return client.post("/compliance/pseudonyms/reveal/", {"label": label, "reason": reason}, **HX)


def test_compliance_and_admin_hold_the_reveal_right():
    assert roles_with(Capability.REVEAL_PSEUDONYMS) == [Role.COMPLIANCE, Role.ADMIN]


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
def test_viewers_and_reviewers_cannot_list_or_reveal(login, role, pseudonymised):
    client = login(role)
    for response in (client.get("/compliance/pseudonyms/"), _reveal(client)):
        assert response.status_code == 403
        assert "reveal what a pseudonym stands for" in response.content.decode()
        assert EMAIL not in response.content.decode()
    assert not AuditEvent.objects.filter(action="redaction.pseudonym.reveal").exists()


@pytest.mark.parametrize("role", ["compliance", "admin"])
def test_the_list_shows_labels_never_values(login, role, pseudonymised):
    html = login(role).get("/compliance/pseudonyms/").content.decode()

    assert "&lt;EMAIL_ADDRESS_1&gt;" in html and "1 object" in html and "held" in html
    assert EMAIL not in html
    assert 'aria-current="page">Pseudonyms' in html
    assert not AuditEvent.objects.filter(action="redaction.pseudonym.reveal").exists()


@pytest.mark.parametrize("role", ["compliance", "admin"])
def test_a_reveal_with_a_reason_shows_the_value_and_is_audited(login, role, pseudonymised):
    client = login(role)

    response = _reveal(client)

    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="reveal"') and "<html" not in html
    assert f'<pre class="pseudonym-value">{EMAIL}</pre>' in html
    assert 'id="pseudonym-asked-as"' not in html  # asked for as it is written
    assert response["Cache-Control"] == "private, no-store"
    event = AuditEvent.objects.get(action="redaction.pseudonym.reveal")
    assert (event.target_id, event.reason) == ("<EMAIL_ADDRESS_1>", "subject access request")
    assert (event.actor_type, event.actor_id, event.actor_role) == (
        "user",
        str(client.user.pk),
        role,
    )
    assert EMAIL not in str(event.after)


def test_a_reveal_without_a_reason_is_refused(login, pseudonymised):
    response = _reveal(login("compliance"), reason="")

    assert response.status_code == 422
    assert "This field is required." in response.content.decode()
    assert EMAIL not in response.content.decode()
    assert not AuditEvent.objects.filter(action="redaction.pseudonym.reveal").exists()


@pytest.mark.parametrize("written", ["<EMAIL_ADDRESS1>", "EMAIL_ADDRESS1", "email_address_1>"])
def test_a_label_is_revealed_as_memory_holds_it(login, pseudonymised, written):
    response = _reveal(login("compliance"), label=written)

    assert response.status_code == 200
    html = response.content.decode()
    assert f'<pre class="pseudonym-value">{EMAIL}</pre>' in html
    assert "<h3><code>&lt;EMAIL_ADDRESS_1&gt;</code></h3>" in html
    assert 'id="pseudonym-asked-as"' in html
    event = AuditEvent.objects.get(action="redaction.pseudonym.reveal")
    assert event.target_id == "<EMAIL_ADDRESS_1>"


@pytest.mark.parametrize(
    ("label", "message"),
    [
        ("PERSON", "is not a pseudonym"),
        (EMAIL, "is not a pseudonym"),
        ("<EMAIL_ADDRESS_7>", "No pseudonym &lt;EMAIL_ADDRESS_7&gt; in this workspace."),
    ],
)
def test_a_bad_label_is_shown_next_to_the_field(login, pseudonymised, label, message):
    response = _reveal(login("compliance"), label=label)

    assert response.status_code == 422
    assert message in response.content.decode()
    assert '<pre class="pseudonym-value">' not in response.content.decode()
    assert not AuditEvent.objects.filter(action="redaction.pseudonym.reveal").exists()


def test_another_workspaces_pseudonym_cannot_be_revealed(login, other_workspace, pseudonymised):
    client = login("compliance", in_workspace=other_workspace)

    response = _reveal(client)

    assert response.status_code == 422
    assert EMAIL not in response.content.decode()


def test_a_forgotten_pseudonym_says_it_is_no_longer_held(login, workspace, pseudonymised):
    request = erasure_request_create(
        workspace=workspace, actor=ADMIN, end_user_id="dana", reason="forget me"
    )
    erasure_execute(request_id=request.pk)

    html = _reveal(login("compliance")).content.decode()

    assert 'id="pseudonym-forgotten"' in html and "No longer held" in html
    assert "forgotten" in login("admin").get("/compliance/pseudonyms/").content.decode()


def test_the_reveal_works_without_js(login, pseudonymised):
    response = login("admin").post(
        "/compliance/pseudonyms/reveal/", {"label": "EMAIL_ADDRESS_1", "reason": "audit"}
    )

    assert response.status_code == 200
    assert "<html" in response.content.decode() and EMAIL in response.content.decode()


def test_the_policy_editor_sets_what_agents_read(login, workspace):
    client = login("compliance")
    page = client.get("/compliance/redaction/").content.decode()
    assert 'name="agents_see_reidentified"' in page
    data = {
        "score_threshold": "0.5",
        "default_operator": "pseudonym",
        "review_min_score": "0.4",
        "review_max_score": "0.7",
        "agents_see_reidentified": "on",
        "reason": "The support agent needs names back",
    }

    response = client.post("/compliance/redaction/save/", data, **HX)

    assert response.status_code == 200
    assert RedactionPolicy.objects.get(workspace=workspace).agents_see_reidentified
    event = AuditEvent.objects.get(action="redaction_policy.update")
    assert event.after["agentsSeeReidentified"] is True
    assert event.reason == "The support agent needs names back"


def test_the_preview_shows_the_pseudonym_a_value_would_become(login, pseudonymised):
    text = f"Mail {EMAIL} or tomas@example.com"

    html = login("compliance").post("/compliance/redaction/preview/", {"text": text}, **HX)

    body = html.content.decode()
    assert '<code class="preview-pseudonym">&lt;EMAIL_ADDRESS_1&gt;</code></td>' in body
    assert '<code class="preview-pseudonym">&lt;EMAIL_ADDRESS_2&gt;</code> <span' in body
    assert RedactionFinding.objects.count() == 1  # the preview wrote nothing


def test_a_preview_that_names_a_pseudonym_is_audited_without_the_text(login, pseudonymised):
    client = login("compliance")

    client.post("/compliance/redaction/preview/", {"text": "Nothing personal."}, **HX)
    assert not AuditEvent.objects.filter(action="redaction.preview").exists()
    client.post("/compliance/redaction/preview/", {"text": f"Mail {EMAIL}, Dana"}, **HX)

    event = AuditEvent.objects.get(action="redaction.preview")
    assert (event.actor_type, event.actor_id, event.actor_role) == (
        "user",
        str(client.user.pk),
        "compliance",
    )
    assert event.after["knownPseudonyms"] == 1 and event.after["draft"] is False
    assert event.after["entities"]["EMAIL_ADDRESS"] == 1
    trail = serialize("json", AuditEvent.objects.all())
    assert EMAIL not in trail and "Dana" not in trail and "<EMAIL_ADDRESS_1>" not in trail


def test_the_review_queue_shows_what_a_finding_becomes(login, workspace):
    conversation = conversation_create(workspace=workspace)
    ObservationFactory(conversation=conversation, text=f"User said {PHONE} on call.")
    observations_for_reflection(conversation=conversation)

    html = login("compliance").get("/compliance/review/").content.decode()

    assert 'becomes <code class="finding-pseudonym">&lt;PHONE_NUMBER_1&gt;</code>' in html
