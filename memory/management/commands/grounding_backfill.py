"""Give the observations and reflections written before grounding scores existed their
score, in batches, as the pipeline scores new notes; prints counts only."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.actors import command_actor
from memory.services.grounding import grounding_backfill
from tenancy.models import Workspace


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", help="Workspace name (default: every workspace).")
        parser.add_argument(
            "--batch-size", type=int, default=500, help="Notes per batch and transaction."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1.")
        workspaces = Workspace.objects.order_by("name")
        if options["workspace"]:
            workspaces = workspaces.filter(name=options["workspace"])
            if not workspaces.exists():
                raise CommandError(f"No workspace named {options['workspace']!r}.")
        for workspace in workspaces:
            report = grounding_backfill(
                workspace=workspace,
                actor=command_actor("grounding_backfill"),
                batch_size=options["batch_size"],
            )
            self.stdout.write(f"workspace {workspace.name}")
            for tier, counts in report.items():
                # Counts only: never a note's text.
                self.stdout.write(
                    f"  {tier}: {counts['scored']} scored, {counts['withoutSources']} without "
                    f"sources, {counts['sourcesGone']} with sources no longer stored "
                    "(left without a score)"
                )
        self.stdout.write(self.style.SUCCESS("grounding backfill finished"))
