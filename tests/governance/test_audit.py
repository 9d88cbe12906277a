"""The audit trail: complete, chained, append-only, verifiable, and readable by admins."""

from __future__ import annotations

import json
import threading
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction

from core.actors import SYSTEM_ACTOR
from governance.audit.verify import audit_chain_verify
from governance.audit.writer import audit_record
from governance.models import AuditEvent
from memory.models import Observation
from tenancy.services import workspace_get_or_create
from tests.governance.builders import tamper


def _record(workspace, n: int) -> list[AuditEvent]:
    return [
        audit_record(
            workspace_id=workspace.pk,
            actor=SYSTEM_ACTOR,
            action="test.event",
            target_type="thing",
            target_id=str(i),
            after={"n": i, "text": "naïve café"},
        )
        for i in range(n)
    ]


def test_events_form_a_chain_per_workspace(workspace, other_workspace):
    mine = _record(workspace, 3)
    theirs = _record(other_workspace, 2)
    assert [e.sequence for e in mine] == [1, 2, 3]
    assert [e.sequence for e in theirs] == [1, 2]
    assert mine[1].prev_hash == mine[0].hash and mine[2].prev_hash == mine[1].hash
    assert audit_chain_verify(workspace_id=workspace.pk).ok
    assert audit_chain_verify(workspace_id=other_workspace.pk).events == 2


def test_altering_one_event_breaks_verification_at_that_event(workspace):
    events = _record(workspace, 5)
    tamper("UPDATE governance_auditevent SET reason = %s WHERE id = %s", ["hidden", events[2].pk])
    report = audit_chain_verify(workspace_id=workspace.pk)
    assert not report.ok
    assert (report.broken_event_id, report.broken_sequence) == (events[2].pk, 3)
    assert report.problem.startswith(f"event {events[2].pk} (test.event, ")
    assert "its content changed" in report.problem


def test_removing_an_event_or_the_tail_is_detected(workspace):
    events = _record(workspace, 5)
    tamper("DELETE FROM governance_auditevent WHERE id = %s", [events[1].pk])
    report = audit_chain_verify(workspace_id=workspace.pk)
    assert (report.ok, report.broken_sequence) == (False, 3)

    other = workspace_get_or_create(name="tail")
    tail = _record(other, 3)
    tamper("DELETE FROM governance_auditevent WHERE id = %s", [tail[2].pk])
    report = audit_chain_verify(workspace_id=other.pk)
    assert not report.ok and "events after #2 were removed" in report.problem


def test_verify_audit_command_exits_non_zero_and_names_the_broken_event(workspace):
    events = _record(workspace, 3)
    out = StringIO()
    call_command("verify_audit", "--workspace", "acme", stdout=out)
    assert "acme: OK, 3 events" in out.getvalue()
    tamper("UPDATE governance_auditevent SET action = %s WHERE id = %s", ["x", events[0].pk])
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("verify_audit", stdout=StringIO(), stderr=err)
    assert f"event id {events[0].pk} (#1)" in err.getvalue()


def test_the_model_refuses_to_change_or_delete_events(workspace):
    [event] = _record(workspace, 1)
    event.reason = "rewritten"
    with pytest.raises(PermissionError):
        event.save()
    with pytest.raises(PermissionError):
        event.delete()
    with pytest.raises(PermissionError):
        AuditEvent.objects.filter(pk=event.pk).update(reason="x")
    with pytest.raises(PermissionError):
        AuditEvent.objects.filter(pk=event.pk).delete()
    assert audit_chain_verify(workspace_id=workspace.pk).ok


@pytest.mark.parametrize(
    "sql", ["UPDATE governance_auditevent SET reason = 'x'", "DELETE FROM governance_auditevent"]
)
def test_postgresql_rejects_update_and_delete_on_the_audit_table(requires_postgres, workspace, sql):
    _record(workspace, 2)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        connection.cursor().execute(sql)
    assert AuditEvent.objects.filter(workspace=workspace).count() == 2


@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_keep_one_valid_chain():
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: run with DATABASE_URL=postgres://... (CI does)")
    workspace = workspace_get_or_create(name="busy")
    barrier = threading.Barrier(10)
    errors: list[BaseException] = []

    def append() -> None:
        try:
            barrier.wait()
            _record(workspace, 5)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=append) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    report = audit_chain_verify(workspace_id=workspace.pk)
    assert report.ok and report.events == 50


def test_revert_restores_the_earlier_text_and_is_itself_audited(curator_api):
    api = curator_api
    conversation = api.post("/v1/conversations", {}, format="json").json()["id"]
    base = f"/v1/conversations/{conversation}/observations"
    observation = api.post(base, {"text": "User prefers email."}, format="json").json()
    path = f"{base}/{observation['id']}"
    api.patch(path, {"text": "User prefers SMS.", "reason": "misheard"}, format="json")

    refused = api.post(f"{path}/revert", {"version": 1}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "reason"
    missing = api.post(f"{path}/revert", {"version": 9, "reason": "x"}, format="json")
    assert missing.status_code == 400 and missing.json()["code"] == "unknown_version"

    response = api.post(f"{path}/revert", {"version": 1, "reason": "it was email"}, format="json")
    assert response.status_code == 200
    assert response.json()["text"] == "User prefers email."
    assert response.json()["version"] == 3
    assert Observation.objects.get(pk=observation["id"]).text == "User prefers email."
    event = AuditEvent.objects.get(action="observation.revert")
    created = AuditEvent.objects.get(action="observation.create")
    # The trail records the texts as digests: the revert's is the first text's again.
    assert "text" not in event.after and "User prefers" not in str(event.after)
    assert event.after["textDigest"] == created.after["textDigest"] != event.before["textDigest"]
    assert event.after["revertedTo"] == 1
    assert event.reason == "it was email"
    history = api.get(f"{path}/history").json()["versions"]
    assert [(v["version"], v["change"]) for v in history] == [(1, "edit"), (2, "revert")]
    assert "-User prefers email." in history[0]["diff"]
    assert "+User prefers SMS." in history[0]["diff"]


def test_the_audit_api_is_for_compliance_keys_and_above(
    api, curator_api, make_client, workspace, admin_api
):
    compliance_api = make_client(workspace, scope="compliance")
    for path in ("/v1/audit/events", "/v1/audit/events/export", "/v1/audit/verify"):
        for refused in (api, curator_api):
            response = refused.get(path)
            assert response.status_code == 403
            assert "needs a compliance API key" in response.json()["message"]
        assert compliance_api.get(path).status_code == 200
        assert admin_api.get(path).status_code == 200


def test_audit_events_filter_and_page_newest_first(admin_api, workspace, other_workspace):
    _record(workspace, 7)
    _record(other_workspace, 3)
    seen, cursor = [], None
    while True:
        query = "?limit=3&action=test.event" + (f"&cursor={cursor}" if cursor else "")
        page = admin_api.get(f"/v1/audit/events{query}").json()
        seen += [e["sequence"] for e in page["events"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    # The key's own creation is event 1; the seven test events follow.
    assert seen == [8, 7, 6, 5, 4, 3, 2]
    one = admin_api.get("/v1/audit/events?targetType=thing&targetId=4").json()["events"]
    assert [e["after"]["n"] for e in one] == [4]
    assert admin_api.get("/v1/audit/events?since=nonsense").status_code == 400
    assert admin_api.get("/v1/audit/events?cursor=abc").status_code == 400


def test_audit_export_is_json_lines_oldest_first(admin_api, workspace):
    _record(workspace, 4)
    response = admin_api.get("/v1/audit/events/export")
    assert response["Content-Type"] == "application/x-ndjson"
    lines = b"".join(response.streaming_content).decode().splitlines()
    events = [json.loads(line) for line in lines]
    assert [e["sequence"] for e in events] == [1, 2, 3, 4, 5]
    assert events[-1]["after"] == {"n": 3, "text": "naïve café"}


def test_the_verify_endpoint_reports_the_chain(admin_api, workspace):
    events = _record(workspace, 2)
    assert admin_api.get("/v1/audit/verify").json()["ok"] is True
    tamper("UPDATE governance_auditevent SET target_id = %s WHERE id = %s", ["z", events[1].pk])
    body = admin_api.get("/v1/audit/verify").json()
    assert body["ok"] is False and body["brokenEventId"] == events[1].pk
