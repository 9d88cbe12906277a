"""The compliance pages, included under /compliance/ in the dashboard namespace."""

from __future__ import annotations

from django.urls import path

from dashboard import compliance_views

urlpatterns = [
    path("audit/", compliance_views.audit_log, name="compliance_audit"),
    path("audit/export.jsonl", compliance_views.audit_log_export, name="compliance_audit_export"),
    path("review/", compliance_views.review_queue, name="compliance_review"),
    path("review/bulk/", compliance_views.review_bulk, name="compliance_review_bulk"),
    path(
        "review/<int:finding_id>/<str:decision>/",
        compliance_views.review_decide,
        name="compliance_review_decide",
    ),
    path("holds/", compliance_views.holds, name="compliance_holds"),
    path("holds/place/", compliance_views.hold_place, name="compliance_hold_place"),
    path(
        "holds/<int:hold_id>/release/",
        compliance_views.hold_release,
        name="compliance_hold_release",
    ),
    path(
        "originals/<str:target_type>/<uuid:target_id>/",
        compliance_views.original_reveal,
        name="compliance_original",
    ),
    path("retention/", compliance_views.retention_page, name="compliance_retention"),
    path("retention/dry-run/", compliance_views.retention_dry_run, name="compliance_dry_run"),
    path("retention/run/", compliance_views.retention_run, name="compliance_retention_run"),
    path(
        "retention/sweeps/<int:sweep_id>/",
        compliance_views.retention_sweep_status,
        name="compliance_sweep",
    ),
    path("erasure/", compliance_views.erasure_page, name="compliance_erasure"),
    path("erasure/request/", compliance_views.erasure_create, name="compliance_erasure_create"),
    path(
        "erasure/<int:request_id>/",
        compliance_views.erasure_detail,
        name="compliance_erasure_detail",
    ),
    path("redaction/", compliance_views.redaction_policy_page, name="compliance_redaction"),
    path(
        "redaction/save/",
        compliance_views.redaction_policy_save,
        name="compliance_redaction_save",
    ),
    path(
        "redaction/preview/",
        compliance_views.redaction_policy_preview,
        name="compliance_redaction_preview",
    ),
]
