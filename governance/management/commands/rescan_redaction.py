"""Scan stored memory again under each workspace's current redaction policy (after a
policy change, or after upgrading the engine), in batches, printing progress."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.review import RESCAN_TIERS, redaction_rescan
from memory.models import Workspace


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", help="Workspace name (default: every workspace).")
        parser.add_argument(
            "--tier",
            choices=RESCAN_TIERS,
            action="append",
            help="messages, observations or reflections; repeat for several. Default: "
            "observations and reflections, plus messages where the policy redacts them.",
        )
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

        def progress(tier: str, done: int, total: int) -> None:
            # Counts only: never any text.
            self.stdout.write(f"  {tier}: {done}/{total}")

        for workspace in workspaces:
            self.stdout.write(f"workspace {workspace.name}")
            report = redaction_rescan(
                workspace=workspace,
                tiers=options["tier"],
                batch_size=options["batch_size"],
                n_process=options["processes"],
                progress=progress,
            )
            for tier, counts in report.items():
                self.stdout.write(
                    f"  {tier}: {counts['scanned']} scanned, {counts['findings']} new "
                    f"findings, {counts['skipped']} skipped (edited during the scan)"
                )
        self.stdout.write(self.style.SUCCESS("rescan finished"))
