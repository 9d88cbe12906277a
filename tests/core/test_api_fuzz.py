"""Schemathesis against /v1/schema/, in-process through the WSGI app: every documented
operation is called with a bounded number of generated requests, valid and invalid, and
none may answer 5xx, or answer with a body or content type its schema does not
document. The examples per operation are bounded so that the whole run stays near a
minute on two cores."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, settings
from schemathesis import checks as st_checks
from schemathesis.specs.openapi import checks as openapi_checks

from config.wsgi import application

EXAMPLES_PER_OPERATION = 12

schema = schemathesis.openapi.from_wsgi("/v1/schema/", application)
# Every text field refuses NUL (PostgreSQL cannot store it), which the document does not
# repeat on each; the hostile-input tests cover it (tests/core/test_hostile_input.py).
schema.config.generation.update(allow_x00=False)
# Rules across fields that OpenAPI cannot state (a hold names a conversation or a user,
# exactly one; reviewMinScore is at most reviewMaxScore; a reasoning step says something
# in one of its three texts; a tool call names its step or its conversation; a search's
# since is before its until), tested where each is made.
CROSS_FIELD_RULES = {
    "GET /v1/conversations",  # userId and user_id, when both are sent, must agree
    "GET /v1/reasoning/steps",  # conversation_id and conversationId, the same
    "PATCH /v1/workspace/settings",  # at least one of fidelity and contextMaxTokens
    "POST /v1/legal-holds",
    "POST /v1/reasoning/steps",
    "POST /v1/reasoning/tool-calls",
    "PUT /v1/redaction/policy",
    "PATCH /v1/redaction/policy",
    "POST /v1/search",
}


@schema.hook
def map_query(context, query):
    # A cursor is whatever the server returned; a made-up one is rightly refused.
    if query:
        query.pop("cursor", None)
    return query


CHECKS = [
    st_checks.not_a_server_error,
    openapi_checks.response_schema_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.positive_data_acceptance,
]
# Not negative_data_rejection: the API reads an empty query parameter as one not sent
# (as an HTML form sends it), and a few text fields still take a number as its text.


@pytest.fixture
def agent_key(make_client, workspace) -> Iterator[str]:
    client = make_client(workspace, scope="admin")
    # As Django's test client does: the WSGI handler would otherwise close the test's
    # connection at the end of each request, and with it the test transaction.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield str(client.raw_key)
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@pytest.mark.django_db(transaction=False)
@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_no_generated_request_gets_a_server_error_or_an_undocumented_answer(case, agent_key):
    checks = CHECKS
    if case.operation.label in CROSS_FIELD_RULES:
        checks = [c for c in CHECKS if c is not openapi_checks.positive_data_acceptance]
    case.call_and_validate(headers={"Authorization": f"Bearer {agent_key}"}, checks=checks)
