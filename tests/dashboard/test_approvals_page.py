"""The approvals page (/approvals/): what waits, beside its sources and what it drops; a
reviewer approves (as written or edited) or rejects with a reason; the memory settings
page chooses the policy."""

from __future__ import annotations

import pytest

from governance.models import AuditEvent
from memory.models import Observation, Reflection
from memory.services.workspace_settings import workspace_settings_update
from tests.dashboard.conftest import CARD, EMAIL
from tests.dashboard.factories import observe, reflect
from tests.governance.builders import ADMIN
from tests.memory.factories import ObservationFactory
from tests.memory.fake_engines import CondensesEverything, ObservesOneLine


@pytest.fixture
def waiting(workspace, conversation, fake_engine) -> Reflection:
    workspace_settings_update(workspace=workspace, actor=ADMIN, reason="r", approval="flagged")
    fake_engine(CondensesEverything("Customer waits for a parcel."))
    ObservationFactory(
        conversation=conversation,
        text="User's parcel ORD-88123 is late; she needs a refund.",
        priority="high",
    )
    reflect(conversation)
    return Reflection.objects.get(conversation=conversation, status="waiting")


def test_the_queue_shows_a_waiting_reflection_beside_its_sources(login, waiting):
    html = login("viewer").get("/approvals/").content.decode()

    assert "Customer waits for a parcel." in html
    assert "User&#x27;s parcel ORD-88123 is late" in html
    assert "Dropped: ORD-88123" in html
    assert "It drops what a high-priority source held" in html
    assert "1 waiting, the oldest for" in html
    assert 'action="/approvals/' not in html  # a viewer reads, and does not decide


def test_a_reviewer_approves_an_edit_and_the_agent_is_served_it(login, api, waiting):
    client = login("reviewer")
    words = "Customer needs a refund for parcel ORD-88123, which is late."

    refused = client.post(
        f"/approvals/reflection/{waiting.pk}/approve/", {"text": words, "reason": ""}
    )
    assert refused.status_code == 422 and "every approval needs one" in refused.content.decode()
    done = client.post(
        f"/approvals/reflection/{waiting.pk}/approve/", {"text": words, "reason": "ok"}
    )

    assert done.status_code == 302 and done["Location"] == "/approvals/"
    served = api.get(f"/v1/conversations/{waiting.conversation_id}/context").json()
    assert [r["text"] for r in served["reflections"]] == [words]
    assert AuditEvent.objects.filter(action="reflection.approve", actor_type="user").exists()
    assert "Nothing waits for approval." in client.get("/approvals/").content.decode()


def test_a_reviewer_rejects_and_others_cannot(login, waiting, other_workspace, member):
    assert (
        login("viewer")
        .post(f"/approvals/reflection/{waiting.pk}/reject/", {"reason": "x"})
        .status_code
        == 403
    )
    stranger = login("admin", in_workspace=other_workspace)
    assert (
        stranger.post(f"/approvals/reflection/{waiting.pk}/reject/", {"reason": "x"}).status_code
        == 404
    )

    done = login("reviewer").post(
        f"/approvals/reflection/{waiting.pk}/reject/", {"reason": "wrong parcel"}
    )

    assert done.status_code == 302
    assert Reflection.objects.get(pk=waiting.pk).status == "rejected"
    again = login("reviewer").post(
        f"/approvals/reflection/{waiting.pk}/reject/", {"reason": "again"}
    )
    assert again.status_code == 422 and "not waiting for approval" in again.content.decode()


def test_memory_settings_choose_the_policy_and_its_tags(login, workspace):
    client = login("admin")
    bad = client.post(
        "/settings/memory/",
        {
            "fidelity": "default",
            "approval": "flagged",
            "approval_by_tag": "vip reflections",
            "reason": "r",
        },
    )
    assert bad.status_code == 422 and "Line 1: write a tag, a colon" in bad.content.decode()

    saved = client.post(
        "/settings/memory/",
        {
            "fidelity": "default",
            "approval": "flagged",
            "approval_by_tag": "vip: reflections\n",
            "reason": "pilot",
        },
    )

    assert saved.status_code == 302
    workspace.refresh_from_db()
    assert (workspace.approval, workspace.approval_by_tag) == ("flagged", {"vip": "reflections"})
    event = AuditEvent.objects.get(action="workspace.settings.update")
    assert event.after["approval"] == "flagged" and event.reason == "pilot"


def test_a_waiting_observation_shows_its_messages_masked(
    login, workspace, scanned_conversation, fake_engine
):
    workspace_settings_update(workspace=workspace, actor=ADMIN, reason="r", approval="flagged")
    fake_engine(ObservesOneLine("Customer asked for a gold membership upgrade."))
    observe(scanned_conversation)
    waiting = Observation.objects.get(conversation=scanned_conversation, status="waiting")

    html = login("reviewer").get("/approvals/").content.decode()

    assert "Customer asked for a gold membership upgrade." in html
    assert "served word for word while it waits" in html
    assert CARD not in html and EMAIL not in html and "&lt;CREDIT_CARD&gt;" in html
    assert f'action="/approvals/observation/{waiting.pk}/approve/"' in html
