"""The read ledger: every context served to an agent is recorded (governance/ledger/), with
the digest of the body served, the versions it was rendered from and who read it; a web
worker writes its reads in batches, after the responses; the rows go with their
conversation (deletion, erasure) and stay while a hold keeps it."""

from __future__ import annotations

import hashlib
import json
import logging
import socket
from datetime import timedelta

import pytest
from django.utils import timezone

from governance.audit.writer import audit_text_digest
from governance.erasure import erasure_execute, erasure_request_create
from governance.holds import legal_hold_place
from governance.ledger import buffer
from governance.ledger.tally import ServedTally, lost_reads_account
from governance.models import ContextRead
from governance.retention.plan import retention_sweep_request
from governance.retention.policies import retention_policy_create
from governance.retention.sweep import retention_sweep
from memory.models import Conversation
from tests.governance.builders import ADMIN


def _conversation(api, user_id: str = "u1") -> str:
    conversation_id = api.post("/v1/conversations", {"userId": user_id}, format="json").json()["id"]
    api.post(
        f"/v1/conversations/{conversation_id}/messages/bulk",
        {"messages": [{"role": "user", "content": f"parcel {n} is late"} for n in range(3)]},
        format="json",
    )
    return conversation_id


@pytest.mark.django_db
def test_a_read_is_in_the_ledger_with_the_digest_of_what_was_served(api):
    conversation_id = _conversation(api)
    path = f"/v1/conversations/{conversation_id}/context"

    served = api.get(f"{path}?format=text&max_tokens=500")
    again = api.get(f"{path}?format=text&max_tokens=500", HTTP_IF_NONE_MATCH=served["ETag"])

    assert (served.status_code, again.status_code) == (200, 304)
    first, second = ContextRead.objects.order_by("writer_seq")
    conversation = Conversation.objects.get(pk=conversation_id)
    assert first.body_sha256 == hashlib.sha256(served.content).hexdigest()
    assert second.body_sha256 == first.body_sha256  # the body the 304 named
    assert [first.status, second.status] == [200, 304]
    assert (first.memory_version, first.last_seq) == (conversation.memory_version, 3)
    assert (first.edge, first.format, first.max_tokens) == ("rest", "text", 500)
    assert first.key_scope == "agent"
    assert first.api_key_id is not None
    assert first.token_count and first.token_count <= 500
    assert second.writer == first.writer and second.writer_seq == first.writer_seq + 1


@pytest.mark.django_db
def test_a_question_is_recorded_by_its_digest_not_its_words(api):
    conversation_id = _conversation(api)

    api.get(f"/v1/conversations/{conversation_id}/context", {"query": "  which parcel is late "})

    [read] = ContextRead.objects.all()
    assert read.query_digest == audit_text_digest("which parcel is late")
    assert read.recall == 10
    stored = " ".join(str(value) for value in ContextRead.objects.values().get().values())
    assert "parcel" not in stored


@pytest.mark.django_db
def test_a_budget_from_the_workspace_is_recorded_as_the_one_applied(api):
    conversation_id = _conversation(api)

    api.get(f"/v1/conversations/{conversation_id}/context")

    assert ContextRead.objects.get().max_tokens == 32_000  # a new workspace's default


@pytest.mark.django_db
def test_a_read_refused_is_not_in_the_ledger(api, other_api):
    conversation_id = _conversation(api)

    assert other_api.get(f"/v1/conversations/{conversation_id}/context").status_code == 404
    assert api.get(f"/v1/conversations/{conversation_id}/context?format=xml").status_code == 400

    assert not ContextRead.objects.exists()


@pytest.mark.django_db
def test_an_erased_users_reads_go_with_the_erasure_and_a_hold_keeps_them(api, workspace):
    erased, held = _conversation(api, "erin"), _conversation(api, "hank")
    for conversation_id in (erased, held, held):
        api.get(f"/v1/conversations/{conversation_id}/context")
    legal_hold_place(workspace=workspace, actor=ADMIN, reason="case", end_user_id="hank")

    request = erasure_request_create(
        workspace=workspace, end_user_id="erin", actor=ADMIN, reason="GDPR art. 17"
    )
    outcome = erasure_execute(request_id=request.pk)

    assert outcome.request.counts.get("contextReads") == 1
    assert not ContextRead.objects.filter(conversation_id=erased).exists()
    assert ContextRead.objects.filter(conversation_id=held).count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_web_worker_writes_its_reads_after_the_responses_in_one_batch(api, monkeypatch):
    conversation_id = _conversation(api)
    ledger = buffer.LedgerBuffer(window_seconds=3600)  # flushed by hand below
    monkeypatch.setattr(buffer, "_buffer", ledger)

    for _ in range(3):
        assert api.get(f"/v1/conversations/{conversation_id}/context").status_code == 200

    assert not ContextRead.objects.exists()  # nothing written in the requests
    assert ledger.waiting() == 3
    assert ledger.flush()
    assert ContextRead.objects.count() == 3
    assert ledger.stop() == 0


@pytest.mark.django_db(transaction=True)
def test_reads_of_a_conversation_deleted_before_the_batch_are_not_kept(api, monkeypatch):
    kept, deleted = _conversation(api), _conversation(api)
    ledger = buffer.LedgerBuffer(window_seconds=3600)
    monkeypatch.setattr(buffer, "_buffer", ledger)
    for conversation_id in (kept, deleted):
        api.get(f"/v1/conversations/{conversation_id}/context")
    assert api.delete(f"/v1/conversations/{deleted}").status_code == 204

    assert ledger.flush()

    assert list(ContextRead.objects.values_list("conversation_id", flat=True)) == [
        Conversation.objects.get(pk=kept).pk
    ]
    ledger.stop()


@pytest.mark.django_db(transaction=True)
def test_a_batch_the_database_refuses_waits_for_the_next_window(api, monkeypatch, caplog):
    conversation_id = _conversation(api)
    ledger = buffer.LedgerBuffer(window_seconds=3600)
    monkeypatch.setattr(buffer, "_buffer", ledger)
    api.get(f"/v1/conversations/{conversation_id}/context")
    write = buffer.rows_write

    def refused(rows):
        from django.db import OperationalError

        raise OperationalError("the database is down")

    monkeypatch.setattr(buffer, "rows_write", refused)
    with caplog.at_level(logging.WARNING, logger="governance.ledger.buffer"):
        assert not ledger.flush()
    assert "could not write 1 context read(s)" in caplog.text
    assert ledger.waiting() == 1

    monkeypatch.setattr(buffer, "rows_write", write)
    assert ledger.flush()
    assert ContextRead.objects.count() == 1
    ledger.stop()


@pytest.mark.django_db(transaction=True)
def test_a_batch_written_twice_is_kept_once(api, monkeypatch):
    conversation_id = _conversation(api)
    ledger = buffer.LedgerBuffer(window_seconds=3600)
    monkeypatch.setattr(buffer, "_buffer", ledger)
    api.get(f"/v1/conversations/{conversation_id}/context")
    with ledger._lock:
        rows = list(ledger._rows)

    assert ledger.flush()
    buffer.rows_write(rows)  # a retry after an answer that never came

    assert ContextRead.objects.count() == 1
    ledger.stop()


@pytest.mark.django_db(transaction=True)
def test_a_stop_that_cannot_write_says_how_many_reads_are_lost(api, monkeypatch, caplog):
    conversation_id = _conversation(api)
    ledger = buffer.LedgerBuffer(window_seconds=3600)
    monkeypatch.setattr(buffer, "_buffer", ledger)
    for _ in range(2):
        api.get(f"/v1/conversations/{conversation_id}/context")

    def refused(rows):
        from django.db import OperationalError

        raise OperationalError("the database is down")

    monkeypatch.setattr(buffer, "rows_write", refused)
    with caplog.at_level(logging.WARNING, logger="governance.ledger.buffer"):
        assert ledger.stop(timeout=0.5) == 2
    assert "the ledger stopped with 2 context read(s) not written" in caplog.text


@pytest.mark.django_db
def test_a_compliance_key_lists_a_conversations_reads_latest_first_in_pages(api, compliance_api):
    conversation_id = _conversation(api)
    formats = ["json", "text", "messages"]
    bodies = [api.get(f"/v1/conversations/{conversation_id}/context?format={f}") for f in formats]
    path = f"/v1/conversations/{conversation_id}/context-reads"

    first = compliance_api.get(path, {"limit": 2})
    second = compliance_api.get(path, {"limit": 2, "cursor": first.json()["nextCursor"]})

    assert first.status_code == second.status_code == 200
    listed = first.json()["contextReads"] + second.json()["contextReads"]
    assert [r["format"] for r in listed] == ["messages", "text", "json"]
    assert [r["bodySha256"] for r in listed] == [
        hashlib.sha256(b.content).hexdigest() for b in reversed(bodies)
    ]
    assert second.json()["nextCursor"] is None
    assert listed[0]["edge"] == "rest" and listed[0]["keyScope"] == "agent"
    assert listed[0]["queryDigest"] is None and listed[0]["status"] == 200


@pytest.mark.django_db
def test_the_ledger_is_for_compliance_keys_of_the_workspace(
    api, curator_api, make_client, other_workspace
):
    conversation_id = _conversation(api)
    path = f"/v1/conversations/{conversation_id}/context-reads"

    assert api.get(path).status_code == 403
    assert curator_api.get(path).status_code == 403
    assert make_client(other_workspace, scope="admin").get(path).status_code == 404


@pytest.mark.django_db
def test_a_bad_page_of_the_ledger_is_a_400_that_names_it(api, compliance_api):
    conversation_id = _conversation(api)
    path = f"/v1/conversations/{conversation_id}/context-reads"

    assert compliance_api.get(path, {"limit": 0}).json()["code"] == "invalid_limit"
    bad_cursor = compliance_api.get(path, {"cursor": "not-a-cursor"})
    assert bad_cursor.status_code == 400
    assert "cursor" in bad_cursor.json()["message"]


@pytest.mark.django_db
def test_the_ledger_keeps_its_rows_as_long_as_its_own_period_says(api, workspace):
    retention_policy_create(workspace=workspace, actor=ADMIN, name="default", context_read_days=30)
    free, held = _conversation(api, "fay"), _conversation(api, "hal")
    for conversation_id in (free, free, held):
        api.get(f"/v1/conversations/{conversation_id}/context")
    first_free, second_free, first_held = ContextRead.objects.order_by("writer_seq")
    old = timezone.now() - timedelta(days=40)
    ContextRead.objects.filter(pk__in=[first_free.pk, first_held.pk]).update(served_at=old)
    legal_hold_place(workspace=workspace, actor=ADMIN, reason="case", end_user_id="hal")

    request = retention_sweep_request(workspace=workspace, actor=ADMIN)
    sweep = retention_sweep(sweep_id=request.pk)

    assert sweep.counts["contextReads"] == 1
    assert set(ContextRead.objects.values_list("pk", flat=True)) == {second_free.pk, first_held.pk}
    assert Conversation.objects.get(pk=free).messages.count() == 3  # messages keep theirs


@pytest.mark.django_db
def test_the_audit_export_includes_the_ledger_when_asked(api, compliance_api):
    first, second = _conversation(api), _conversation(api)
    served = [api.get(f"/v1/conversations/{c}/context").content for c in (first, second, first)]

    plain = compliance_api.get("/v1/audit/events/export")
    with_reads = compliance_api.get(
        "/v1/audit/events/export", {"include": "contextReads", "conversation": first}
    )

    def lines(response):
        return [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]

    assert not [line for line in lines(plain) if "contextRead" in line]
    reads = [line["contextRead"] for line in lines(with_reads) if "contextRead" in line]
    assert [r["conversationId"] for r in reads] == [first, first]
    assert [r["bodySha256"] for r in reads] == [
        hashlib.sha256(served[0]).hexdigest(),
        hashlib.sha256(served[2]).hexdigest(),
    ]
    refused = compliance_api.get("/v1/audit/events/export", {"include": "everything"})
    assert (refused.status_code, refused.json()["code"]) == (400, "invalid_include")


@pytest.mark.django_db
def test_the_exports_instants_take_any_offset_python_reads(api, compliance_api):
    # PostgreSQL refuses a displacement beyond 15:59; the filters compare in UTC.
    conversation_id = _conversation(api)
    api.get(f"/v1/conversations/{conversation_id}/context")
    response = compliance_api.get(
        "/v1/audit/events/export",
        {"include": "contextReads", "since": "2020-01-01T00:00:00+21:56"},
    )
    assert response.status_code == 200
    lines = b"".join(response.streaming_content).splitlines()
    assert sum(b'"contextRead"' in line for line in lines) == 1


@pytest.mark.django_db(transaction=True)
def test_a_clean_stop_leaves_no_tally_and_a_live_workers_is_not_counted(api, monkeypatch, tmp_path):
    conversation_id = _conversation(api)
    ledger = buffer.LedgerBuffer(window_seconds=3600, tally_directory=tmp_path)
    monkeypatch.setattr(buffer, "_buffer", ledger)
    api.get(f"/v1/conversations/{conversation_id}/context")
    [tally] = tmp_path.glob("*.served")

    assert lost_reads_account(tmp_path) == {}  # its worker is alive: not a crash
    assert tally.exists()
    assert ledger.stop() == 0
    assert not tally.exists()


@pytest.mark.django_db
def test_the_reads_a_crashed_worker_left_unwritten_are_counted_by_the_next(api, tmp_path, caplog):
    conversation_id = _conversation(api)
    # A writer of this host whose process is gone: no pid is above Linux's largest.
    writer = f"{socket.gethostname()}:{2**22 + 1}:1"
    for seq in (1, 2, 3):
        ContextRead.objects.create(
            workspace=Conversation.objects.get(pk=conversation_id).workspace,
            conversation_id=conversation_id,
            served_at=timezone.now(),
            key_scope="agent",
            edge="rest",
            format="json",
            memory_version=0,
            last_seq=3,
            body_sha256="0" * 64,
            status=200,
            writer=writer,
            writer_seq=seq,
        )
    tally = ServedTally(tmp_path, writer)
    tally.served(5)  # two reads recorded after the last batch it wrote

    with caplog.at_level(logging.WARNING, logger="governance.ledger.tally"):
        lost = lost_reads_account(tmp_path)

    assert lost == {writer: 2}
    assert f"missing 2 context read(s) of writer {writer}" in caplog.text
    assert not list(tmp_path.glob("*.served"))  # counted once
