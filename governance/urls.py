"""Governance routes under /v1/ (included by config/urls.py)."""

from __future__ import annotations

from django.urls import path

from governance.api import erasure, holds, ledger, redaction, retention

urlpatterns = [
    path("redaction/policy", redaction.RedactionPolicyApi.as_view()),
    path("redaction/preview", redaction.RedactionPreviewApi.as_view()),
    path("redaction/findings", redaction.RedactionFindingListApi.as_view()),
    path(
        "redaction/findings/<str:finding_id>/approve",
        redaction.RedactionFindingApproveApi.as_view(),
    ),
    path(
        "redaction/findings/<str:finding_id>/dismiss",
        redaction.RedactionFindingDismissApi.as_view(),
    ),
    path(
        "redaction/originals/<str:target_type>/<str:target_id>",
        redaction.RestrictedOriginalGetApi.as_view(),
    ),
    path(
        "redaction/pseudonyms/<str:label>/reveal",
        redaction.PseudonymRevealApi.as_view(),
    ),
    path(
        "conversations/<str:conversation_id>/context-reads",
        ledger.ContextReadListApi.as_view(),
    ),
    path("legal-holds", holds.LegalHoldListCreateApi.as_view()),
    path("legal-holds/<str:hold_id>", holds.LegalHoldDetailApi.as_view()),
    path("legal-holds/<str:hold_id>/release", holds.LegalHoldReleaseApi.as_view()),
    path("erasure-requests", erasure.ErasureRequestListCreateApi.as_view()),
    path("erasure-requests/<str:request_id>", erasure.ErasureRequestDetailApi.as_view()),
    path("retention/policies", retention.RetentionPolicyListCreateApi.as_view()),
    path("retention/policies/<str:policy_id>", retention.RetentionPolicyDetailApi.as_view()),
    path("retention/dry-run", retention.RetentionDryRunApi.as_view()),
    path("retention/sweeps", retention.RetentionSweepListCreateApi.as_view()),
    path("retention/sweeps/<str:sweep_id>", retention.RetentionSweepDetailApi.as_view()),
]
