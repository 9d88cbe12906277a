"""Signals one app sends and another handles, where the doors between apps do not let
the sender call the handler (see docs/architecture.md, "The doors")."""

from __future__ import annotations

from django.dispatch import Signal

# Sent after an erasure has deleted an end user's rows (governance.erasure), with
# ``workspace_id`` and ``conversation_ids`` (those that went). Receivers purge what can
# keep a deleted row's words beyond the row: memory's search index on SQLite and its
# cached contexts.
rows_erased = Signal()
