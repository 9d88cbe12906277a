"""Give a person a role in a workspace from a shell, creating their account if needed."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from core.actors import command_actor
from core.errors import MemdeskError
from tenancy.models import Role
from tenancy.services import member_add, workspace_get_or_create

DEFAULT_REASON = "granted with manage.py add_member"


class Command(BaseCommand):
    help = (
        "Give USERNAME a role in a workspace (created if needed, like create_api_key). "
        "A new account gets --password, or a generated one that is printed once. The "
        "grant is audited in the workspace."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", required=True, help="Workspace name (a slug).")
        parser.add_argument("--username", required=True, help="The person's login name.")
        parser.add_argument(
            "--role",
            required=True,
            choices=Role.values,
            help="viewer (reads), reviewer (also corrects memory and works the review "
            "queue), compliance (also policies, holds, erasure), admin (everything).",
        )
        parser.add_argument(
            "--password",
            default=None,
            help="The account's password: set for a new account, reset for an existing one.",
        )
        parser.add_argument("--reason", default=DEFAULT_REASON, help="Recorded in the audit trail.")

    def handle(self, *args: object, **options: object) -> None:
        actor = command_actor("add_member")
        password = options["password"]
        try:
            with transaction.atomic():
                workspace = workspace_get_or_create(name=str(options["workspace"]), actor=actor)
                membership, created, generated = member_add(
                    workspace=workspace,
                    username=str(options["username"]),
                    role=str(options["role"]),
                    actor=actor,
                    reason=str(options["reason"]),
                    password=None if password is None else str(password),
                )
        except MemdeskError as exc:
            raise CommandError(exc.message) from None
        account = "created" if created else "existing"
        self.stdout.write(
            f"{membership.user.get_username()} ({account} account) is "
            f"{membership.get_role_display()} in workspace {workspace.name}."
        )
        if generated:
            self.stdout.write(f"Password: {generated}   (shown once; they can change it)")
