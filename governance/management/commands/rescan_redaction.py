"""Scan stored memory again under each workspace's current redaction policy (after a
policy change, or after upgrading the engine), in batches, printing progress. Messages
are scanned for the dashboard's masking and the "PII found" flag (their text is kept,
unless the policy redacts at ingest); observations and reflections are redacted. Each
workspace's run is recorded as a re-scan run (shown in the dashboard) and audited."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.actors import command_actor
from core.errors import MemdeskError
from governance.models import RescanRun
from governance.redaction.review import RESCAN_TIERS, rescan_run_execute, rescan_run_request
from tenancy.models import Workspace

DEFAULT_REASON = "rescan_redaction command"


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", help="Workspace name (default: every workspace).")
        parser.add_argument(
            "--tier",
            choices=RESCAN_TIERS,
            action="append",
            help="messages, observations or reflections; repeat for several. Default: all.",
        )
        parser.add_argument("--reason", default=DEFAULT_REASON, help="Why, for the audit trail.")
        parser.add_argument(
            "--batch-size", type=int, default=200, help="Objects per batch and transaction."
        )
        parser.add_argument(
            "--processes",
            type=int,
            default=1,
            help="spaCy processes (pays off only for many thousands of texts).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        workspaces = Workspace.objects.order_by("name")
        if options["workspace"]:
            workspaces = workspaces.filter(name=options["workspace"])
            if not workspaces.exists():
                raise CommandError(f"No workspace named {options['workspace']!r}.")
        if options["batch_size"] < 1 or options["processes"] < 1:
            raise CommandError("--batch-size and --processes must be at least 1.")

        def progress(tier: str, counts: dict[str, int], total: int) -> None:
            # Counts only: never any text.
            self.stdout.write(f"  {tier}: {counts['scanned']}/{total}")

        failed = False
        for workspace in workspaces:
            self.stdout.write(f"workspace {workspace.name}")
            try:
                # Recorded and audited like a run started in the dashboard, and run here.
                run = rescan_run_request(
                    workspace=workspace,
                    actor=command_actor("rescan_redaction"),
                    reason=options["reason"],
                    tiers=options["tier"],
                    enqueue=False,
                )
            except MemdeskError as error:
                raise CommandError(f"{workspace.name}: {error.message}") from None
            run = rescan_run_execute(
                run_id=run.pk,
                batch_size=options["batch_size"],
                n_process=options["processes"],
                progress=progress,
            )
            for tier, counts in run.counts.items():
                self.stdout.write(
                    f"  {tier}: {counts['scanned']} scanned, {counts['findings']} new "
                    f"findings, {counts['skipped']} skipped (edited during the scan)"
                )
            if run.status != RescanRun.Status.COMPLETED:
                failed = True
                self.stderr.write(f"  re-scan {run.pk} {run.status}: {run.error}")
        if failed:
            raise CommandError("rescan failed in at least one workspace (see above)")
        self.stdout.write(self.style.SUCCESS("rescan finished"))
