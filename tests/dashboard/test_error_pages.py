"""What a person or an agent gets when there is nothing at an address or the server
fails: the product's own pages, and JSON under /v1/, never Django's debug pages."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings


def test_an_unknown_page_gets_the_products_404(login):
    response = login("viewer").get("/no/such/page/")
    assert response.status_code == 404
    html = response.content.decode()
    assert "<h1>Not found</h1>" in html
    assert "Back to conversations" in html
    assert "Traceback" not in html and "URLconf" not in html


@pytest.mark.parametrize("method", ["get", "post", "delete"])
def test_an_unknown_api_route_answers_json(method, api):
    response = getattr(api, method)("/v1/no/such/route")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"]


@override_settings(ROOT_URLCONF="tests.dashboard.failing_urls")
def test_a_server_error_gets_the_products_500_page_and_json_under_v1():
    client = Client(raise_request_exception=False)

    page = client.get("/broken/")
    assert page.status_code == 500
    html = page.content.decode()
    assert "Something went wrong on our side" in html
    assert "Nothing you had already saved is lost" in html
    assert "a bug" not in html and "RuntimeError" not in html

    assert page["X-Request-Id"] in html  # to quote to the administrator

    api = client.get("/v1/broken")
    assert api.status_code == 500
    assert api["Content-Type"] == "application/json"
    assert api.json()["requestId"] == api["X-Request-Id"]
    assert api["X-Request-Id"] in api.json()["message"]
    assert "a bug" not in api.content.decode()


@override_settings(ROOT_URLCONF="tests.dashboard.failing_urls")
def test_the_request_id_finds_the_failure_in_the_logs(caplog):
    client = Client(raise_request_exception=False)
    with caplog.at_level("ERROR", logger="django.request"):
        response = client.get("/v1/broken", HTTP_X_REQUEST_ID="agent-run-42")
    assert response["X-Request-Id"] == "agent-run-42"
    assert response.json()["requestId"] == "agent-run-42"
    [failure] = [r for r in caplog.records if r.name == "django.request"]
    assert failure.request_id == "agent-run-42"


@pytest.mark.parametrize("sent", ["", "has spaces", "x" * 101, "new\nline"])
def test_an_unusable_request_id_is_replaced_not_echoed(api, sent):
    response = api.get("/v1/conversations", HTTP_X_REQUEST_ID=sent)
    assert response.status_code == 200
    assert response["X-Request-Id"] != sent
    assert len(response["X-Request-Id"]) == 32


def test_an_audit_event_records_the_request_id(curator_api, workspace):
    from governance.models import AuditEvent

    conversation = curator_api.post("/v1/conversations", {"userId": "u"}, format="json").json()
    response = curator_api.post(
        f"/v1/conversations/{conversation['id']}/observations",
        {"text": "Dana prefers e-mail.", "reason": "told on the phone"},
        format="json",
        HTTP_X_REQUEST_ID="req-7",
    )
    assert response.status_code == 201
    assert response["X-Request-Id"] == "req-7"
    event = AuditEvent.objects.get(workspace=workspace, action="observation.create")
    assert event.request_id == "req-7"


@override_settings(ALLOWED_HOSTS=["memdesk.example"])
def test_a_request_for_another_host_gets_a_400_page_or_json():
    client = Client(raise_request_exception=False)
    page = client.get("/conversations/", HTTP_HOST="evil.example")
    assert page.status_code == 400
    assert "This request could not be understood" in page.content.decode()
    api = client.get("/v1/conversations", HTTP_HOST="evil.example")
    assert api.status_code == 400
    assert api["Content-Type"] == "application/json"
