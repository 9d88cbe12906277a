from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from core import health
from dashboard.views.home import home
from memory import unsupported
from memory.mcp.server import McpApi

handler400 = "core.errors.json_bad_request"
handler404 = "core.errors.json_not_found"
handler500 = "core.errors.json_server_error"
handler403 = "dashboard.views.errors.permission_denied"

urlpatterns = [
    # Signed in: the conversation list; otherwise the landing page.
    path("", home, name="home"),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("v1/", include("memory.urls")),
    # The MCP server's streamable HTTP transport (memory/mcp/server.py).
    path("mcp", McpApi.as_view(), name="mcp"),
    path("v1/", include("governance.urls")),
    path("v1/audit/", include("governance.audit_urls")),
    # The NAMS clients' routes that Memdesk does not serve: 501 with what to use instead.
    path("v1/", include(unsupported.urlpatterns())),
    path("", include("dashboard.urls")),
]
