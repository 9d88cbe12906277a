"""The base views of the /v1 API: the calling key (``tenancy.auth``), its workspace, the
acting identity, and the least scope each route needs."""

from __future__ import annotations

from typing import ClassVar, cast

from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.views import APIView

from core.actors import Actor, ActorType
from core.api import errors_needing
from core.request_ids import request_id_of
from tenancy.auth import RequiresScope
from tenancy.models import ApiKey, Workspace

CURATOR_ERRORS = errors_needing(ApiKey.Scope.CURATOR)
COMPLIANCE_ERRORS = errors_needing(ApiKey.Scope.COMPLIANCE)
ADMIN_ERRORS = errors_needing(ApiKey.Scope.ADMIN)


class ApiView(APIView):
    # Base of every /v1 view: the authenticated key, its workspace, the acting identity.
    # (A comment, not a docstring: drf-spectacular would show a docstring on every route.)

    # Service field names that the wire spells otherwise than in camelCase.
    wire_fields: ClassVar[dict[str, str]] = {}

    # The least key scope each HTTP method needs; a method not named needs
    # ``required_scope``.
    required_scope: ClassVar[str] = ApiKey.Scope.AGENT
    required_scopes: ClassVar[dict[str, str]] = {}

    def get_permissions(self) -> list[BasePermission]:
        method = (self.request.method or "GET").upper()
        scope = self.required_scopes.get(method, self.required_scope)
        return [IsAuthenticated(), RequiresScope(scope)]

    @property
    def api_key(self) -> ApiKey:
        # ApiKeyAuthentication is the only authenticator and IsAuthenticated guards every view.
        return cast(ApiKey, self.request.auth)

    @property
    def workspace(self) -> Workspace:
        return self.api_key.workspace

    def actor(self) -> Actor:
        request = self.request
        return Actor(
            type=ActorType.API_KEY,
            id=str(self.api_key.pk),
            role=self.api_key.scope,
            name=self.api_key.name or self.api_key.prefix,
            request_id=request_id_of(request),
            ip_address=request.META.get("REMOTE_ADDR"),
        )


class ComplianceApiView(ApiView):
    # Governance routes: audit, retention, erasure, holds, redaction review, originals.
    required_scope = ApiKey.Scope.COMPLIANCE
