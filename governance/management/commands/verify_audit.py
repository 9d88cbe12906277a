"""Verify each workspace's audit hash chain against its keys and its signed checkpoints;
exit non-zero on any problem, saying which event broke the chain and why."""

from __future__ import annotations

from collections import defaultdict

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.audit.checkpoints import CheckpointLine, checkpoint_sink, utc_text
from governance.audit.verify import ChainReport, audit_chain_verify, audit_checkpoint_lines
from tenancy.models import Workspace


class Command(BaseCommand):
    help = (
        "Check that no audit event was altered, removed or inserted: every event's keyed "
        "hash, its link to the one before, and the signed checkpoints kept outside the "
        "database."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", help="Only this workspace (its name).")
        parser.add_argument(
            "--require-checkpoints",
            action="store_true",
            help="Also fail when events older than a minute are covered by no checkpoint "
            "(a checkpoint was lost, or the sink was emptied).",
        )

    def handle(self, *args: object, **options: object) -> None:
        workspaces = Workspace.objects.order_by("name")
        if options["workspace"]:
            workspaces = workspaces.filter(name=options["workspace"])
            if not workspaces.exists():
                raise CommandError(f"No workspace named {options['workspace']!r}.")
        self.stdout.write(f"Checkpoints: {checkpoint_sink()}")
        lines_by_workspace: dict[str, list[CheckpointLine]] = defaultdict(list)
        for line in audit_checkpoint_lines():
            lines_by_workspace[line.workspace_id].append(line)

        failures = 0
        for workspace in workspaces:
            lines = lines_by_workspace.pop(str(workspace.pk), [])
            report = audit_chain_verify(workspace_id=workspace.pk, checkpoint_lines=lines)
            if not report.ok:
                failures += 1
                self._broken(workspace.name, report)
                continue
            self.stdout.write(f"{workspace.name}: OK, {report.events} events{_covered(report)}")
            if report.uncovered_since is not None:
                required = bool(options["require_checkpoints"])
                failures += required
                self.stderr.write(
                    f"{workspace.name}: {'UNCOVERED' if required else 'WARNING'}: events "
                    f"after #{report.checkpointed_through} (the first written "
                    f"{utc_text(report.uncovered_since)}) are covered by no checkpoint: "
                    "their checkpoint was lost or removed, or never written (events from "
                    "before checkpoints existed). Once the chain verifies, `manage.py "
                    "audit_checkpoint` covers them."
                )

        if not options["workspace"]:
            # What is left names no workspace of this database.
            for workspace_id, lines in sorted(lines_by_workspace.items()):
                for line in lines:
                    failures += 1
                    self.stderr.write(_orphan(workspace_id, line))
        if failures:
            raise CommandError(f"{failures} problem(s) found: the audit trail does not verify.")

    def _broken(self, name: str, report: ChainReport) -> None:
        where = (
            f"event id {report.broken_event_id} (#{report.broken_sequence})"
            if report.broken_event_id
            else f"after event #{report.events}"
        )
        self.stderr.write(f"{name}: BROKEN at {where}: {report.problem}")
        for problem in report.problems[1:]:
            self.stderr.write(f"{name}: also: {problem}")


def _covered(report: ChainReport) -> str:
    if not report.checkpoints:
        return ", no signed checkpoint yet"
    last = utc_text(report.last_checkpoint_at) if report.last_checkpoint_at else "?"
    return (
        f", signed checkpoints through #{report.checkpointed_through} "
        f"({report.checkpoints} checked, the last written {last})"
    )


def _orphan(workspace_id: str, line: CheckpointLine) -> str:
    if line.checkpoint is None:
        return line.problem
    checkpoint = line.checkpoint
    return (
        f"the checkpoint of {utc_text(checkpoint.written_at)} says workspace {workspace_id} "
        f"reached event #{checkpoint.sequence}, but no such workspace is in the database: "
        "its events were removed"
    )
