from __future__ import annotations

from django.urls import path

from governance.api import audit

urlpatterns = [
    path("events", audit.AuditEventListApi.as_view()),
    path("events/export", audit.AuditEventExportApi.as_view()),
    path("verify", audit.AuditVerifyApi.as_view()),
]
