"""Bearer API-key authentication for the agent API."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from tenancy.models import ApiKey

# Recording every use would turn each read into a write; a minute's precision is enough
# to tell a key that is in use from one that is not.
LAST_USED_PRECISION = timedelta(minutes=1)


# Authentication was a third of a cached context read's time: a key is kept in the shared
# cache, and each process keeps it a little longer itself (the shared cache's round trip
# was a sixth of a cached read). Together they never keep it longer than
# API_KEY_CACHE_SECONDS: a revocation that bypasses the service takes effect within that.
# Revoking through ``api_key_revoke`` (``forget_api_key``) takes effect at once in the
# process that revokes and within API_KEY_LOCAL_SECONDS in the others.
API_KEY_CACHE_SECONDS = 10
API_KEY_LOCAL_SECONDS = 2
_LOCAL_KEYS: dict[str, tuple[float, tuple[Any, ...]]] = {}  # key hash: (until, the row)
_LOCAL_KEYS_KEPT = 1024


def _key_fields() -> list[str]:
    return [field.attname for field in ApiKey._meta.concrete_fields]


def _keep_locally(key_hash: str, values: tuple[Any, ...]) -> None:
    if len(_LOCAL_KEYS) >= _LOCAL_KEYS_KEPT:
        _LOCAL_KEYS.clear()
    _LOCAL_KEYS[key_hash] = (time.monotonic() + API_KEY_LOCAL_SECONDS, values)


def _cache_api_key(api_key: ApiKey) -> None:
    # The row's values, not the instance: the workspace an instance may hold is not cached
    # (its settings change, and the view loads it with what it reads).
    values = tuple(getattr(api_key, name) for name in _key_fields())
    shared_seconds = API_KEY_CACHE_SECONDS - API_KEY_LOCAL_SECONDS
    cache.set(ApiKey.cache_key_of(api_key.key_hash), values, shared_seconds)
    _keep_locally(api_key.key_hash, values)


def forget_api_key(key_hash: str) -> None:
    """Drop the key from this process and from the shared cache (a revocation)."""
    _LOCAL_KEYS.pop(key_hash, None)
    cache.delete_many([ApiKey.cache_key_of(key_hash)])


def _api_key_for(key_hash: str) -> ApiKey | None:
    """The key with this hash, from this process or the cache when it is there."""
    kept = _LOCAL_KEYS.get(key_hash)
    if kept is not None and kept[0] > time.monotonic():
        return ApiKey.from_db(DEFAULT_DB_ALIAS, _key_fields(), kept[1])
    values = cache.get(ApiKey.cache_key_of(key_hash))
    if values is not None:
        _keep_locally(key_hash, values)
        return ApiKey.from_db(DEFAULT_DB_ALIAS, _key_fields(), values)
    api_key = ApiKey.objects.filter(key_hash=key_hash).first()
    if api_key is not None:
        _cache_api_key(api_key)
    return api_key


def api_key_authenticate(raw_key: str) -> ApiKey:
    """The active key ``raw_key`` is, its use recorded; AuthenticationFailed (401) naming
    what is wrong otherwise. The REST API and the MCP server both authenticate here."""
    api_key = _api_key_for(ApiKey.hash_raw_key(raw_key))
    if api_key is None:
        raise exceptions.AuthenticationFailed("Unknown API key.")
    if not api_key.is_active:
        raise exceptions.AuthenticationFailed("This API key was revoked.")
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at > LAST_USED_PRECISION:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
        _cache_api_key(api_key)
    return api_key


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
        api_key = api_key_authenticate(raw_key.strip())

        requested = request.headers.get("X-Workspace-Id", "").strip()
        # The id needs no query; only a workspace named by its name loads the workspace.
        if (
            requested
            and requested != str(api_key.workspace_id)
            and requested != api_key.workspace.name
        ):
            raise exceptions.PermissionDenied(
                "X-Workspace-Id names a workspace this API key does not belong to."
            )

        return api_key, api_key

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="memdesk"'


# drf-spectacular leaves OpenApiExtension.__init_subclass__ unannotated.
class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """Documents the Bearer key in the OpenAPI schema (and gives Swagger UI its
    Authorize button)."""

    target_class = "tenancy.auth.ApiKeyAuthentication"
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
