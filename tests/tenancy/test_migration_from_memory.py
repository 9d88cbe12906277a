"""Workspaces, API keys and role grants moved from the memory and dashboard apps to tenancy
without moving a row: a database of the release before, with rows in it, migrates to
the new state, and every row is there and works through the ORM, the API, the dashboard
and the admin's permissions. (Migrating from an empty database is what building the
test database does.)"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.state import StateApps
from rest_framework.test import APIClient

from core.actors import SYSTEM_ACTOR
from core.errors import MemdeskError
from governance.models import RetentionPolicy
from memory.models import Conversation
from tenancy.auth import api_key_authenticate
from tenancy.models import ApiKey, Capability, Membership, Role, Workspace
from tenancy.services import membership_grant, membership_role_change
from tests.migrations import migrate_to_latest

# The last migrations before the move, and tenancy not yet there.
BEFORE = [
    ("tenancy", None),
    ("memory", "0017_new_workspaces_get_a_context_budget"),
    ("dashboard", "0001_initial"),
    ("governance", "0006_requester_roles"),
]
RAW_KEY = "md_" + "k" * 43


def _state_before(executor: MigrationExecutor) -> StateApps:
    # The other apps (auth, contenttypes, ...) as they are: only these four were moved back.
    moved_back = {app for app, _ in BEFORE}
    others = [node for node in executor.loader.graph.leaf_nodes() if node[0] not in moved_back]
    return executor.loader.project_state(others + [n for n in BEFORE if n[1]]).apps


@pytest.fixture
def before_the_move(transactional_db) -> Iterator[StateApps]:
    """The schema and models of the release before; the database is migrated to today's
    when the test is done with it, whatever happened."""
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        yield _state_before(executor)
    finally:
        migrate_to_latest()


def _write_rows_as_before(old: StateApps) -> dict[str, object]:
    workspace = old.get_model("memory", "Workspace").objects.create(
        name="before-the-move", fidelity="detailed", context_max_tokens=5000
    )
    old.get_model("memory", "ApiKey").objects.create(
        workspace=workspace,
        name="support bot",
        prefix=RAW_KEY[:11],
        key_hash=hashlib.sha256(RAW_KEY.encode()).hexdigest(),
        scope="curator",
    )
    user = old.get_model("auth", "User").objects.create(username="olga")
    old.get_model("dashboard", "Membership").objects.create(
        user=user, workspace=workspace, role="admin"
    )
    # The admin site's right to change workspaces, given as it was then.
    memory_workspace = old.get_model("contenttypes", "ContentType").objects.get(
        app_label="memory", model="workspace"
    )
    user.user_permissions.add(
        old.get_model("auth", "Permission").objects.get(
            content_type=memory_workspace, codename="change_workspace"
        )
    )
    conversation = old.get_model("memory", "Conversation").objects.create(
        workspace=workspace, user_id="alice", title="written before the move", last_seq=1
    )
    old.get_model("memory", "Message").objects.create(
        conversation=conversation, seq=1, role="user", content="hello from before", token_count=3
    )
    old.get_model("governance", "RetentionPolicy").objects.create(
        workspace=workspace, name="a year", message_days=365
    )
    return {
        "workspace_id": workspace.pk,
        "conversation_id": conversation.pk,
        "content_type_id": memory_workspace.pk,
    }


def test_rows_written_before_the_move_are_tenancys_after_it(before_the_move, client):
    before = _write_rows_as_before(before_the_move)

    migrate_to_latest()
    ContentType.objects.clear_cache()

    workspace = Workspace.objects.get(name="before-the-move")
    assert workspace.pk == before["workspace_id"]
    assert (workspace.fidelity, workspace.context_max_tokens) == ("detailed", 5000)
    conversation = Conversation.objects.get(pk=before["conversation_id"])
    assert conversation.workspace == workspace
    assert list(workspace.conversations.all()) == [conversation]
    assert [p.name for p in RetentionPolicy.objects.filter(workspace=workspace)] == ["a year"]

    api_key = api_key_authenticate(RAW_KEY)
    assert (api_key.workspace_id, api_key.name, api_key.scope) == (
        workspace.pk,
        "support bot",
        ApiKey.Scope.CURATOR,
    )
    assert [k.name for k in workspace.api_keys.all()] == ["support bot"]

    [membership] = Membership.objects.filter(workspace=workspace)
    assert (membership.user.username, membership.role) == ("olga", Role.ADMIN)
    assert membership.can(Capability.MANAGE_MEMBERS)

    # The content type was renamed, not replaced: the permission given before still holds.
    assert ContentType.objects.get_for_model(Workspace).pk == before["content_type_id"]
    assert not ContentType.objects.filter(app_label="memory", model="workspace").exists()
    assert Permission.objects.get(codename="change_workspace").content_type.app_label == "tenancy"
    assert membership.user.has_perm("tenancy.change_workspace")

    # The old key reads and writes through the API, in its workspace.
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {RAW_KEY}")
    listed = api.get("/v1/conversations").json()["conversations"]
    assert [c["id"] for c in listed] == [str(conversation.pk)]
    messages = api.get(f"/v1/conversations/{conversation.pk}/messages").json()
    assert "hello from before" in str(messages)
    created = api.post("/v1/conversations", {"userId": "bob"}, format="json")
    assert created.status_code == 201
    assert Conversation.objects.get(pk=created.json()["id"]).workspace == workspace

    # The old grant opens the dashboard, and the grant services see it: the workspace's
    # only admin cannot be demoted, a new grant joins it.
    client.force_login(membership.user)
    page = client.get("/conversations/")
    assert page.status_code == 200
    assert "written before the move" in page.content.decode()
    with pytest.raises(MemdeskError, match="only admin"):
        membership_role_change(
            membership=membership, role=Role.VIEWER, actor=SYSTEM_ACTOR, reason="test"
        )
    other = type(membership.user).objects.create(username="pavel")
    membership_grant(
        user=other, workspace=workspace, role=Role.ADMIN, actor=SYSTEM_ACTOR, reason="cover"
    )
    assert workspace.memberships.count() == 2


def test_the_move_can_be_migrated_back_and_forth_with_the_rows_kept(before_the_move):
    before = _write_rows_as_before(before_the_move)
    migrate_to_latest()

    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = _state_before(executor)
    assert old.get_model("memory", "Workspace").objects.get().pk == before["workspace_id"]
    assert old.get_model("dashboard", "Membership").objects.get().role == "admin"
    assert (
        old.get_model("contenttypes", "ContentType")
        .objects.filter(app_label="memory", model="workspace")
        .exists()
    )

    migrate_to_latest()
    assert Workspace.objects.get().api_keys.get().name == "support bot"
