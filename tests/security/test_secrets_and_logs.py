"""Secrets and personal data stay where they belong: an API key is stored only as its
hash, the logs written while personal data is scanned, observed and reflected hold none
of the values found, and the audit table refuses UPDATE and DELETE to the role the
application connects as."""

from __future__ import annotations

import logging
import uuid

import pytest
from django.apps import apps
from django.db import DatabaseError, connection, transaction

from core.actors import SYSTEM_ACTOR
from governance.models import AuditEvent, RedactionFinding
from tenancy.models import ApiKey
from tenancy.services import api_key_create

EMAIL = "dana.pierce@example.com"
CARD = "4111 1111 1111 1111"
NAME = "Dana Pierce"
TURNS = [
    {"role": "user", "content": f"Hi, I am {NAME}. Write to {EMAIL} about my refund."},
    {"role": "user", "content": f"Charge the card {CARD} for the replacement, please."},
    {"role": "assistant", "content": "Thanks, the replacement for order ORD-7 is on its way."},
]


def _every_stored_text() -> str:
    """Every row of every table, as text: what someone with a copy of the database reads."""
    chunks = []
    with connection.cursor() as cursor:
        for model in apps.get_models(include_auto_created=True):
            if not model._meta.managed or model._meta.proxy:
                continue
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(model._meta.db_table)}")
            chunks.extend(repr(row) for row in cursor.fetchall())
    return "\n".join(chunks)


def test_an_api_key_is_stored_only_as_its_hash(workspace, api):
    keys = [
        api_key_create(workspace=workspace, actor=SYSTEM_ACTOR, scope=scope)[1]
        for scope in ("agent", "curator", "admin")
    ]
    keys.append(api.raw_key)
    for raw_key in keys:  # each works...
        response = api.get("/v1/conversations", HTTP_AUTHORIZATION=f"Bearer {raw_key}")
        assert response.status_code == 200
    stored = _every_stored_text()
    for raw_key in keys:  # ...and no column holds it, only its hash
        assert raw_key not in stored
        assert raw_key[12:] not in stored  # nor the secret part after the shown prefix
        assert ApiKey.objects.filter(key_hash=ApiKey.hash_raw_key(raw_key)).exists()


def test_logs_of_the_pii_flow_hold_none_of_the_values_found(api, workspace, eager_tasks, caplog):
    workspace.observer_threshold = 1
    workspace.reflector_threshold = 1
    workspace.save()
    with caplog.at_level(logging.DEBUG):
        conversation = api.post("/v1/conversations", {"userId": EMAIL}, format="json").json()
        path = f"/v1/conversations/{conversation['id']}"
        with eager_tasks():  # the scan of the new messages
            written = api.post(f"{path}/messages/bulk", {"messages": TURNS}, format="json")
        assert written.status_code == 201
        observed = api.post(f"{path}/observe?wait=true", {}, format="json")
        reflected = api.post(f"{path}/reflect?wait=true", {}, format="json")
        api.get(f"{path}/context")
        api.post(f"{path}/search", {"query": EMAIL}, format="json")
        api.get(f"/v1/conversations?userId={EMAIL}")
    assert observed.json()["status"] == "succeeded", observed.json()
    assert reflected.json()["status"] == "succeeded", reflected.json()

    # The flow did find them (so their absence from the logs means something)...
    found = set(RedactionFinding.objects.values_list("entity_type", flat=True))
    assert {"EMAIL_ADDRESS", "CREDIT_CARD", "PERSON"} <= found, found
    assert caplog.records, "nothing was logged at all"
    # ...and no log line, at any level, from any logger, carries one.
    logged = "\n".join(
        f"{r.name} {r.getMessage()} {r.args!r} {getattr(r, 'request_id', '')}"
        for r in caplog.records
    )
    for value in (EMAIL, CARD, CARD.replace(" ", ""), NAME, "Pierce"):
        assert value not in logged, f"{value!r} reached the logs"


@pytest.mark.django_db(transaction=True)
def test_the_audit_table_refuses_update_and_delete_to_the_application_role(
    requires_postgres, api, workspace
):
    api.post("/v1/conversations", {"userId": "u1"}, format="json")
    assert AuditEvent.objects.exists()
    role = f"memdesk_app_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE ROLE {role}")
        cursor.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}"
        )
    try:
        # Raw SQL: the model refuses these itself; the trigger holds without it.
        attempts = {
            "update": "UPDATE governance_auditevent SET reason = 'rewritten'",
            "delete": "DELETE FROM governance_auditevent",
            "truncate": "TRUNCATE governance_auditevent CASCADE",
        }
        for what, sql in attempts.items():
            with pytest.raises(DatabaseError), transaction.atomic():
                connection.cursor().execute(f"SET LOCAL ROLE {role}")
                connection.cursor().execute(sql)
            assert AuditEvent.objects.exclude(reason="rewritten").exists(), what
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role}")
            cursor.execute(f"DROP ROLE {role}")
