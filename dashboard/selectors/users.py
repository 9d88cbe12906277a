"""Who may open which workspace, and the names people go by on history pages."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User

from core.paging import is_ascii_digits
from tenancy.models import ApiKey, Membership, Role, Workspace


def workspaces_for_user(user: User) -> list[tuple[Workspace, str]]:
    """The workspaces a user may open, with their role in each, by name."""
    if getattr(user, "is_superuser", False):
        return [(workspace, Role.ADMIN) for workspace in Workspace.objects.order_by("name")]
    memberships = Membership.objects.filter(user=user).select_related("workspace")
    return sorted(((m.workspace, m.role) for m in memberships), key=lambda pair: pair[0].name)


def user_labels(labels: set[str]) -> dict[str, str]:
    """Audit labels ("user:12") to usernames, for history pages; others stay as they are."""
    ids = {label.split(":", 1)[1] for label in labels if label.startswith("user:")}
    numeric = [int(i) for i in ids if is_ascii_digits(i)]
    names = dict(get_user_model().objects.filter(pk__in=numeric).values_list("pk", "username"))
    return {
        label: names.get(int(label[5:]), label)
        if label.startswith("user:") and is_ascii_digits(label[5:])
        else label
        for label in labels
    }


def actor_labels(labels: set[str]) -> dict[str, str]:
    """Audit labels to the names people know: a user's username, an API key's name
    ("API key support-bot"); others stay as they are."""
    names = user_labels(labels)
    key_ids = [label[8:] for label in labels if label.startswith("api_key:")]
    keys = ApiKey.objects.filter(pk__in=[int(i) for i in key_ids if is_ascii_digits(i)])
    for pk, name, prefix in keys.values_list("pk", "name", "prefix"):
        names[f"api_key:{pk}"] = f"API key {name or prefix}"
    return names
