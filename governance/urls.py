"""Governance routes under /v1/ (included by config/urls.py). Each section belongs to
one feature; append new routes in their own section."""

from __future__ import annotations

from django.urls import path

from governance import api

urlpatterns = [
    # --- redaction ---
    path("redaction/policy", api.RedactionPolicyApi.as_view()),
    path("redaction/preview", api.RedactionPreviewApi.as_view()),
    path("redaction/findings", api.RedactionFindingListApi.as_view()),
    path("redaction/findings/<str:finding_id>/approve", api.RedactionFindingApproveApi.as_view()),
    path("redaction/findings/<str:finding_id>/dismiss", api.RedactionFindingDismissApi.as_view()),
    path(
        "redaction/originals/<str:target_type>/<str:target_id>",
        api.RestrictedOriginalGetApi.as_view(),
    ),
    # --- retention, legal holds, erasure ---
    path("legal-holds", api.LegalHoldListCreateApi.as_view()),
    path("legal-holds/<str:hold_id>", api.LegalHoldDetailApi.as_view()),
    path("legal-holds/<str:hold_id>/release", api.LegalHoldReleaseApi.as_view()),
    path("erasure-requests", api.ErasureRequestListCreateApi.as_view()),
    path("erasure-requests/<str:request_id>", api.ErasureRequestDetailApi.as_view()),
    path("retention/policies", api.RetentionPolicyListCreateApi.as_view()),
    path("retention/policies/<str:policy_id>", api.RetentionPolicyDetailApi.as_view()),
    path("retention/dry-run", api.RetentionDryRunApi.as_view()),
    path("retention/sweeps", api.RetentionSweepListCreateApi.as_view()),
    path("retention/sweeps/<str:sweep_id>", api.RetentionSweepDetailApi.as_view()),
]
