"""One workspace with something of everything, for the tests that exercise every route."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any

from django.test import Client
from rest_framework.test import APIClient

from core.actors import SYSTEM_ACTOR
from governance.holds import legal_hold_place
from governance.models import RedactionFinding
from governance.retention.policies import retention_policy_create
from memory.models import Escalation, Message, Observation, PipelineRun, Reflection
from memory.pipeline.reflector import observations_for_reflection
from memory.pipeline.scheduling import observer_schedule
from memory.services.conversations import conversation_create
from memory.services.escalations import escalation_create
from memory.services.messages import MessageInput, messages_append
from memory.services.pins import pin_create
from tenancy.models import ApiKey, Membership, Workspace
from tenancy.services import api_key_create
from tests.dashboard.factories import MembershipFactory, chat, observe, reflect
from tests.governance.builders import set_policy
from tests.memory.factories import ObservationFactory, ReflectionFactory

EMAIL = "dana.pierce@example.com"
PHONE = "(977) 625-2661"


class World:
    """One workspace with an observed and reflected conversation, an admin API key and
    dashboard users; what only some doors need is made when first asked for."""

    def __init__(self, workspace: Workspace, eager_tasks: Callable[[], Any]) -> None:
        self.workspace = workspace
        self.eager_tasks = eager_tasks
        self.conversation = conversation_create(workspace=workspace, user_id="dana", title="Aero")
        chat(self.conversation)
        observe(self.conversation)
        reflect(self.conversation)
        _, raw_key = api_key_create(workspace=workspace, actor=SYSTEM_ACTOR, scope="admin")
        self.api = APIClient()
        self.api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
        self.admin = self._signed_in("admin")
        self.compliance = self._signed_in("compliance")

    def _signed_in(self, role: str) -> Client:
        client = Client()
        client.force_login(MembershipFactory(workspace=self.workspace, role=role).user)
        return client

    @property
    def c(self) -> str:
        return str(self.conversation.pk)

    @cached_property
    def viewer_membership(self) -> Membership:
        return MembershipFactory(workspace=self.workspace, role="viewer")

    @cached_property
    def queued_run(self) -> Any:
        return observer_schedule(conversation=self.conversation, trigger=PipelineRun.Trigger.MANUAL)

    @cached_property
    def waiting_reflection(self) -> Reflection:
        """A reflection staged approval holds back (memory/approval/)."""
        return ReflectionFactory(
            conversation=self.conversation,
            status="waiting",
            text="Waits for a person.",
            source_observation_ids=[str(self.observation.pk)],
            waits_for=["Every new reflection waits for approval here."],
        )

    @cached_property
    def waiting_observation(self) -> Observation:
        return ObservationFactory(
            conversation=self.conversation, status="waiting", text="Waits for a person too."
        )

    @cached_property
    def observation(self) -> Observation:
        return self.conversation.observations.order_by("observed_at", "id").first()  # type: ignore[return-value]

    @cached_property
    def reflection(self) -> Reflection:
        return self.conversation.reflections.filter(status="active").first()  # type: ignore[return-value]

    @cached_property
    def message(self) -> Message:
        return self.conversation.messages.order_by("seq").first()  # type: ignore[return-value]

    def edited(self, item: Observation | Reflection) -> Observation | Reflection:
        """``item`` with a version 1 to revert to."""
        kind = "observations" if isinstance(item, Observation) else "reflections"
        edited = self.api.patch(
            f"/v1/conversations/{self.c}/{kind}/{item.pk}",
            {"text": "User prefers SMS.", "reason": "r"},
            format="json",
        )
        assert edited.status_code == 200, edited.content
        return item

    @cached_property
    def pin(self) -> Any:
        return pin_create(
            conversation=self.conversation,
            message_id=self.message.pk,
            actor=SYSTEM_ACTOR,
            reason="quote",
        )

    @cached_property
    def escalation(self) -> Escalation:
        return escalation_create(
            conversation=self.conversation, actor=SYSTEM_ACTOR, reason="Needs a person"
        )

    @cached_property
    def pending_finding(self) -> RedactionFinding:
        quiet = conversation_create(workspace=self.workspace, user_id="eve", title="Call")
        ObservationFactory(conversation=quiet, text=f"User said {PHONE} on the call.")
        observations_for_reflection(conversation=quiet)
        return RedactionFinding.objects.filter(status="pending_review").first()  # type: ignore[return-value]

    @cached_property
    def hold(self) -> Any:
        return legal_hold_place(
            workspace=self.workspace, actor=SYSTEM_ACTOR, reason="case", end_user_id="eve"
        )

    @cached_property
    def retention_policy(self) -> Any:
        return retention_policy_create(
            workspace=self.workspace,
            actor=SYSTEM_ACTOR,
            name="default",
            message_days=30,
            reason="DPA",
        )

    @cached_property
    def scanned_message(self) -> Message:
        conversation = conversation_create(workspace=self.workspace, user_id="ann")
        with self.eager_tasks():
            [message] = messages_append(
                conversation=conversation,
                items=[MessageInput(role="user", content=f"My email is {EMAIL}")],
            )
        return message

    @cached_property
    def redacted_message(self) -> Message:
        """A message pseudonymised at ingest, its original kept (restricted)."""
        set_policy(self.workspace, redact_at_ingest=True, keep_originals=True)
        conversation = conversation_create(workspace=self.workspace, user_id="bo")
        [message] = messages_append(
            conversation=conversation,
            items=[MessageInput(role="user", content=f"Mail {EMAIL}")],
        )
        return message

    @cached_property
    def dashboard_key(self) -> ApiKey:
        api_key, _ = api_key_create(workspace=self.workspace, actor=SYSTEM_ACTOR, name="old")
        return api_key
