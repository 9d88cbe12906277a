"""The compliance pages, included under /compliance/ in the dashboard namespace."""

from __future__ import annotations

from django.urls import path

from dashboard import compliance_views, retention_views, review_views

urlpatterns = [
    path("audit/", compliance_views.audit_log, name="compliance_audit"),
    path("audit/export.jsonl", compliance_views.audit_log_export, name="compliance_audit_export"),
    path("review/", review_views.review_queue, name="compliance_review"),
    path("review/bulk/", review_views.review_bulk, name="compliance_review_bulk"),
    path(
        "review/<int:finding_id>/<str:decision>/",
        review_views.review_decide,
        name="compliance_review_decide",
    ),
    path("holds/", retention_views.holds, name="compliance_holds"),
    path("holds/place/", retention_views.hold_place, name="compliance_hold_place"),
    path(
        "holds/<int:hold_id>/release/",
        retention_views.hold_release,
        name="compliance_hold_release",
    ),
    path(
        "originals/<str:target_type>/<uuid:target_id>/",
        compliance_views.original_reveal,
        name="compliance_original",
    ),
    path("pseudonyms/", compliance_views.pseudonyms, name="compliance_pseudonyms"),
    path(
        "pseudonyms/reveal/",
        compliance_views.pseudonym_reveal_view,
        name="compliance_pseudonym_reveal",
    ),
    path("retention/", retention_views.retention_page, name="compliance_retention"),
    path(
        "retention/policies/new/",
        retention_views.retention_policy_new,
        name="compliance_retention_policy_new",
    ),
    path(
        "retention/policies/<int:policy_id>/",
        retention_views.retention_policy_edit,
        name="compliance_retention_policy",
    ),
    path("retention/dry-run/", retention_views.retention_dry_run, name="compliance_dry_run"),
    path("retention/run/", retention_views.retention_run, name="compliance_retention_run"),
    path(
        "retention/sweeps/<int:sweep_id>/",
        retention_views.retention_sweep_status,
        name="compliance_sweep",
    ),
    path("erasure/", retention_views.erasure_page, name="compliance_erasure"),
    path("erasure/request/", retention_views.erasure_create, name="compliance_erasure_create"),
    path("erasure/requests/", retention_views.erasure_list, name="compliance_erasure_list"),
    path(
        "erasure/<int:request_id>/receipt.json",
        retention_views.erasure_receipt,
        name="compliance_erasure_receipt",
    ),
    path("end-users/check/", retention_views.end_user_check, name="compliance_end_user_check"),
    path(
        "erasure/<int:request_id>/",
        retention_views.erasure_detail,
        name="compliance_erasure_detail",
    ),
    path("redaction/", review_views.redaction_policy_page, name="compliance_redaction"),
    path(
        "redaction/save/",
        review_views.redaction_policy_save,
        name="compliance_redaction_save",
    ),
    path("redaction/rescan/", review_views.rescan_page, name="compliance_rescan"),
    path("redaction/rescan/start/", review_views.rescan_start, name="compliance_rescan_start"),
    path(
        "redaction/rescan/<int:run_id>/",
        review_views.rescan_run,
        name="compliance_rescan_run",
    ),
    path(
        "redaction/preview/",
        review_views.redaction_policy_preview,
        name="compliance_redaction_preview",
    ),
]
