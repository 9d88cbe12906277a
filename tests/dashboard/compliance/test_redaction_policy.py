"""/compliance/redaction/: the redaction policy editor, its errors in the form's
words, and its live preview against the saved policy."""

from __future__ import annotations

import pytest

from governance.models import AuditEvent, RedactionPolicy, RescanRun
from tests.governance.builders import set_policy

HX = {"HTTP_HX_REQUEST": "true"}


EMAIL = "dana.pierce@example.com"


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


ROLE_403 = '<strong class="required-role">compliance officer</strong>'


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
