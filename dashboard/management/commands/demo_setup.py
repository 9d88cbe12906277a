"""Set up the embedded demo for ``make run``: safe to run again and again."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from core.actors import command_actor
from memory.demo import load_demo_data
from memory.models import ObserverRun, PipelineRun, ReflectorRun
from memory.pipeline.observer import observer_run_execute
from memory.pipeline.reflector import reflector_run_execute
from memory.pipeline.scheduling import observer_schedule, reflector_schedule
from tenancy.models import ApiKey, Membership, Role, Workspace
from tenancy.services import api_key_create, membership_grant, workspace_get_or_create

DEMO_WORKSPACE = "demo"
DEMO_KEY_NAME = "demo (make run)"


def _run_demo_pipeline(workspace: Workspace) -> int:
    """Observe and reflect one third of the demo conversations, observe another third,
    leave the rest raw, so the dashboard shows every tier. Runs inline with the offline
    extractive engine; conversations that already have a run are left alone, so running
    the command again changes nothing."""
    conversations = workspace.conversations.order_by("created_at", "id")
    touched = 0
    for index, conversation in enumerate(conversations):
        plan = index % 3  # 0: observe and reflect, 1: observe, 2: leave raw
        if plan == 2 or ObserverRun.objects.filter(conversation=conversation).exists():
            continue
        run = observer_schedule(
            conversation=conversation, trigger=PipelineRun.Trigger.MANUAL
        )
        observer_run_execute(run_id=run.pk)
        if plan == 0 and not ReflectorRun.objects.filter(conversation=conversation).exists():
            reflect = reflector_schedule(
                conversation=conversation, trigger=PipelineRun.Trigger.MANUAL
            )
            reflector_run_execute(run_id=reflect.pk)
        touched += 1
    return touched


def _kept_secret(filename: str, make: Callable[[], str]) -> str:
    """A demo secret kept under var/ (never in git) so that re-runs print the same one."""
    path = settings.VAR_DIR / filename
    if path.exists():
        return path.read_text().strip()
    value = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value)
    path.chmod(0o600)
    return value


class Command(BaseCommand):
    help = "Create the demo workspace, an admin login, an API key and demo conversations."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", default=os.environ.get("PORT", "8000"))

    def handle(self, *args: object, **options: object) -> None:
        actor = command_actor("demo_setup")
        workspace = workspace_get_or_create(name=DEMO_WORKSPACE, actor=actor)

        password = _kept_secret("admin_password", lambda: secrets.token_urlsafe(12))
        user_model = get_user_model()
        admin = user_model.objects.filter(username="admin").first()
        if admin is None:
            admin = user_model.objects.create_superuser("admin", "admin@localhost", password)
        # A superuser sees every workspace anyway; the membership makes the demo's role
        # explicit and keeps working if someone drops the superuser flag.
        if not Membership.objects.filter(user=admin, workspace=workspace).exists():
            membership_grant(
                user=admin,
                workspace=workspace,
                role=Role.ADMIN,
                actor=actor,
                reason="demo setup: the demo's admin login",
            )

        key_file = settings.VAR_DIR / "demo_api_key"
        raw_key = key_file.read_text().strip() if key_file.exists() else ""
        if (
            not raw_key
            or not ApiKey.objects.filter(
                key_hash=ApiKey.hash_raw_key(raw_key), revoked_at__isnull=True
            ).exists()
        ):
            _, raw_key = api_key_create(workspace=workspace, actor=actor, name=DEMO_KEY_NAME)
            key_file.write_text(raw_key)
            key_file.chmod(0o600)

        loaded = 0
        if not workspace.conversations.exists():
            loaded = load_demo_data(workspace=workspace)
        observed = _run_demo_pipeline(workspace)

        url = f"http://127.0.0.1:{options['port']}/"
        self.stdout.write(
            "\n".join(
                [
                    "",
                    "Memdesk is starting.",
                    f"  URL:      {url}",
                    f"  Login:    admin / {password}   ({url}accounts/login/)",
                    f"  API key:  {raw_key}   (workspace '{DEMO_WORKSPACE}')",
                    f"  API docs: {url}v1/docs/",
                    f"  Demo data: {loaded} new messages" if loaded else "  Demo data: present",
                    *([f"  Pipeline:  ran on {observed} demo conversations"] if observed else []),
                    "",
                ]
            )
        )
