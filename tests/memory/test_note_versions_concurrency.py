"""Concurrent corrections of one note on PostgreSQL: of many writes made from the same
version, exactly one is stored; the check and the write are one step under the row's
lock, so no two of them can both see the version they expect."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from core.actors import SYSTEM_ACTOR
from governance.models import AuditEvent
from memory.models import Observation, ObservationVersion, Reflection, ReflectionVersion
from memory.services.conversations import conversation_create
from tenancy.services import api_key_create, workspace_get_or_create
from tests.memory.factories import ObservationFactory, ReflectionFactory

WRITERS = 30


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("tier", ["observations", "reflections"])
def test_thirty_patches_from_one_version_store_exactly_one(tier):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: run with DATABASE_URL=postgres://... (CI does)")
    workspace = workspace_get_or_create(name="race")
    conversation = conversation_create(workspace=workspace)
    factory = ObservationFactory if tier == "observations" else ReflectionFactory
    note = factory(conversation=conversation, text="User prefers email.", priority="medium")
    _, raw_key = api_key_create(workspace=workspace, actor=SYSTEM_ACTOR, scope="curator")
    url = f"/v1/conversations/{conversation.pk}/{tier}/{note.pk}"
    start = threading.Barrier(WRITERS)
    statuses: list[int] = []
    errors: list[BaseException] = []

    def patch(writer: int) -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
        try:
            start.wait()
            response = client.patch(
                url,
                {"content": f"User prefers channel {writer}.", "reason": f"writer {writer}"},
                format="json",
                headers={"If-Match": '"1"'},
            )
            statuses.append(response.status_code)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=patch, args=(w,)) for w in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert sorted(statuses) == [200] + [412] * (WRITERS - 1)
    model = Observation if tier == "observations" else Reflection
    versions = ObservationVersion if tier == "observations" else ReflectionVersion
    key = "observation_id" if tier == "observations" else "reflection_id"
    assert model.objects.get(pk=note.pk).version == 2
    assert versions.objects.filter(**{key: note.pk}).count() == 1
    assert AuditEvent.objects.filter(target_id=str(note.pk)).count() == 1
