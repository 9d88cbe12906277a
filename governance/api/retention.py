"""Retention policies, dry runs and sweeps over the API (compliance keys and above)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import (
    ClosedSerializer,
    LimitQuery,
    ReasonIn,
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
    query_params,
    reason_field,
    request_reason,
    validated,
)
from governance import selectors
from governance.api.outputs import (
    RETENTION_CONFLICT,
    RetentionPolicyListOut,
    RetentionPolicyOut,
    RetentionSweepListOut,
    RetentionSweepOut,
)
from governance.models import (
    RetentionPolicy,
)
from governance.retention.common import MAX_DAYS
from governance.retention.plan import retention_dry_run, retention_sweep_request
from governance.retention.policies import (
    retention_policy_create,
    retention_policy_delete,
    retention_policy_update,
)
from tenancy.api_base import COMPLIANCE_ERRORS, ComplianceApiView

_RETENTION_DAYS_HELP = "Days to keep this tier, 1..36500; null keeps it forever."


def _retention_days() -> StrictIntegerField:
    return StrictIntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=MAX_DAYS,
        help_text=_RETENTION_DAYS_HELP,
    )


class RetentionPolicyIn(ClosedSerializer):
    name = StrictCharField(max_length=100)
    conversationTag = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=100,
        help_text="Only conversations with this tag; blank: the workspace default.",
    )
    messageDays = _retention_days()
    observationDays = _retention_days()
    reflectionDays = _retention_days()
    contextReadDays = _retention_days()
    enabled = StrictBooleanField(required=False)
    reason = reason_field(help_text="Kept in the audit trail.")


_RETENTION_POLICY_FIELDS = {
    "name": "name",
    "conversationTag": "conversation_tag",
    "messageDays": "message_days",
    "observationDays": "observation_days",
    "reflectionDays": "reflection_days",
    "contextReadDays": "context_read_days",
    "enabled": "enabled",
}


class RetentionPolicyListCreateApi(ComplianceApiView):
    @extend_schema(
        operation_id="retention_policies_list",
        responses={200: RetentionPolicyListOut, **COMPLIANCE_ERRORS},
    )
    def get(self, request: Request) -> Response:
        policies = selectors.retention_policy_list(workspace=self.workspace)
        return Response({"policies": RetentionPolicyOut(policies, many=True).data})

    @extend_schema(
        operation_id="retention_policies_create",
        request=RetentionPolicyIn,
        responses={201: RetentionPolicyOut, 409: RETENTION_CONFLICT, **COMPLIANCE_ERRORS},
        description="One default policy (blank conversationTag) and one per tag. A "
        "conversation follows its tag policies when any match, else the default.",
    )
    def post(self, request: Request) -> Response:
        data = validated(RetentionPolicyIn, request.data)
        fields = {
            _RETENTION_POLICY_FIELDS[k]: v for k, v in data.items() if k in _RETENTION_POLICY_FIELDS
        }
        policy = retention_policy_create(
            workspace=self.workspace,
            actor=self.actor(),
            reason=data.get("reason") or "",
            **fields,
        )
        return Response(RetentionPolicyOut(policy).data, status=201)


class RetentionPolicyDetailApi(ComplianceApiView):
    def policy(self, policy_id: str) -> RetentionPolicy:
        return selectors.retention_policy_get(workspace=self.workspace, policy_id=policy_id)

    @extend_schema(
        operation_id="retention_policies_get",
        responses={200: RetentionPolicyOut, **COMPLIANCE_ERRORS},
    )
    def get(self, request: Request, policy_id: str) -> Response:
        return Response(RetentionPolicyOut(self.policy(policy_id)).data)

    @extend_schema(
        operation_id="retention_policies_update",
        request=RetentionPolicyIn(partial=True),
        responses={200: RetentionPolicyOut, 409: RETENTION_CONFLICT, **COMPLIANCE_ERRORS},
        description="Change the fields sent; a days field sent as null keeps that tier forever.",
    )
    def patch(self, request: Request, policy_id: str) -> Response:
        policy = self.policy(policy_id)
        data = validated(RetentionPolicyIn, request.data, partial=True)
        fields = {
            _RETENTION_POLICY_FIELDS[k]: v for k, v in data.items() if k in _RETENTION_POLICY_FIELDS
        }
        policy = retention_policy_update(
            policy=policy, actor=self.actor(), reason=data.get("reason") or "", **fields
        )
        return Response(RetentionPolicyOut(policy).data)

    @extend_schema(
        operation_id="retention_policies_delete",
        parameters=[OpenApiParameter("reason", str, description="Kept in the audit trail.")],
        request=ReasonIn,
        responses={204: None, **COMPLIANCE_ERRORS},
    )
    def delete(self, request: Request, policy_id: str) -> Response:
        policy = self.policy(policy_id)
        retention_policy_delete(policy=policy, actor=self.actor(), reason=request_reason(request))
        return Response(status=204)


class RetentionSweepIn(ClosedSerializer):
    policyId = StrictIntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text="Only the rows this policy governs; omitted: every enabled policy.",
    )


class RetentionSweepRequestIn(RetentionSweepIn):
    dryRun = StrictBooleanField(
        required=False,
        default=False,
        help_text="true: count what the sweep would delete and delete nothing (the dry "
        "run, answered 200 at once).",
    )


def _retention_sweep_policy(api: ComplianceApiView, data: dict[str, Any]) -> RetentionPolicy | None:
    if data.get("policyId") is None:
        return None
    return selectors.retention_policy_get(workspace=api.workspace, policy_id=data["policyId"])


class RetentionDryRunApi(ComplianceApiView):
    @extend_schema(
        operation_id="retention_dry_run",
        request=RetentionSweepIn,
        responses={200: RetentionSweepOut, **COMPLIANCE_ERRORS},
        description="Count, per tier, what a sweep would delete now; deletes nothing. A "
        "policyId previews that policy even while it is disabled.",
    )
    def post(self, request: Request) -> Response:
        data = validated(RetentionSweepIn, request.data or {})
        sweep = retention_dry_run(
            workspace=self.workspace,
            actor=self.actor(),
            policy=_retention_sweep_policy(self, data),
        )
        return Response(RetentionSweepOut(sweep).data)


class RetentionSweepListCreateApi(ComplianceApiView):
    @extend_schema(
        operation_id="retention_sweeps_list",
        parameters=[
            OpenApiParameter("limit", int, description="1..200, default 50; newest first.")
        ],
        responses={200: RetentionSweepListOut, **COMPLIANCE_ERRORS},
    )
    def get(self, request: Request) -> Response:
        limit = query_params(LimitQuery, request)["limit"]
        sweeps = selectors.retention_sweep_list(workspace=self.workspace, limit=limit)
        return Response({"sweeps": RetentionSweepOut(sweeps, many=True).data})

    @extend_schema(
        operation_id="retention_sweeps_create",
        request=RetentionSweepRequestIn,
        responses={
            200: RetentionSweepOut,
            202: RetentionSweepOut,
            409: RETENTION_CONFLICT,
            **COMPLIANCE_ERRORS,
        },
        description="Run a sweep now, in the background (202); follow it with "
        "GET /v1/retention/sweeps/{id}. 409 while another sweep of the workspace is open. "
        "With dryRun: true, the dry run instead (200, deletes nothing), as "
        "POST /v1/retention/dry-run.",
    )
    def post(self, request: Request) -> Response:
        data = validated(RetentionSweepRequestIn, request.data or {})
        policy = _retention_sweep_policy(self, data)
        if data["dryRun"]:
            dry_run = retention_dry_run(workspace=self.workspace, actor=self.actor(), policy=policy)
            return Response(RetentionSweepOut(dry_run).data)
        sweep = retention_sweep_request(workspace=self.workspace, actor=self.actor(), policy=policy)
        return Response(RetentionSweepOut(sweep).data, status=202)


class RetentionSweepDetailApi(ComplianceApiView):
    @extend_schema(
        operation_id="retention_sweeps_get", responses={200: RetentionSweepOut, **COMPLIANCE_ERRORS}
    )
    def get(self, request: Request, sweep_id: str) -> Response:
        sweep = selectors.retention_sweep_get(workspace=self.workspace, sweep_id=sweep_id)
        return Response(RetentionSweepOut(sweep).data)
