"""What the agent saw: a read of the ledger rendered again, byte for byte, from the manifest
of its memory version and the notes' histories (memory/context/rebuild.py), after the
memory it was served from has been edited, deleted, reverted, re-derived and swept."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.selectors.served import seen_again
from governance.holds import legal_hold_place
from governance.models import ContextManifest, ContextRead
from governance.retention.plan import retention_sweep_request
from governance.retention.policies import retention_policy_create
from governance.retention.sweep import retention_sweep
from memory.models import Conversation, Observation, Reflection
from tests.dashboard.factories import reflect
from tests.governance.builders import ADMIN

READS = [
    {"format": "json"},
    {"format": "text"},
    {"format": "messages"},
    {"format": "json", "max_tokens": 120},
    {"format": "text", "max_tokens": 60},
    {"format": "messages", "max_tokens": 90},
    {"format": "text", "query": "refund"},
]


def _read_all(api, conversation_id: str) -> dict[str, bytes]:
    """Every read of READS; the bodies served, by the ledger row's id."""
    served = {}
    for params in READS:
        before = set(ContextRead.objects.values_list("pk", flat=True))
        response = api.get(f"/v1/conversations/{conversation_id}/context", params)
        assert response.status_code == 200, response.content
        [row] = ContextRead.objects.exclude(pk__in=before)
        served[str(row.pk)] = response.content
    return served


def _rebuilt_matches(conversation: Conversation, served: dict[str, bytes]) -> list[str]:
    """The reads whose rebuilt body is not the one served (with a query: the body before
    its recalled section, whose digest the ledger keeps)."""
    wrong = []
    for read in ContextRead.objects.filter(pk__in=list(served)):
        seen = seen_again(conversation=conversation, read=read)
        assert seen.rebuilt is not None
        body = seen.rebuilt.rendered.body
        if read.query_digest:
            ok = seen.matches and read.base_sha256 == hashlib.sha256(body).hexdigest()
        else:
            ok = seen.matches and body == served[str(read.pk)]
        if not ok:
            wrong.append(f"{read.format} {read.max_tokens} at v{read.memory_version}")
    return wrong


@pytest.mark.django_db
def test_a_read_is_rebuilt_byte_for_byte_after_every_kind_of_later_change(
    admin_api, reflected_conversation, workspace
):
    conversation = reflected_conversation
    c = str(conversation.pk)
    path = f"/v1/conversations/{c}"
    served = _read_all(admin_api, c)

    # A reflection's source corrected, the reflection re-derived by the Reflector.
    reflection = Reflection.objects.filter(conversation=conversation, status="active").first()
    assert reflection is not None, "the fixture reflects"
    source = reflection.source_observation_ids[0]
    admin_api.patch(
        f"{path}/observations/{source}", {"priority": "low", "reason": "not urgent"}, format="json"
    )
    served |= _read_all(admin_api, c)
    reflect(conversation)
    assert Reflection.objects.get(pk=reflection.pk).status == "superseded"
    served |= _read_all(admin_api, c)

    # An observation edited, then another deleted.
    first, second = Observation.objects.filter(conversation=conversation, status="active").order_by(
        "observed_at", "id"
    )[:2]
    edited = admin_api.patch(
        f"{path}/observations/{first.pk}",
        {"text": "User asked for a refund by bank transfer.", "reason": "wrong channel"},
        format="json",
    )
    assert edited.status_code == 200, edited.content
    served |= _read_all(admin_api, c)
    assert (
        admin_api.delete(
            f"{path}/observations/{second.pk}", {"reason": "duplicate"}, format="json"
        ).status_code
        == 204
    )
    served |= _read_all(admin_api, c)

    # The edit reverted; a note and a pin added; messages written after them.
    reverted = admin_api.post(
        f"{path}/observations/{first.pk}/revert",
        {"version": 1, "reason": "was right"},
        format="json",
    )
    assert reverted.status_code == 200, reverted.content
    admin_api.post(
        f"{path}/observations",
        {"text": "User is travelling on Friday.", "priority": "high"},
        format="json",
    )
    admin_api.post(
        f"{path}/messages/bulk",
        {
            "messages": [
                {"role": "user", "content": f"Any news on the refund? ({n})"} for n in range(4)
            ]
        },
        format="json",
    )
    # (The newest message: retention below keeps it, and so the pin.)
    message = conversation.messages.order_by("seq").last()
    pinned = admin_api.post(f"{path}/pins", {"messageId": str(message.pk)}, format="json")
    assert pinned.status_code == 201
    served |= _read_all(admin_api, c)

    # Retention deletes the older messages (observed long ago): other rows than the tail.
    retention_policy_create(workspace=workspace, actor=ADMIN, name="short", message_days=2)
    retention_sweep(sweep_id=retention_sweep_request(workspace=workspace, actor=ADMIN).pk)
    assert conversation.messages.count() == 4
    served |= _read_all(admin_api, c)

    assert len(served) == 7 * len(READS)
    versions = set(ContextRead.objects.values_list("memory_version", flat=True))
    assert len(versions) >= 7  # each change served a new memory version
    assert ContextManifest.objects.filter(conversation=conversation).count() == len(versions)
    assert _rebuilt_matches(conversation, served) == []


@pytest.mark.django_db
def test_a_read_that_cannot_be_rebuilt_says_why_and_does_not_claim_a_match(
    admin_api, reflected_conversation
):
    c = str(reflected_conversation.pk)
    message = reflected_conversation.messages.order_by("seq").first()
    pin = admin_api.post(
        f"/v1/conversations/{c}/pins", {"messageId": str(message.pk)}, format="json"
    )
    served = admin_api.get(f"/v1/conversations/{c}/context", {"format": "text"})
    read = ContextRead.objects.get()

    admin_api.delete(
        f"/v1/conversations/{c}/pins/{pin.json()['id']}", {"reason": "x"}, format="json"
    )
    seen = seen_again(conversation=reflected_conversation, read=read)

    assert not seen.matches
    assert seen.rebuilt is not None and seen.rebuilt.rendered.body != served.content
    assert seen.why_not == ("1 pin it served was deleted since",)

    ContextManifest.objects.all().delete()  # as a worker's crash before its batch leaves it
    lost = seen_again(conversation=reflected_conversation, read=read)
    assert lost.rebuilt is None and not lost.matches
    assert "was not recorded" in lost.why_not[0]


@pytest.mark.django_db
def test_a_read_served_just_after_midnight_is_rebuilt_for_the_day_it_was_rendered(
    admin_api, reflected_conversation
):
    c = str(reflected_conversation.pk)
    served = admin_api.get(f"/v1/conversations/{c}/context", {"format": "text"})
    read = ContextRead.objects.get()
    midnight = (timezone.now() + timedelta(days=1)).replace(hour=0, minute=0, second=20)
    ContextRead.objects.filter(pk=read.pk).update(served_at=midnight)
    read.refresh_from_db()

    seen = seen_again(conversation=reflected_conversation, read=read)

    assert seen.matches and seen.rebuilt is not None
    assert seen.rebuilt.rendered.body == served.content


@pytest.mark.django_db
def test_retention_drops_the_manifests_no_kept_read_names(admin_api, workspace):
    retention_policy_create(workspace=workspace, actor=ADMIN, name="ledger", context_read_days=30)
    ids = [
        admin_api.post("/v1/conversations", {"userId": who}, format="json").json()["id"]
        for who in ("fay", "hal")
    ]
    for c in ids:
        admin_api.get(f"/v1/conversations/{c}/context")
        admin_api.post(f"/v1/conversations/{c}/observations", {"text": "A note."}, format="json")
        admin_api.get(f"/v1/conversations/{c}/context")
    long_ago = timezone.now() - timedelta(days=40)
    ContextManifest.objects.update(noted_at=long_ago)
    for c in ids:  # each conversation's first read is old; its second, of today's memory, is not
        first = ContextRead.objects.filter(conversation_id=c).order_by("memory_version").first()
        ContextRead.objects.filter(pk=first.pk).update(served_at=long_ago)
    legal_hold_place(workspace=workspace, actor=ADMIN, reason="case", end_user_id="hal")
    fay, hal = (Conversation.objects.get(pk=c).memory_version for c in ids)

    sweep = retention_sweep(sweep_id=retention_sweep_request(workspace=workspace, actor=ADMIN).pk)

    assert sweep.counts["contextReads"] == 1  # fay's old read; the hold keeps hal's
    kept = {
        (str(c), v)
        for c, v in ContextManifest.objects.values_list("conversation_id", "memory_version")
    }
    assert kept == {
        (ids[0], fay),  # named by the read kept
        (ids[1], hal - 1),  # held
        (ids[1], hal),
    }
