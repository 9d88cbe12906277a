"""Create an API key; print only the raw key on stdout (scripts capture it)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.actors import SYSTEM_ACTOR
from core.errors import MemdeskError
from memory.models import ApiKey
from memory.services import api_key_create, workspace_get_or_create


class Command(BaseCommand):
    help = "Create an API key for a workspace (created if needed); prints only the raw key."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", required=True, help="Workspace name (a slug).")
        parser.add_argument("--name", default="", help="A label to tell keys apart.")
        parser.add_argument("--admin", action="store_true", help="An admin-scope key.")

    def handle(self, *args: object, **options: object) -> None:
        try:
            workspace = workspace_get_or_create(name=str(options["workspace"]))
        except MemdeskError as exc:
            raise CommandError(exc.message) from None
        _, raw_key = api_key_create(
            workspace=workspace,
            actor=SYSTEM_ACTOR,
            name=str(options["name"]),
            scope=ApiKey.Scope.ADMIN if options["admin"] else ApiKey.Scope.AGENT,
        )
        self.stdout.write(raw_key)
