from __future__ import annotations

from django.urls import path

from governance.api import audit as audit_api

urlpatterns = [
    path("events", audit_api.AuditEventListApi.as_view()),
    path("events/export", audit_api.AuditEventExportApi.as_view()),
    path("verify", audit_api.AuditVerifyApi.as_view()),
]
