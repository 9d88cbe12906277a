"""Every door to memory and governance is audited, and the doors are found, not listed.

The routes come from the URL configuration (every view that accepts POST, PUT, PATCH
or DELETE), the admin pages from ``admin.site``'s registrations. A new route must be put
in ``AUDITED`` (with a request that makes a valid change and the audit action it must
write) or in ``NOT_CHANGES`` (with why it changes no memory or governance); a new admin
registration must be read-only or have an ``ADMIN_CASES`` entry whose changes, made
through the admin's own pages, each write an audit event."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import Model
from django.http import HttpResponse
from django.test import Client, RequestFactory
from django.urls import get_resolver, reverse
from rest_framework.test import APIClient

from core.actors import SYSTEM_ACTOR
from governance.models import AuditEvent
from memory import unsupported
from memory.mcp.tools import TOOLS
from tenancy.models import ApiKey, Membership, Workspace
from tenancy.services import api_key_create
from tests.dashboard.factories import MembershipFactory, UserFactory
from tests.governance.builders import whole_policy_body
from tests.memory.factories import WorkspaceFactory
from tests.routes import WRITE_METHODS, allowed_methods, url_patterns
from tests.world import World

REASON = "audit coverage"
PREVIEWED = "tomas.berg@example.com"  # a value for a preview to name a pseudonym of
CONVERSATION = "conversations/<str:conversation_id>"
OBSERVATION = f"{CONVERSATION}/observations/<str:observation_id>"
REFLECTION = f"{CONVERSATION}/reflections/<str:reflection_id>"
PAGE = "conversations/<uuid:conversation_id>/"


# --- the doors, from the URL configuration -------------------------------------------------


def mutating_routes() -> set[str]:
    """ "METHOD pattern" for every route and write method in the URL configuration."""
    return {
        f"{method} {route}"
        for route, view in url_patterns(get_resolver().url_patterns)
        for method in sorted(allowed_methods(view) & set(WRITE_METHODS))
    }


class _Form(HTMLParser):
    """The fields a browser would submit from the form matching ``wanted``."""

    def __init__(self, wanted: Callable[[dict[str, str]], bool]) -> None:
        super().__init__()
        self.wanted = wanted
        self.inside = False
        self.fields: dict[str, list[str]] = {}
        self.select: tuple[str, bool] | None = None
        self.options: list[tuple[str, bool]] = []
        self.textarea: str | None = None

    def handle_starttag(self, tag: str, attributes: list[tuple[str, str | None]]) -> None:
        attrs = {k: v or "" for k, v in attributes}
        if tag == "form":
            self.inside = self.wanted(attrs)
        if not self.inside or "name" not in attrs or "disabled" in attrs:
            if tag == "option" and self.select is not None:
                self.options.append((attrs.get("value", ""), "selected" in attrs))
            return
        name = attrs["name"]
        if tag == "input":
            kind = attrs.get("type", "text")
            if kind in ("submit", "button", "file", "image", "reset"):
                return
            if kind in ("checkbox", "radio"):
                if "checked" in attrs:
                    self.fields.setdefault(name, []).append(attrs.get("value", "on"))
                return
            self.fields.setdefault(name, []).append(attrs.get("value", ""))
        elif tag == "select":
            self.select, self.options = (name, "multiple" in attrs), []
        elif tag == "textarea":
            self.textarea = name
            self.fields[name] = [""]

    def handle_data(self, data: str) -> None:
        if self.textarea:
            self.fields[self.textarea][0] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "textarea":
            if self.textarea:
                self.fields[self.textarea][0] = self.fields[self.textarea][0].lstrip("\n")
            self.textarea = None
        elif tag == "select" and self.select is not None:
            name, multiple = self.select
            chosen = [value for value, selected in self.options if selected]
            if not chosen and not multiple and self.options:
                chosen = [self.options[0][0]]
            self.fields[name] = chosen
            self.select = None


def form_fields(html: str, wanted: Callable[[dict[str, str]], bool]) -> dict[str, list[str]]:
    parser = _Form(wanted)
    parser.feed(html)
    return parser.fields


def submit_page_form(client: Client, page: str, action: str, **changes: str) -> HttpResponse:
    """Submit the form of ``page`` that posts to ``action`` as it is, with ``changes``."""
    html = client.get(page).content.decode()
    data: dict[str, Any] = form_fields(html, lambda attrs: attrs.get("action") == action)
    assert data, f"no form posting to {action} on {page}"
    return client.post(action, {**data, **changes})


# --- the table of doors ------------------------------------------------------------------------


@dataclass(frozen=True)
class Door:
    action: str  # the audit action the request must write
    request: Callable[[World], HttpResponse]
    eager: bool = False  # the event is written by the worker the request queues


def _json(client: APIClient, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    return getattr(client, method)(path, body or {}, format="json")


def _mcp_tool(client: APIClient, tool: str, arguments: dict[str, Any]) -> HttpResponse:
    """Call an MCP tool with one JSON-RPC request to /mcp; a tool error fails the test."""
    response: HttpResponse = client.post(
        "/mcp",
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            }
        ),
        content_type="application/json",
        HTTP_ACCEPT="application/json, text/event-stream",
    )
    result = json.loads(response.content)["result"]
    assert not result["isError"], result["content"]
    return response


# The MCP tools that write, the audit action each must write (the same as its REST route)
# and whether the event comes from the worker its write queues. A tool that is not read
# only must be here or in MCP_NOT_CHANGES.
MCP_WRITES: dict[str, Door] = {
    "add_messages": Door(
        "message.scan",
        lambda w: _mcp_tool(
            w.api,
            "add_messages",
            {"conversationId": w.c, "messages": [{"role": "user", "content": "Hi"}]},
        ),
        eager=True,
    ),
    "pin_fact": Door(
        "pin.create",
        lambda w: _mcp_tool(
            w.api,
            "pin_fact",
            {"conversationId": w.c, "messageId": str(w.message.pk), "reason": REASON},
        ),
    ),
    "add_observation": Door(
        "observation.create",
        lambda w: _mcp_tool(
            w.api,
            "add_observation",
            {"conversationId": w.c, "text": "User prefers email.", "reason": REASON},
        ),
    ),
    "edit_observation": Door(
        "observation.edit",
        lambda w: _mcp_tool(
            w.api,
            "edit_observation",
            {
                "conversationId": w.c,
                "observationId": str(w.observation.pk),
                "content": "User prefers SMS.",
                "reason": REASON,
            },
        ),
    ),
    "edit_reflection": Door(
        "reflection.edit",
        lambda w: _mcp_tool(
            w.api,
            "edit_reflection",
            {
                "conversationId": w.c,
                "reflectionId": str(w.reflection.pk),
                "content": "User prefers SMS.",
                "reason": REASON,
            },
        ),
    ),
    "record_reasoning_step": Door(
        "reasoning_step.create",
        lambda w: _mcp_tool(
            w.api, "record_reasoning_step", {"conversationId": w.c, "reasoning": "Look it up."}
        ),
    ),
    "record_tool_call": Door(
        "tool_call.create",
        lambda w: _mcp_tool(
            w.api,
            "record_tool_call",
            {"conversationId": w.c, "toolName": "lookup_order", "output": {"status": "sent"}},
        ),
    ),
}
MCP_NOT_CHANGES = {"create_conversation": "as POST v1/conversations"}


AUDITED: dict[str, Door] = {
    # --- the agent API (/v1) ---
    f"DELETE v1/{CONVERSATION}": Door(
        "conversation.delete",
        lambda w: w.api.delete(f"/v1/conversations/{w.c}?reason={REASON}"),
    ),
    # Messages are recorded by the scan the write queues: one message.scan per write.
    f"POST v1/{CONVERSATION}/messages": Door(
        "message.scan",
        lambda w: _json(
            w.api, "post", f"/v1/conversations/{w.c}/messages", {"role": "user", "content": "Hi"}
        ),
        eager=True,
    ),
    f"POST v1/{CONVERSATION}/messages/bulk": Door(
        "message.scan",
        lambda w: _json(
            w.api,
            "post",
            f"/v1/conversations/{w.c}/messages/bulk",
            {"messages": [{"role": "user", "content": "Hi"}]},
        ),
        eager=True,
    ),
    f"POST v1/{CONVERSATION}/observations": Door(
        "observation.create",
        lambda w: _json(
            w.api,
            "post",
            f"/v1/conversations/{w.c}/observations",
            {"text": "User prefers email.", "priority": "medium", "reason": REASON},
        ),
    ),
    f"PATCH v1/{OBSERVATION}": Door(
        "observation.edit",
        lambda w: _json(
            w.api,
            "patch",
            f"/v1/conversations/{w.c}/observations/{w.observation.pk}",
            {"text": "User prefers SMS.", "reason": REASON},
        ),
    ),
    f"DELETE v1/{OBSERVATION}": Door(
        "observation.delete",
        lambda w: w.api.delete(
            f"/v1/conversations/{w.c}/observations/{w.observation.pk}?reason={REASON}"
        ),
    ),
    f"POST v1/{OBSERVATION}/revert": Door(
        "observation.revert",
        lambda w: _json(
            w.api,
            "post",
            f"/v1/conversations/{w.c}/observations/{w.edited(w.observation).pk}/revert",
            {"version": 1, "reason": REASON},
        ),
    ),
    f"PATCH v1/{REFLECTION}": Door(
        "reflection.edit",
        lambda w: _json(
            w.api,
            "patch",
            f"/v1/conversations/{w.c}/reflections/{w.reflection.pk}",
            {"text": "User prefers SMS.", "reason": REASON},
        ),
    ),
    f"DELETE v1/{REFLECTION}": Door(
        "reflection.delete",
        lambda w: w.api.delete(
            f"/v1/conversations/{w.c}/reflections/{w.reflection.pk}?reason={REASON}"
        ),
    ),
    f"POST v1/{REFLECTION}/revert": Door(
        "reflection.revert",
        lambda w: _json(
            w.api,
            "post",
            f"/v1/conversations/{w.c}/reflections/{w.edited(w.reflection).pk}/revert",
            {"version": 1, "reason": REASON},
        ),
    ),
    f"POST v1/{CONVERSATION}/pins": Door(
        "pin.create",
        lambda w: _json(
            w.api, "post", f"/v1/conversations/{w.c}/pins", {"messageId": str(w.message.pk)}
        ),
    ),
    f"POST v1/{CONVERSATION}/escalations": Door(
        "conversation.escalate",
        lambda w: _json(
            w.api, "post", f"/v1/conversations/{w.c}/escalations", {"reason": "Needs a person"}
        ),
    ),
    f"DELETE v1/{CONVERSATION}/pins/<str:pin_id>": Door(
        "pin.delete",
        lambda w: w.api.delete(f"/v1/conversations/{w.c}/pins/{w.pin.pk}?reason={REASON}"),
    ),
    "POST v1/reasoning/steps": Door(
        "reasoning_step.create",
        lambda w: _json(
            w.api,
            "post",
            "/v1/reasoning/steps",
            {"conversationId": w.c, "reasoning": "Check the order first"},
        ),
    ),
    "POST v1/reasoning/tool-calls": Door(
        "tool_call.create",
        lambda w: _json(
            w.api,
            "post",
            "/v1/reasoning/tool-calls",
            {"conversationId": w.c, "toolName": "order_status", "output": "delivered"},
        ),
    ),
    "PATCH v1/workspace/settings": Door(
        "workspace.settings.update",
        lambda w: _json(
            w.api, "patch", "/v1/workspace/settings", {"fidelity": "compact", "reason": REASON}
        ),
    ),
    "PATCH v1/redaction/policy": Door(
        "redaction_policy.update",
        lambda w: _json(w.api, "patch", "/v1/redaction/policy", {"scoreThreshold": 0.55}),
    ),
    "PUT v1/redaction/policy": Door(
        "redaction_policy.update",
        lambda w: _json(
            w.api, "put", "/v1/redaction/policy", whole_policy_body(scoreThreshold=0.55)
        ),
    ),
    "POST v1/redaction/findings/<str:finding_id>/approve": Door(
        "redaction_finding.approve",
        lambda w: _json(
            w.api,
            "post",
            f"/v1/redaction/findings/{w.pending_finding.pk}/approve",
            {"reason": REASON},
        ),
    ),
    "POST v1/redaction/findings/<str:finding_id>/dismiss": Door(
        "redaction_finding.dismiss",
        lambda w: _json(
            w.api,
            "post",
            f"/v1/redaction/findings/{w.pending_finding.pk}/dismiss",
            {"reason": REASON},
        ),
    ),
    # A read, audited: who learnt what a pseudonym stands for.
    "POST v1/redaction/pseudonyms/<str:label>/reveal": Door(
        "redaction.pseudonym.reveal",
        lambda w: (
            w.redacted_message,
            _json(
                w.api,
                "post",
                "/v1/redaction/pseudonyms/EMAIL_ADDRESS_1/reveal",
                {"reason": REASON},
            ),
        )[1],
    ),
    # And which pseudonym a value has: a compliance key's preview names it (an agent
    # key's is told types only, and writes nothing).
    "POST v1/redaction/preview": Door(
        "redaction.preview",
        lambda w: _json(w.api, "post", "/v1/redaction/preview", {"text": f"Mail {PREVIEWED}"}),
    ),
    "POST v1/legal-holds": Door(
        "legal_hold.place",
        lambda w: _json(w.api, "post", "/v1/legal-holds", {"userId": "dana", "reason": REASON}),
    ),
    "POST v1/legal-holds/<str:hold_id>/release": Door(
        "legal_hold.release",
        lambda w: _json(w.api, "post", f"/v1/legal-holds/{w.hold.pk}/release", {"reason": REASON}),
    ),
    "POST v1/erasure-requests": Door(
        "erasure.request",
        lambda w: _json(
            w.api, "post", "/v1/erasure-requests", {"userId": "dana", "reason": REASON}
        ),
    ),
    "POST v1/retention/policies": Door(
        "retention_policy.create",
        lambda w: _json(
            w.api,
            "post",
            "/v1/retention/policies",
            {"name": "short", "messageDays": 30, "reason": REASON},
        ),
    ),
    "PATCH v1/retention/policies/<str:policy_id>": Door(
        "retention_policy.update",
        lambda w: _json(
            w.api,
            "patch",
            f"/v1/retention/policies/{w.retention_policy.pk}",
            {"enabled": False, "reason": REASON},
        ),
    ),
    "DELETE v1/retention/policies/<str:policy_id>": Door(
        "retention_policy.delete",
        lambda w: w.api.delete(f"/v1/retention/policies/{w.retention_policy.pk}?reason={REASON}"),
    ),
    "POST v1/retention/sweeps": Door(
        "retention_sweep.request", lambda w: _json(w.api, "post", "/v1/retention/sweeps")
    ),
    # The MCP server's HTTP transport: every tool that writes calls the service its REST
    # route calls (MCP_WRITES tests each one); one of them stands for the route here.
    "POST mcp": MCP_WRITES["pin_fact"],
    # --- the dashboard ---
    f"POST {PAGE}messages/<uuid:message_id>/reveal/": Door(
        "message.reveal",
        lambda w: w.admin.post(
            f"/conversations/{w.scanned_message.conversation_id}/messages/"
            f"{w.scanned_message.pk}/reveal/",
            {"reason": REASON},
        ),
    ),
    f"POST {PAGE}observations/add/": Door(
        "observation.create",
        lambda w: w.admin.post(
            f"/conversations/{w.c}/observations/add/",
            {"text": "User prefers email.", "priority": "medium", "reason": REASON},
        ),
    ),
    f"POST {PAGE}observations/<uuid:item_id>/edit/": Door(
        "observation.edit",
        lambda w: w.admin.post(
            f"/conversations/{w.c}/observations/{w.observation.pk}/edit/",
            {"text": "User prefers SMS.", "priority": "high", "reason": REASON},
        ),
    ),
    f"POST {PAGE}observations/<uuid:item_id>/delete/": Door(
        "observation.delete",
        lambda w: w.admin.post(
            f"/conversations/{w.c}/observations/{w.observation.pk}/delete/", {"reason": REASON}
        ),
    ),
    f"POST {PAGE}observations/<uuid:item_id>/revert/": Door(
        "observation.revert",
        lambda w: w.admin.post(
            f"/conversations/{w.c}/observations/{w.edited(w.observation).pk}/revert/",
            {"version": 1, "reason": REASON},
        ),
    ),
    f"POST {PAGE}reflections/<uuid:item_id>/edit/": Door(
        "reflection.edit",
        lambda w: w.admin.post(
            f"/conversations/{w.c}/reflections/{w.reflection.pk}/edit/",
            {"text": "User prefers SMS.", "priority": "high", "reason": REASON},
        ),
    ),
    f"POST {PAGE}reflections/<uuid:item_id>/delete/": Door(
        "reflection.delete",
        lambda w: w.admin.post(
            f"/conversations/{w.c}/reflections/{w.reflection.pk}/delete/", {"reason": REASON}
        ),
    ),
    f"POST {PAGE}reflections/<uuid:item_id>/revert/": Door(
        "reflection.revert",
        lambda w: w.admin.post(
            f"/conversations/{w.c}/reflections/{w.edited(w.reflection).pk}/revert/",
            {"version": 1, "reason": REASON},
        ),
    ),
    f"POST {PAGE}messages/<uuid:message_id>/pin/": Door(
        "pin.create",
        lambda w: w.admin.post(
            f"/conversations/{w.c}/messages/{w.message.pk}/pin/", {"reason": REASON}
        ),
    ),
    "POST approvals/<str:kind>/<uuid:note_id>/approve/": Door(
        "reflection.approve",
        lambda w: submit_page_form(
            w.admin,
            "/approvals/",
            f"/approvals/reflection/{w.waiting_reflection.pk}/approve/",
            reason=REASON,
        ),
    ),
    "POST approvals/<str:kind>/<uuid:note_id>/reject/": Door(
        "observation.reject",
        lambda w: submit_page_form(
            w.admin,
            "/approvals/",
            f"/approvals/observation/{w.waiting_observation.pk}/reject/",
            reason=REASON,
        ),
    ),
    "POST escalations/<uuid:escalation_id>/resolve/": Door(
        "escalation.resolve",
        lambda w: submit_page_form(
            w.admin,
            "/escalations/",
            f"/escalations/{w.escalation.pk}/resolve/",
            note="Called the customer",
        ),
    ),
    f"POST {PAGE}pins/<uuid:pin_id>/unpin/": Door(
        "pin.delete",
        lambda w: w.admin.post(f"/conversations/{w.c}/pins/{w.pin.pk}/unpin/", {"reason": REASON}),
    ),
    "POST settings/api-keys/": Door(
        "api_key.create",
        lambda w: w.admin.post("/settings/api-keys/", {"name": "ci", "scope": "agent"}),
    ),
    "POST settings/api-keys/<int:api_key_id>/revoke/": Door(
        "api_key.revoke",
        lambda w: w.admin.post(f"/settings/api-keys/{w.dashboard_key.pk}/revoke/"),
    ),
    "POST settings/memory/": Door(
        "workspace.settings.update",
        lambda w: w.admin.post("/settings/memory/", {"fidelity": "compact", "reason": REASON}),
    ),
    "POST compliance/review/bulk/": Door(
        "redaction_finding.approve",
        lambda w: w.compliance.post(
            "/compliance/review/bulk/",
            {"decision": "approve", "finding": w.pending_finding.pk, "reason": REASON},
        ),
    ),
    "POST compliance/review/<int:finding_id>/<str:decision>/": Door(
        "redaction_finding.dismiss",
        lambda w: w.compliance.post(
            f"/compliance/review/{w.pending_finding.pk}/dismiss/", {"reason": REASON}
        ),
    ),
    "POST compliance/holds/place/": Door(
        "legal_hold.place",
        lambda w: w.compliance.post(
            "/compliance/holds/place/", {"end_user": "dana", "reason": "x"}
        ),
    ),
    "POST compliance/holds/<int:hold_id>/release/": Door(
        "legal_hold.release",
        lambda w: w.compliance.post(f"/compliance/holds/{w.hold.pk}/release/", {"reason": "x"}),
    ),
    # Reads, audited: restricted originals and pseudonyms.
    "POST compliance/originals/<str:target_type>/<uuid:target_id>/": Door(
        "restricted_original.read",
        lambda w: w.compliance.post(
            f"/compliance/originals/message/{w.redacted_message.pk}/", {"reason": "DSAR-4"}
        ),
    ),
    "POST compliance/pseudonyms/reveal/": Door(
        "redaction.pseudonym.reveal",
        lambda w: (
            w.redacted_message,
            w.compliance.post(
                "/compliance/pseudonyms/reveal/", {"label": "<EMAIL_ADDRESS_1>", "reason": REASON}
            ),
        )[1],
    ),
    "POST compliance/redaction/preview/": Door(
        "redaction.preview",
        lambda w: w.compliance.post("/compliance/redaction/preview/", {"text": PREVIEWED}),
    ),
    "POST compliance/retention/run/": Door(
        "retention_sweep.request", lambda w: w.compliance.post("/compliance/retention/run/")
    ),
    "POST compliance/erasure/request/": Door(
        "erasure.request",
        lambda w: w.compliance.post(
            "/compliance/erasure/request/", {"end_user": "dana", "reason": REASON}
        ),
    ),
    "POST compliance/redaction/save/": Door(
        "redaction_policy.update",
        lambda w: submit_page_form(
            w.compliance,
            "/compliance/redaction/",
            "/compliance/redaction/save/",
            score_threshold="0.61",
            reason=REASON,
        ),
    ),
    "POST compliance/retention/policies/new/": Door(
        "retention_policy.create",
        lambda w: w.compliance.post(
            "/compliance/retention/policies/new/",
            {
                "name": "support",
                "conversation_tag": "support",
                "message_days": "30",
                "enabled": "on",
                "reason": REASON,
            },
        ),
    ),
    "POST compliance/retention/policies/<int:policy_id>/": Door(
        "retention_policy.update",
        lambda w: submit_page_form(
            w.compliance,
            f"/compliance/retention/policies/{w.retention_policy.pk}/",
            f"/compliance/retention/policies/{w.retention_policy.pk}/",
            message_days="45",
            reason=REASON,
        ),
    ),
    "POST v1/runs/<str:run_id>/cancel": Door(
        "run.cancel",
        lambda w: _json(w.api, "post", f"/v1/runs/{w.queued_run.pk}/cancel", {"reason": REASON}),
    ),
    f"POST {PAGE}runs/<str:kind>/<uuid:run_id>/cancel/": Door(
        "run.cancel",
        lambda w: w.admin.post(
            f"/conversations/{w.c}/runs/observer/{w.queued_run.pk}/cancel/", {"reason": REASON}
        ),
    ),
    "POST settings/members/": Door(
        "membership.grant",
        lambda w: w.admin.post(
            "/settings/members/", {"username": "new-person", "role": "viewer", "reason": REASON}
        ),
    ),
    "POST settings/members/<int:membership_id>/role/": Door(
        "membership.change",
        lambda w: w.admin.post(
            f"/settings/members/{w.viewer_membership.pk}/role/",
            {
                f"m{w.viewer_membership.pk}-role": "reviewer",
                f"m{w.viewer_membership.pk}-reason": REASON,
            },
        ),
    ),
    "POST settings/members/<int:membership_id>/remove/": Door(
        "membership.revoke",
        lambda w: w.admin.post(
            f"/settings/members/{w.viewer_membership.pk}/remove/",
            {f"r{w.viewer_membership.pk}-reason": REASON},
        ),
    ),
    "POST compliance/redaction/rescan/start/": Door(
        "redaction.rescan_request",
        lambda w: w.compliance.post(
            "/compliance/redaction/rescan/start/", {"tiers": ["messages"], "reason": REASON}
        ),
    ),
}

NOT_CHANGES: dict[str, str] = {
    "POST accounts/login/": "signs in: a session, not memory or governance",
    "PUT accounts/login/": "signs in: a session, not memory or governance",
    "POST accounts/logout/": "signs out",
    "POST accounts/password_change/": "a person's own password; roles are memberships",
    "PUT accounts/password_change/": "a person's own password; roles are memberships",
    "POST accounts/password_reset/": "sends a reset link; changes nothing stored",
    "PUT accounts/password_reset/": "sends a reset link; changes nothing stored",
    "POST accounts/reset/<uidb64>/<token>/": "a person's own password, by e-mailed token",
    "PUT accounts/reset/<uidb64>/<token>/": "a person's own password, by e-mailed token",
    "POST workspace/": "which workspace the dashboard shows: a session preference",
    "POST v1/conversations": (
        "opens an empty conversation for the agent's own transcript; what it holds is "
        "recorded as it arrives (message.scan) and its deletion is audited"
    ),
    f"POST v1/{CONVERSATION}/search": "a search, sent as POST for its body",
    "POST v1/search": "a search across conversations, sent as POST for its body",
    f"POST v1/{CONVERSATION}/observe": (
        "asks now for the run the Observer makes on its own threshold; recorded as a "
        "run (trigger manual), as the pipeline's own runs are"
    ),
    f"POST v1/{CONVERSATION}/reflect": (
        "asks now for the run the Reflector makes on its own threshold; recorded as a run"
    ),
    f"POST {PAGE}observe/": "the dashboard's observe now: as POST v1/.../observe",
    f"POST {PAGE}reflect/": "the dashboard's reflect now: as POST v1/.../reflect",
    "POST v1/retention/dry-run": (
        "counts what a sweep would delete and deletes nothing (the preview is kept as a "
        "completed dry-run sweep, for the history)"
    ),
    "POST compliance/retention/dry-run/": "as POST v1/retention/dry-run",
    # The NAMS clients' routes Memdesk does not serve (entities, graph, Cypher,
    # ontologies, key management, provenance): whatever the method, they answer 501
    # not_supported and touch nothing (tests/memory/test_nams_routes.py).
    **{
        f"{method} v1/{route}": "answers 501 not_supported; changes nothing"
        for route in unsupported.UNSUPPORTED_ROUTES
        for method in WRITE_METHODS
    },
}


def test_every_write_route_is_classified():
    routes = mutating_routes()
    unclassified = routes - AUDITED.keys() - NOT_CHANGES.keys()
    assert not unclassified, (
        "routes that accept writes but are in neither AUDITED (a request and the audit "
        f"action it must write) nor NOT_CHANGES (why it changes nothing): {sorted(unclassified)}"
    )
    stale = (AUDITED.keys() | NOT_CHANGES.keys()) - routes
    assert not stale, f"classified routes that no longer exist: {sorted(stale)}"
    assert not AUDITED.keys() & NOT_CHANGES.keys()


def test_the_route_walk_reads_methods_from_the_views():
    routes = mutating_routes()
    # A DRF view's handlers; require_POST and require_http_methods on function views.
    assert f"PATCH v1/{OBSERVATION}" in routes and f"POST v1/{OBSERVATION}" not in routes
    assert "POST settings/memory/" in routes and "DELETE settings/memory/" not in routes
    assert not any(route.endswith(" compliance/audit/") for route in routes)  # GET only


@pytest.fixture
def world(workspace, eager_tasks) -> World:
    return World(workspace, eager_tasks)


def test_every_mcp_tool_that_writes_is_classified():
    writes = {tool.name for tool in TOOLS if not tool.read_only}
    assert writes == MCP_WRITES.keys() | MCP_NOT_CHANGES.keys()


@pytest.mark.parametrize(
    "door_name", [*(f"route {r}" for r in sorted(AUDITED)), *(f"mcp {t}" for t in MCP_WRITES)]
)
def test_each_write_route_writes_its_audit_event(world, door_name):
    kind, _, name = door_name.partition(" ")
    door = AUDITED[name] if kind == "route" else MCP_WRITES[name]
    seen = AuditEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0
    if door.eager:
        with world.eager_tasks():
            response = door.request(world)
    else:
        response = door.request(world)

    assert response.status_code < 400, response.content[:500]
    new = AuditEvent.objects.filter(id__gt=seen)
    written = list(new.values_list("action", flat=True))
    assert door.action in written, f"{door_name} answered {response.status_code}, wrote {written}"
    # Every event says who asked, in which role.
    assert not new.filter(actor_role="").exists()


# --- /admin/ -------------------------------------------------------------------------------------

User = get_user_model()


@dataclass(frozen=True)
class AdminCase:
    """``make`` a row to change and delete; ``add`` and ``change`` name the form fields a
    test sets; ``actions`` the audit action each operation writes (an operation the
    admin refuses needs none)."""

    make: Callable[[Workspace], Model]
    actions: dict[str, str]
    add: Callable[[Workspace], dict[str, str]] | None = None
    change: dict[str, str] | None = None
    # An add that reaches no workspace, and so no audit trail, says why.
    add_unaudited: str = ""


ADMIN_CASES: dict[type[Model], AdminCase] = {
    Workspace: AdminCase(
        make=lambda workspace: workspace,
        add=lambda workspace: {"name": "newco"},
        change={"observer_threshold": "1234"},
        actions={"add": "workspace.create", "change": "workspace.update"},
    ),
    ApiKey: AdminCase(
        make=lambda workspace: api_key_create(workspace=workspace, actor=SYSTEM_ACTOR)[0],
        change={"scope": "admin"},
        actions={"change": "api_key.update"},
    ),
    Membership: AdminCase(
        make=lambda workspace: MembershipFactory(workspace=workspace, role="viewer"),
        add=lambda workspace: {
            "user": str(UserFactory().pk),
            "workspace": str(workspace.pk),
            "role": "reviewer",
        },
        change={"role": "admin"},
        actions={
            "add": "membership.grant",
            "change": "membership.change",
            "delete": "membership.revoke",
        },
    ),
    User: AdminCase(
        make=lambda workspace: MembershipFactory(workspace=workspace, role="viewer").user,
        add=lambda workspace: {
            "username": "newcomer",
            "password1": "a long pass phrase 42",
            "password2": "a long pass phrase 42",
            "usable_password": "true",
        },
        add_unaudited=(
            "a new account has no role and reaches no memory; the membership that gives "
            "it one is audited (membership.grant)"
        ),
        change={"is_staff": "on"},
        actions={"change": "user.update", "delete": "user.delete"},
    ),
}


def _superuser_request() -> Any:
    request = RequestFactory().get("/admin/")
    request.user = User(is_superuser=True, is_staff=True, is_active=True)
    return request


def _permits(model_admin: admin.ModelAdmin, operation: str, obj: Model | None = None) -> bool:
    request = _superuser_request()
    return bool(
        getattr(model_admin, f"has_{operation}_permission")(request, *([obj] if obj else []))
    )


def test_every_admin_registration_is_read_only_or_audited():
    for model, model_admin in admin.site._registry.items():
        writable = [op for op in ("add", "change", "delete") if _permits(model_admin, op)]
        if writable:
            assert model in ADMIN_CASES, (
                f"{model.__name__} is registered in /admin/ and a superuser may {writable} it, "
                "but no ADMIN_CASES entry proves each of those writes an audit event"
            )
    assert set(ADMIN_CASES) <= set(admin.site._registry)


READ_ONLY = sorted(
    (m for m in admin.site._registry if m not in ADMIN_CASES), key=lambda m: m.__name__
)


@pytest.fixture
def superuser_client(db) -> Client:
    client = Client()
    client.force_login(UserFactory(is_superuser=True, is_staff=True))
    return client


def _admin_url(model: type[Model], view: str, *args: Any) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


@pytest.mark.parametrize("model", READ_ONLY, ids=lambda m: m.__name__)
def test_read_only_admin_pages_refuse_writes(superuser_client, model):
    response = superuser_client.post(_admin_url(model, "add"), {})
    assert response.status_code == 403
    assert superuser_client.get(_admin_url(model, "changelist")).status_code == 200


def _admin_form(client: Client, url: str) -> dict[str, Any]:
    html = client.get(url).content.decode()
    return form_fields(html, lambda attrs: attrs.get("id", "").endswith("_form"))


def _events_since(seen: int) -> list[str]:
    return list(AuditEvent.objects.filter(id__gt=seen).values_list("action", flat=True))


def _last_event_id() -> int:
    return AuditEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0


CASES = [(model, op) for model in ADMIN_CASES for op in ("add", "change", "delete")]


@pytest.mark.parametrize(
    ("model", "operation"), CASES, ids=[f"{m.__name__}-{op}" for m, op in CASES]
)
def test_admin_writes_need_a_reason_and_are_audited(superuser_client, workspace, model, operation):
    case = ADMIN_CASES[model]
    model_admin = admin.site._registry[model]
    obj = case.make(workspace)
    if not _permits(model_admin, operation, None if operation == "add" else obj):
        refused = (
            superuser_client.post(_admin_url(model, "add"), {})
            if operation == "add"
            else superuser_client.post(_admin_url(model, "delete", obj.pk), {"post": "yes"})
            if operation == "delete"
            else superuser_client.post(_admin_url(model, "change", obj.pk), {})
        )
        assert refused.status_code == 403
        assert operation not in case.actions
        return

    if operation == "delete":
        url = _admin_url(model, "delete", obj.pk)
        data: dict[str, Any] = {"post": "yes"}
    elif operation == "add":
        assert case.add is not None, f"{model.__name__}: the admin may add; say what to post"
        url = _admin_url(model, "add")
        data = {**_admin_form(superuser_client, url), **case.add(workspace)}
    else:
        assert case.change is not None
        url = _admin_url(model, "change", obj.pk)
        data = {**_admin_form(superuser_client, url), **case.change}

    seen = _last_event_id()
    refused = superuser_client.post(url, data)
    assert _events_since(seen) == []
    assert refused.status_code in (200, 302)  # the form again, or back to the confirmation
    assert model._default_manager.filter(pk=obj.pk).exists()

    response = superuser_client.post(url, {**data, "audit_reason": REASON})

    assert response.status_code == 302, (
        response.context["adminform"].form.errors if response.context else response
    )
    actions = _events_since(seen)
    if operation == "add" and case.add_unaudited:
        assert actions == [], case.add_unaudited
        return
    assert actions and set(actions) == {case.actions[operation]}, actions
    event = AuditEvent.objects.filter(id__gt=seen).first()
    assert event is not None
    assert (event.actor_type, event.actor_role, event.reason) == ("user", "superuser", REASON)
    if operation == "delete":
        assert not model._default_manager.filter(pk=obj.pk).exists()


def test_the_admin_has_no_bulk_delete(superuser_client, workspace):
    for model in ADMIN_CASES:
        assert "delete_selected" not in admin.site._registry[model].get_actions(
            _superuser_request()
        )


def test_a_superuser_grant_is_audited_in_every_workspace(superuser_client, workspace):
    other = WorkspaceFactory()
    person = UserFactory()
    url = _admin_url(User, "change", person.pk)
    data = {**_admin_form(superuser_client, url), "is_superuser": "on", "audit_reason": REASON}

    assert superuser_client.post(url, data).status_code == 302

    events = AuditEvent.objects.filter(action="user.update", target_id=str(person.pk))
    assert {e.workspace_id for e in events} == {workspace.pk, other.pk}
    assert all(e.after == {"is_superuser": True} for e in events)


def test_a_workspace_change_in_the_admin_never_records_the_llm_key(superuser_client, workspace):
    url = _admin_url(Workspace, "change", workspace.pk)
    data = {
        **_admin_form(superuser_client, url),
        "llm_api_key": "sk-very-secret",
        "audit_reason": REASON,
    }

    assert superuser_client.post(url, data).status_code == 302

    [event] = AuditEvent.objects.filter(action="workspace.update")
    assert "sk-very-secret" not in str(event.after)
    assert event.before == {"llm_api_key": ""} and event.after["llm_api_key"]
