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
    assert response.json()["error"]


@override_settings(ROOT_URLCONF="tests.dashboard.failing_urls")
def test_a_server_error_gets_the_products_500_page_and_json_under_v1():
    client = Client(raise_request_exception=False)

    page = client.get("/broken/")
    assert page.status_code == 500
    html = page.content.decode()
    assert "Something went wrong on our side" in html
    assert "Nothing you had already saved is lost" in html
    assert "a bug" not in html and "RuntimeError" not in html

    api = client.get("/v1/broken")
    assert api.status_code == 500
    assert api["Content-Type"] == "application/json"
    assert api.json()["message"] == "The server failed; the request id is in the logs."
    assert "a bug" not in api.content.decode()


@override_settings(ALLOWED_HOSTS=["memdesk.example"])
def test_a_request_for_another_host_gets_a_400_page_or_json():
    client = Client(raise_request_exception=False)
    page = client.get("/conversations/", HTTP_HOST="evil.example")
    assert page.status_code == 400
    assert "This request could not be understood" in page.content.decode()
    api = client.get("/v1/conversations", HTTP_HOST="evil.example")
    assert api.status_code == 400
    assert api["Content-Type"] == "application/json"
