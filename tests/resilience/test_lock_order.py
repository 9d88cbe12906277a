"""A retention sweep requested while an audit event is being written (found by the soak
test): the request's lock on the workspace row must not wait on the KEY SHARE lock the
event's insert takes under the chain head, or PostgreSQL kills one as a deadlock."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from core.actors import SYSTEM_ACTOR
from governance.audit.writer import audit_record
from governance.models import AuditChainHead, RetentionSweep
from governance.retention.plan import retention_sweep_request
from governance.retention.policies import retention_policy_create

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def test_a_sweep_request_and_an_audit_event_in_flight_both_commit(requires_postgres, workspace):
    retention_policy_create(
        workspace=workspace, actor=SYSTEM_ACTOR, name="30 days", message_days=30, reason="r"
    )
    holding = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        """Holds the chain head, as audit_record does, then inserts its event."""
        try:
            with transaction.atomic():
                AuditChainHead.objects.select_for_update().get(workspace_id=workspace.pk)
                holding.set()
                time.sleep(1.5)  # the sweep request now holds the workspace and waits
                audit_record(
                    workspace_id=workspace.pk,
                    actor=SYSTEM_ACTOR,
                    action="test.event",
                    target_type="workspace",
                    target_id=str(workspace.pk),
                )
        except BaseException as error:  # noqa: BLE001 - asserted below
            errors.append(error)
        finally:
            connection.close()

    def requester() -> None:
        try:
            holding.wait(10)
            retention_sweep_request(workspace=workspace, actor=SYSTEM_ACTOR)
        except BaseException as error:  # noqa: BLE001
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer), threading.Thread(target=requester)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    assert RetentionSweep.objects.filter(workspace=workspace).count() == 1
