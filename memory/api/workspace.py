"""/v1/workspace/settings: the memory settings of the key's workspace."""

from __future__ import annotations

from typing import ClassVar

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import ERRORS, validated
from core.errors import MemdeskError
from memory.api.inputs import WorkspaceSettingsIn
from memory.api.presenters import WorkspaceSettingsOut
from memory.services.workspace_settings import UNCHANGED, workspace_settings_update
from tenancy.api_base import ADMIN_ERRORS, ApiView
from tenancy.models import ApiKey


class WorkspaceSettingsApi(ApiView):
    # Any key reads the settings (an agent may want to know how much detail its memory
    # keeps); only admin keys change them.
    required_scopes: ClassVar[dict[str, str]] = {"PATCH": ApiKey.Scope.ADMIN}

    @extend_schema(
        operation_id="workspace_settings_get",
        responses={200: WorkspaceSettingsOut, **ERRORS},
        description="The memory settings in force in the key's workspace: the Observer's "
        "fidelity (and where it comes from), the thresholds and the engine.",
    )
    def get(self, request: Request) -> Response:
        return Response(WorkspaceSettingsOut(self.workspace).data)

    @extend_schema(
        operation_id="workspace_settings_update",
        request=WorkspaceSettingsIn,
        responses={200: WorkspaceSettingsOut, **ADMIN_ERRORS},
        description="Choose the Observer's fidelity for this workspace, or null to follow "
        "the server's default; and the default token budget of its served contexts "
        "(contextMaxTokens), or null for none; which new reflections wait for a person "
        "(approval, approvalByTag). Admin keys only; `reason` is required and "
        "the change is audited (a change that changes nothing is not). The Observer's next "
        "runs use the fidelity; memory already written stays as it is.",
    )
    def patch(self, request: Request) -> Response:
        data = validated(WorkspaceSettingsIn, request.data)
        if not {"fidelity", "contextMaxTokens", "approval", "approvalByTag"} & set(data):
            raise MemdeskError(
                "nothing_to_change",
                "Send fidelity: compact, balanced, detailed, or null to follow the default; "
                "contextMaxTokens: a token budget, or null for none; approval: off, "
                "reflections or flagged; or approvalByTag: a mode per conversation tag.",
                field="fidelity",
            )
        workspace = workspace_settings_update(
            workspace=self.workspace,
            actor=self.actor(),
            fidelity=data.get("fidelity", UNCHANGED),
            context_max_tokens=data.get("contextMaxTokens", UNCHANGED),
            approval=data.get("approval", UNCHANGED),
            approval_by_tag=data.get("approvalByTag", UNCHANGED),
            reason=data.get("reason") or "",
        )
        return Response(WorkspaceSettingsOut(workspace).data)
