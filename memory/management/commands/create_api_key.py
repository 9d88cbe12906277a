"""Create an API key; print only the raw key on stdout (scripts capture it)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.actors import command_actor
from core.errors import MemdeskError
from tenancy.models import ApiKey
from tenancy.services import api_key_create, workspace_get_or_create


class Command(BaseCommand):
    help = "Create an API key for a workspace (created if needed); prints only the raw key."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", required=True, help="Workspace name (a slug).")
        parser.add_argument("--name", default="", help="A label to tell keys apart.")
        parser.add_argument(
            "--scope",
            choices=ApiKey.Scope.values,
            default=None,
            help="What the key may do: agent (the default), curator (also edits memory), "
            "compliance (also governance routes), admin (everything).",
        )
        parser.add_argument("--admin", action="store_true", help="The same as --scope admin.")

    def handle(self, *args: object, **options: object) -> None:
        scope = options["scope"]
        if options["admin"]:
            if scope not in (None, ApiKey.Scope.ADMIN):
                raise CommandError(
                    f"--admin means --scope admin; it cannot be used with --scope {scope}."
                )
            scope = ApiKey.Scope.ADMIN
        actor = command_actor("create_api_key")
        try:
            workspace = workspace_get_or_create(name=str(options["workspace"]), actor=actor)
        except MemdeskError as exc:
            raise CommandError(exc.message) from None
        _, raw_key = api_key_create(
            workspace=workspace,
            actor=actor,
            name=str(options["name"]),
            scope=str(scope or ApiKey.Scope.AGENT),
        )
        self.stdout.write(raw_key)
