"""Erasure (right to be forgotten): every tier of one end user goes, nothing else does,
with exact receipts; a legal hold refuses it (409) and nothing is deleted."""

from __future__ import annotations

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from governance import erasure
from governance.erasure import erasure_execute, erasure_request_create
from governance.holds import legal_hold_place, legal_hold_release
from governance.models import (
    ErasureRequest,
    LegalHold,
    RedactionFinding,
    RestrictedOriginal,
)
from governance.tasks import erasure_task
from memory.models import (
    Conversation,
    Escalation,
    IdempotencyRecord,
    ObservationVersion,
    ObserverRun,
    ReflectorRun,
)
from memory.services.conversations import conversation_create
from memory.services.escalations import escalation_create
from tests.governance.builders import (
    ADMIN,
    conversation_with_tiers,
    earlier_version,
    erasure_hash,
    events,
    ids_hash,
    redaction_traces,
    tier_rows,
)


def _with_everything(api, workspace, user_id: str) -> Conversation:
    """A conversation with all three tiers and what hangs off them: pipeline runs, a
    redaction finding and a restricted original, an observation's old version, a released
    hold, a stored idempotent reply and a read of its context (the read ledger)."""
    conversation = conversation_with_tiers(workspace, user_id=user_id, old=2, new=2)
    message = conversation.messages.first()
    observation = conversation.observations.first()
    ObserverRun.objects.create(conversation=conversation, trigger="manual", status="succeeded")
    ReflectorRun.objects.create(conversation=conversation, trigger="manual", status="succeeded")
    redaction_traces(message)
    earlier_version(observation)
    hold = legal_hold_place(
        workspace=workspace, actor=ADMIN, reason="old", conversation=conversation
    )
    legal_hold_release(hold=hold, actor=ADMIN, reason="closed")
    response = api.post(
        f"/v1/conversations/{conversation.pk}/messages",
        {"role": "user", "content": "sent with a key"},
        format="json",
        HTTP_IDEMPOTENCY_KEY=f"key-{conversation.pk}",
    )
    assert response.status_code == 201
    # An agent read its context: a row of the read ledger.
    assert api.get(f"/v1/conversations/{conversation.pk}/context").status_code == 200
    return conversation


def _snapshot(conversations):
    ids = [c.pk for c in conversations]
    return {
        **{kind: len(rows) for kind, rows in tier_rows(conversations).items()},
        "runs": ObserverRun.objects.filter(conversation_id__in=ids).count()
        + ReflectorRun.objects.filter(conversation_id__in=ids).count(),
        "findings": RedactionFinding.objects.filter(conversation_id__in=ids).count(),
        "originals": RestrictedOriginal.objects.filter(conversation_id__in=ids).count(),
        "versions": ObservationVersion.objects.filter(conversation_id__in=ids).count(),
        "holds": LegalHold.objects.filter(conversation_id__in=ids).count(),
    }


def test_erasure_removes_every_tier_of_that_end_user_and_nothing_else(
    api, admin_api, workspace, other_workspace, make_client
):
    theirs_api = make_client(other_workspace)
    alice = [_with_everything(api, workspace, "alice") for _ in range(2)]
    bob = _with_everything(api, workspace, "bob")
    alice_elsewhere = _with_everything(theirs_api, other_workspace, "alice")
    untouched = _snapshot([bob, alice_elsewhere])
    alice_rows = tier_rows(alice)
    per_conversation = {c.pk: tier_rows([c]) for c in alice}
    assert IdempotencyRecord.objects.count() == 4

    created = admin_api.post(
        "/v1/erasure-requests", {"userId": "alice", "reason": "GDPR request 12"}, format="json"
    )
    assert created.status_code == 202, created.content
    request_id = created.json()["id"]
    assert created.json()["status"] == "pending"

    assert erasure_task.apply(args=[request_id]).get() == "completed"  # the worker's part

    status = admin_api.get(f"/v1/erasure-requests/{request_id}").json()
    assert status["status"] == "completed"
    assert status["counts"] == {
        "conversations": 2,
        "messages": 2 * 5,
        "observations": 2 * 4,
        "reflections": 2 * 4,
        "observerRuns": 2,
        "reflectorRuns": 2,
        "redactionFindings": 2,
        "restrictedOriginals": 2,
        "observationVersions": 2,
        "legalHolds": 2,
        "idempotencyRecords": 2,
        "messageScans": 2,
        "scanRequests": 2 * 2,  # one per write; no worker scanned them
        "contextReads": 2,
        "contextManifests": 2,  # what the memory versions those reads were served from held
    }
    assert status["completedAt"]
    assert not Conversation.objects.filter(workspace=workspace, user_id="alice").exists()
    assert _snapshot(alice) == {
        "contextReads": 0,
        "messages": 0,
        "observations": 0,
        "reflections": 0,
        "reasoningSteps": 0,
        "toolCalls": 0,
        "runs": 0,
        "findings": 0,
        "originals": 0,
        "versions": 0,
        "holds": 0,
    }
    assert _snapshot([bob, alice_elsewhere]) == untouched
    assert set(IdempotencyRecord.objects.values_list("key", flat=True)) == {
        f"key-{bob.pk}",
        f"key-{alice_elsewhere.pk}",
    }

    # Receipts: one per conversation, in the same transaction, and a summary.
    receipts = events(workspace, "erasure.delete_conversation")
    assert sorted(r.target_id for r in receipts) == sorted(str(c.pk) for c in alice)
    for receipt in receipts:
        rows = per_conversation[next(c.pk for c in alice if str(c.pk) == receipt.target_id)]
        assert receipt.after["idsSha256"] == ids_hash(
            {kind: [pk for _, pk in found] for kind, found in rows.items()}
        )
        assert receipt.after["counts"]["messages"] == 5
        assert receipt.reason == "GDPR request 12"
        assert receipt.actor_type == "api_key"
    [summary] = events(workspace, "erasure.complete")
    assert summary.after["idsSha256"] == erasure_hash(alice_rows)
    assert summary.after["counts"] == status["counts"]
    assert summary.target_id == str(request_id)
    assert events(workspace, "erasure.request")[0].after["endUserId"] == "alice"


def test_a_hold_on_the_end_user_refuses_the_request_with_409(admin_api, workspace):
    conversation = conversation_with_tiers(workspace, user_id="carol")
    hold = legal_hold_place(workspace=workspace, actor=ADMIN, reason="case", end_user_id="carol")
    before = tier_rows([conversation])

    response = admin_api.post(
        "/v1/erasure-requests", {"userId": "carol", "reason": "asked"}, format="json"
    )

    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "legal_hold"
    assert f"Legal hold {hold.pk}" in body["message"]
    recorded = admin_api.get(f"/v1/erasure-requests/{body['erasureRequestId']}").json()
    assert (recorded["status"], recorded["error"]) == ("refused", body["message"])
    assert tier_rows([conversation]) == before
    assert events(workspace, "erasure.refuse")[0].after["holdIds"] == [hold.pk]


def test_a_hold_on_one_of_their_conversations_refuses_it_too(admin_api, workspace):
    held = conversation_with_tiers(workspace, user_id="dan")
    free = conversation_with_tiers(workspace, user_id="dan")
    legal_hold_place(workspace=workspace, actor=ADMIN, reason="case", conversation=held)

    response = admin_api.post(
        "/v1/erasure-requests", {"userId": "dan", "reason": "asked"}, format="json"
    )

    assert response.status_code == 409
    assert Conversation.objects.filter(pk__in=[held.pk, free.pk]).count() == 2


def test_a_hold_placed_before_the_worker_runs_stops_it(workspace):
    conversation = conversation_with_tiers(workspace, user_id="erin")
    request = erasure_request_create(
        workspace=workspace, actor=ADMIN, end_user_id="erin", reason="asked"
    )
    legal_hold_place(workspace=workspace, actor=ADMIN, reason="subpoena", end_user_id="erin")

    outcome = erasure_execute(request_id=request.pk)

    assert outcome.request.status == ErasureRequest.Status.REFUSED
    assert "Legal hold" in outcome.request.error
    assert Conversation.objects.filter(pk=conversation.pk).exists()
    assert events(workspace, "erasure.refuse")


def test_a_failed_attempt_is_given_back_for_a_retry(workspace, monkeypatch):
    conversation_with_tiers(workspace, user_id="fay")
    request = erasure_request_create(
        workspace=workspace, actor=ADMIN, end_user_id="fay", reason="asked"
    )
    real = erasure._erase_conversation
    monkeypatch.setattr(
        erasure, "_erase_conversation", lambda *a: (_ for _ in ()).throw(RuntimeError("down"))
    )

    first = erasure_execute(request_id=request.pk, final_attempt=False)
    assert (first.retry, first.request.status) == (True, ErasureRequest.Status.PENDING)

    monkeypatch.setattr(erasure, "_erase_conversation", real)
    second = erasure_execute(request_id=request.pk)
    assert second.request.status == ErasureRequest.Status.COMPLETED
    assert not Conversation.objects.filter(user_id="fay").exists()
    # Run again (a redelivered task): not PENDING, so nothing happens.
    assert erasure_execute(request_id=request.pk).request.status == "completed"
    assert len(events(workspace, "erasure.complete")) == 1


def test_a_last_failed_attempt_is_recorded_as_failed(workspace, monkeypatch):
    conversation_with_tiers(workspace, user_id="gus")
    request = erasure_request_create(
        workspace=workspace, actor=ADMIN, end_user_id="gus", reason="asked"
    )
    monkeypatch.setattr(
        erasure, "_erase_conversation", lambda *a: (_ for _ in ()).throw(RuntimeError("x"))
    )

    outcome = erasure_execute(request_id=request.pk, final_attempt=True)

    assert outcome.request.status == ErasureRequest.Status.FAILED
    assert outcome.request.error == "RuntimeError (see worker log)"
    assert events(workspace, "erasure.fail")


def test_an_end_user_with_no_memory_is_erased_with_zero_counts(admin_api):
    created = admin_api.post(
        "/v1/erasure-requests", {"userId": "nobody", "reason": "asked"}, format="json"
    )
    erasure_task.apply(args=[created.json()["id"]])
    status = admin_api.get(f"/v1/erasure-requests/{created.json()['id']}").json()
    assert (status["status"], status["counts"]) == ("completed", {})


@pytest.mark.parametrize(
    ("body", "error", "field"),
    [
        ({"reason": "asked"}, "invalid_request", "userId"),
        ({"userId": "", "reason": "asked"}, "invalid_request", "userId"),
        ({"userId": "   ", "reason": "asked"}, "invalid_request", "userId"),
        ({"userId": 7, "reason": "asked"}, "invalid_request", "userId"),
        ({"userId": "u" * 256, "reason": "asked"}, "invalid_request", "userId"),
        ({"userId": "u"}, "reason_required", "reason"),
        ({"userId": "u", "reason": " "}, "reason_required", "reason"),
    ],
)
def test_bad_erasure_requests_are_400s(admin_api, body, error, field):
    response = admin_api.post("/v1/erasure-requests", body, format="json")
    assert response.status_code == 400, response.content
    assert (response.json()["code"], response.json().get("field")) == (error, field)
    assert not ErasureRequest.objects.exists()


def test_erasure_routes_are_for_admin_keys_and_this_workspace(
    api, admin_api, workspace, other_workspace
):
    theirs = erasure_request_create(
        workspace=other_workspace, actor=ADMIN, end_user_id="u", reason="asked"
    )
    for response in (
        api.post("/v1/erasure-requests", {"userId": "u", "reason": "r"}, format="json"),
        api.get("/v1/erasure-requests"),
        api.get(f"/v1/erasure-requests/{theirs.pk}"),
    ):
        assert response.status_code == 403
        assert response.json()["code"] == "forbidden"
    assert ErasureRequest.objects.count() == 1
    assert admin_api.get(f"/v1/erasure-requests/{theirs.pk}").status_code == 404
    malformed = admin_api.get("/v1/erasure-requests/abc")
    assert (malformed.status_code, malformed.json()["field"]) == (400, "requestId")
    assert admin_api.get("/v1/erasure-requests").json() == {"erasureRequests": []}


def test_an_erasure_cut_off_by_its_time_limit_is_retried_then_failed_with_the_reason(
    workspace, monkeypatch
):
    conversation_with_tiers(workspace, user_id="hal")
    request = erasure_request_create(
        workspace=workspace, actor=ADMIN, end_user_id="hal", reason="asked"
    )

    def interrupted(*args):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(erasure, "_erase_conversation", interrupted)

    # Every attempt but the last gives the request back; the last one fails it and says why.
    assert erasure_task.apply(args=[request.pk]).get() == ErasureRequest.Status.FAILED
    request.refresh_from_db()
    assert request.error.startswith("the erasure reached its time limit of 600 s")
    assert Conversation.objects.filter(user_id="hal").exists()
    assert len(events(workspace, "erasure.fail")) == 1


def test_erasure_removes_the_end_users_escalations_and_counts_them(admin_api, workspace):
    theirs = conversation_create(workspace=workspace, user_id="alice")
    other = conversation_create(workspace=workspace, user_id="bob")
    for conversation in (theirs, theirs, other):
        escalation_create(conversation=conversation, actor=ADMIN, reason="Wants a person")
    request_id = admin_api.post(
        "/v1/erasure-requests", {"userId": "alice", "reason": "GDPR"}, format="json"
    ).json()["id"]

    assert erasure_task.apply(args=[request_id]).get() == "completed"

    counts = admin_api.get(f"/v1/erasure-requests/{request_id}").json()["counts"]
    assert counts["escalations"] == 2
    assert list(Escalation.objects.values_list("conversation_id", flat=True)) == [other.pk]
