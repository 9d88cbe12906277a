"""The compliance pages, included under /compliance/ in the dashboard namespace."""

from __future__ import annotations

from django.urls import path

from dashboard.compliance.views import (
    audit,
    erasure,
    holds,
    pseudonyms,
    redaction,
    retention,
    review,
)

urlpatterns = [
    path("audit/", audit.audit_log, name="compliance_audit"),
    path("audit/export.jsonl", audit.audit_log_export, name="compliance_audit_export"),
    path("review/", review.review_queue, name="compliance_review"),
    path("review/bulk/", review.review_bulk, name="compliance_review_bulk"),
    path(
        "review/<int:finding_id>/<str:decision>/",
        review.review_decide,
        name="compliance_review_decide",
    ),
    path("holds/", holds.holds, name="compliance_holds"),
    path("holds/place/", holds.hold_place, name="compliance_hold_place"),
    path(
        "holds/<int:hold_id>/release/",
        holds.hold_release,
        name="compliance_hold_release",
    ),
    path(
        "originals/<str:target_type>/<uuid:target_id>/",
        audit.original_reveal,
        name="compliance_original",
    ),
    path("pseudonyms/", pseudonyms.pseudonyms, name="compliance_pseudonyms"),
    path(
        "pseudonyms/reveal/",
        pseudonyms.pseudonym_reveal_view,
        name="compliance_pseudonym_reveal",
    ),
    path("retention/", retention.retention_page, name="compliance_retention"),
    path(
        "retention/policies/new/",
        retention.retention_policy_new,
        name="compliance_retention_policy_new",
    ),
    path(
        "retention/policies/<int:policy_id>/",
        retention.retention_policy_edit,
        name="compliance_retention_policy",
    ),
    path("retention/dry-run/", retention.retention_dry_run, name="compliance_dry_run"),
    path("retention/run/", retention.retention_run, name="compliance_retention_run"),
    path(
        "retention/sweeps/<int:sweep_id>/",
        retention.retention_sweep_status,
        name="compliance_sweep",
    ),
    path("erasure/", erasure.erasure_page, name="compliance_erasure"),
    path("erasure/request/", erasure.erasure_create, name="compliance_erasure_create"),
    path("erasure/requests/", erasure.erasure_list, name="compliance_erasure_list"),
    path(
        "erasure/<int:request_id>/receipt.json",
        erasure.erasure_receipt,
        name="compliance_erasure_receipt",
    ),
    path("end-users/check/", erasure.end_user_check, name="compliance_end_user_check"),
    path(
        "erasure/<int:request_id>/",
        erasure.erasure_detail,
        name="compliance_erasure_detail",
    ),
    path("redaction/", redaction.redaction_policy_page, name="compliance_redaction"),
    path(
        "redaction/save/",
        redaction.redaction_policy_save,
        name="compliance_redaction_save",
    ),
    path("redaction/rescan/", redaction.rescan_page, name="compliance_rescan"),
    path("redaction/rescan/start/", redaction.rescan_start, name="compliance_rescan_start"),
    path(
        "redaction/rescan/<int:run_id>/",
        redaction.rescan_run,
        name="compliance_rescan_run",
    ),
    path(
        "redaction/preview/",
        redaction.redaction_policy_preview,
        name="compliance_redaction_preview",
    ),
]
