"""Bearer API-key authentication for the agent API."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from memory.models import ApiKey

# Recording every use would turn each read into a write; a minute's precision is enough
# to tell a key that is in use from one that is not.
LAST_USED_PRECISION = timedelta(minutes=1)


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[ApiKey, ApiKey] | None:
        header = authentication.get_authorization_header(request).decode(errors="replace")
        if not header:
            raise exceptions.NotAuthenticated("Send the API key as 'Authorization: Bearer <key>'.")
        scheme, _, raw_key = header.partition(" ")
        if scheme.lower() != "bearer" or not raw_key.strip():
            raise exceptions.AuthenticationFailed(
                "The Authorization header must be 'Bearer <key>'."
            )
        try:
            api_key = ApiKey.objects.select_related("workspace").get(
                key_hash=ApiKey.hash_raw_key(raw_key.strip())
            )
        except ApiKey.DoesNotExist:
            raise exceptions.AuthenticationFailed("Unknown API key.") from None
        if not api_key.is_active:
            raise exceptions.AuthenticationFailed("This API key was revoked.")

        requested = request.headers.get("X-Workspace-Id", "").strip()
        workspace = api_key.workspace
        if requested and requested not in (str(workspace.id), workspace.name):
            raise exceptions.PermissionDenied(
                "X-Workspace-Id names a workspace this API key does not belong to."
            )

        now = timezone.now()
        if api_key.last_used_at is None or now - api_key.last_used_at > LAST_USED_PRECISION:
            ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        return api_key, api_key

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="memdesk"'


# drf-spectacular leaves OpenApiExtension.__init_subclass__ unannotated.
class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """Documents the Bearer key in the OpenAPI schema (and gives Swagger UI its
    Authorize button)."""

    target_class = "core.auth.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key from `manage.py create_api_key` or the dashboard.",
        }


class RequiresScope(permissions.BasePermission):
    """The calling key's scope must include ``scope`` (agent < curator < compliance <
    admin); the 403 names the scope needed and how to get a key that has it."""

    def __init__(self, scope: str) -> None:
        self.scope = scope
        self.message = (
            f"This route needs a {scope} API key or a higher scope "
            f"(create one with create_api_key --scope {scope})."
        )

    def has_permission(self, request: Request, view: Any) -> bool:
        api_key = request.auth
        return isinstance(api_key, ApiKey) and api_key.grants(self.scope)
