"""Writes to memory. Every change goes through one of these functions, which validates
it, writes it and its audit event in one transaction, and raises ``MemdeskError``.

One module per feature: ``conversations``, ``messages``, ``idempotency``, ``observations``,
``reflections`` (and ``notes``, what a correction of either does), ``pins``,
``escalations``, ``reasoning``, ``grounding`` (the backfill), ``workspace_settings``."""
