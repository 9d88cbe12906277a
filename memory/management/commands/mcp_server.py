"""Serve Memdesk's memory to an MCP client over stdio, acting with one API key."""

from __future__ import annotations

import os

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError
from rest_framework import exceptions

from memory.mcp.server import serve_stdio
from tenancy.auth import api_key_authenticate

KEY_VARIABLE = "MEMDESK_API_KEY"


class Command(BaseCommand):
    help = (
        f"Serve the memory tools over MCP on stdin/stdout (the client starts this command). "
        f"The tools act with the API key in {KEY_VARIABLE}, with its workspace and scope."
    )

    # Standard output is the protocol's channel: only the SDK writes to it; the command
    # speaks on standard error.
    def handle(self, *args: object, **options: object) -> None:
        raw_key = os.environ.get(KEY_VARIABLE, "").strip()
        if not raw_key:
            raise CommandError(
                f"Set {KEY_VARIABLE} to a Memdesk API key (create one with "
                "manage.py create_api_key --workspace NAME)."
            )
        try:
            api_key = api_key_authenticate(raw_key)
        except exceptions.AuthenticationFailed as error:
            raise CommandError(f"{KEY_VARIABLE}: {error.detail}") from None
        except DatabaseError as error:
            # Only the type: the database's message can quote a row.
            raise CommandError(
                f"Could not read the API keys ({type(error).__name__}): check DATABASE_URL "
                "and run manage.py migrate."
            ) from None
        self.stderr.write(
            f"Memdesk MCP server on stdio: key {api_key.prefix}… ({api_key.scope}), "
            f"workspace {api_key.workspace_id}."
        )
        serve_stdio(raw_key)
