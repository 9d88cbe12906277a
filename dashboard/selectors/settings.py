"""The workspace's API keys, for the settings pages."""

from __future__ import annotations

from django.db.models import F, QuerySet

from core.errors import MemdeskError
from tenancy.models import ApiKey, Workspace


def api_keys_of(*, workspace: Workspace) -> QuerySet[ApiKey]:
    """Active keys first, newest first; revoked ones stay listed for the record."""
    return ApiKey.objects.filter(workspace=workspace).order_by(
        F("revoked_at").desc(nulls_first=True), "-created_at"
    )


def api_key_get(*, workspace: Workspace, api_key_id: int) -> ApiKey:
    try:
        return ApiKey.objects.select_related("workspace").get(workspace=workspace, pk=api_key_id)
    except ApiKey.DoesNotExist:
        raise MemdeskError(
            "not_found", "No such API key in this workspace.", status_code=404
        ) from None
