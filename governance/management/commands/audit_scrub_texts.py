"""Replace the memory texts that stored audit events still hold by their digests and
re-chain the events after them, workspace by workspace; print counts only."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.actors import command_actor
from core.errors import MemdeskError
from governance.audit.rechain import ScrubReport, audit_texts_scrub
from tenancy.models import Workspace

COMMAND = "audit_scrub_texts"


class Command(BaseCommand):
    help = (
        "Replace the note texts, pin quotes and conversation titles that audit events "
        "written before digests still hold by their keyed digests, re-chain the events "
        "from the first one changed, and record the re-chain (an audit.rechain event). "
        "The chain must verify first. On PostgreSQL, run it as the owner of the tables "
        "(the role that runs migrate)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", help="Only this workspace (its name).")
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Verify and print what would be scrubbed, per action; change nothing.",
        )

    def handle(self, *args: object, **options: object) -> None:
        workspaces = Workspace.objects.order_by("name")
        if options["workspace"]:
            workspaces = workspaces.filter(name=options["workspace"])
            if not workspaces.exists():
                raise CommandError(f"No workspace named {options['workspace']!r}.")
        dry_run = bool(options["dry_run"])
        actor = command_actor(COMMAND)
        failures = 0
        for workspace in workspaces:
            try:
                report = audit_texts_scrub(workspace_id=workspace.pk, actor=actor, dry_run=dry_run)
            except MemdeskError as error:
                failures += 1
                self.stderr.write(f"{workspace.name}: REFUSED: {error}")
                continue
            self.stdout.write(f"{workspace.name}: {_summary(report, dry_run=dry_run)}")
        if failures:
            raise CommandError(f"{failures} workspace(s) not scrubbed: see above.")


def _summary(report: ScrubReport, *, dry_run: bool) -> str:
    if not report.scrubbed:
        return "nothing to scrub"
    verb = "would scrub" if dry_run else "scrubbed"
    actions = ", ".join(f"{action} {n}" for action, n in report.scrubbed_by_action.items())
    rechained = "would re-chain" if dry_run else "re-chained"
    line = (
        f"{verb} {report.scrubbed} event(s) ({actions}); {rechained} {report.rechained} "
        f"event(s), #{report.first_sequence} to #{report.last_sequence}"
    )
    if report.rechain_event is not None:
        line += f"; recorded as audit.rechain #{report.rechain_event.sequence}"
    return line
