"""Write a signed checkpoint of every workspace's audit chain head to the sink."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from governance.audit.checkpoints import checkpoint_sink
from governance.audit.writer import audit_checkpoint_heads


class Command(BaseCommand):
    help = (
        "Append a signed checkpoint of every workspace's audit chain head to the checkpoint "
        "sink. Run it once after upgrading to keyed chains (it seals the events written "
        "before), after `verify_audit` has passed."
    )

    def handle(self, *args: object, **options: object) -> None:
        written = audit_checkpoint_heads()
        self.stdout.write(f"{written} checkpoint(s) written to {checkpoint_sink()}.")
