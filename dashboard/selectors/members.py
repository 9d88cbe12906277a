"""The members of a workspace, for the members page."""

from __future__ import annotations

from core.errors import MemdeskError
from tenancy.models import Membership, Workspace


def membership_list(*, workspace: Workspace) -> list[Membership]:
    return list(
        Membership.objects.filter(workspace=workspace)
        .select_related("user")
        .order_by("user__username")
    )


def membership_get(*, workspace: Workspace, membership_id: int) -> Membership:
    try:
        return Membership.objects.select_related("user").get(pk=membership_id, workspace=workspace)
    except Membership.DoesNotExist:
        raise MemdeskError(
            "not_found", "No such member in this workspace.", status_code=404
        ) from None
