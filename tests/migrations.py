"""Tests of a migration over stored rows: take the database back to a release before,
write rows as that release did, then bring every app to its latest again, whatever the
test did in between."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.state import StateApps


def migrate_to_latest() -> None:
    """Every app to its latest migration (going back on one app also unapplies what
    depends on it in the others)."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


@contextmanager
def migrated_back_to(nodes: list[tuple[str, str | None]]) -> Iterator[StateApps]:
    """The database at ``nodes`` (``(app, migration)``, None for none of the app's), and
    the historical models of that state; at the latest again on the way out."""
    executor = MigrationExecutor(connection)
    executor.migrate(nodes)
    try:
        yield executor.loader.project_state([n for n in nodes if n[1]]).apps
    finally:
        migrate_to_latest()
