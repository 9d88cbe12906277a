"""Retention: its policies (``policies``), what is due (``plan``), and the sweep that
deletes it (``sweep``, with ``sql`` on PostgreSQL). Legal holds are ``governance.holds``;
erasure is ``governance.erasure``, which shares ``common`` with the sweep.

What "expired" means, per tier: a message by ``created_at``, an observation by
``observed_at`` (when the note was written), a reflection by ``created_at``. A
conversation's policy is the workspace's default policy (blank tag) unless one or more
tag policies match its tags; those then replace the default entirely. When several
policies govern one conversation, each tier is kept for the longest of their periods,
and a period left empty (keep forever) wins: deleting is the step that cannot be undone.

A legal hold, on a conversation or on an end user (every conversation with that
``user_id``, including ones created later), overrides every rule: a sweep skips what it
covers, and deleting or erasing it is refused.

Deletions run in short transactions over batches chosen by cutoff, never "everything
in the conversation", so a message written while a sweep runs is never touched unless
it had already expired. Each batch locks its conversations first (placing a hold takes
the same lock) and reads the holds after that, so a hold placed meanwhile is honoured.
On PostgreSQL a batch is a window of the table's physical row addresses, searched,
checked against the holds and deleted by two statements (``sql.lock_window``,
``sql.delete_window``); elsewhere, and for reflections (whose deletion unlinks
observations), the rows are read and deleted by id. Each batch writes its receipt to the
audit trail in the same transaction; a sweep that deleted anything ends with one summary
receipt. A batch of messages, reasoning steps or tool calls also deletes the stored
``Idempotency-Key`` replies that repeat one of its rows (``replies``), so a replay cannot
serve what it deleted.
The id hash of a receipt is SHA-256 over one line ``<kind>:<id>\\n`` per deleted row, the
lines sorted (``HASH_OF``); an erasure's summary hashes ``<conversation>:<kind>:<id>``
lines (``ERASURE_HASH_OF``), because it works conversation by conversation.

Left as they are, by decision: observations whose source messages expired keep naming
those ids (the receipts say they were deleted), and reflections likewise; coverage of
observed ranges comes from Observer runs, which retention keeps, so expired messages
never come back as "recent". Conversations left empty are kept, so an agent's handle
stays valid and seq numbers continue; erasure or a delete removes them.
"""
