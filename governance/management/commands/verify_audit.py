"""Verify each workspace's audit hash chain; exit non-zero at the first broken event."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.selectors import audit_chain_verify
from memory.models import Workspace


class Command(BaseCommand):
    help = "Check that no audit event was altered, removed or inserted."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", help="Only this workspace (its name).")

    def handle(self, *args: object, **options: object) -> None:
        workspaces = Workspace.objects.order_by("name")
        if options["workspace"]:
            workspaces = workspaces.filter(name=options["workspace"])
            if not workspaces.exists():
                raise CommandError(f"No workspace named {options['workspace']!r}.")
        broken = 0
        for workspace in workspaces:
            report = audit_chain_verify(workspace_id=workspace.pk)
            if report.ok:
                self.stdout.write(f"{workspace.name}: OK, {report.events} events")
                continue
            broken += 1
            where = (
                f"event id {report.broken_event_id} (#{report.broken_sequence})"
                if report.broken_event_id
                else f"after event #{report.events}"
            )
            self.stderr.write(f"{workspace.name}: BROKEN at {where}: {report.problem}")
        if broken:
            raise CommandError(f"{broken} workspace chain(s) failed verification.")
