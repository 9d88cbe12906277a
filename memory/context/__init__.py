"""``context_for_conversation``: the three tiers an agent puts into its prompt.

Pinned quotes (verbatim, never trimmed), then reflections (most condensed), then active
observations (and, in place of a stale reflection, its sources as they now stand), then
the recent messages that no observation covers yet. The rendered bytes are cached under
a key that changes with every write to the conversation (``last_seq``,
``memory_version``) and with the day (relative dates), so an unchanged conversation
answers with identical bytes and ETag. The memory block (pins, reflections,
observations, rendered and costed) is cached apart, by ``memory_version`` and the day
only: messages are written far more often than memory changes, and a message write then
renders only the tail, and leaves the memory sections' bytes (the prompt prefix a
provider's prompt cache keys on) as they were. The tail itself is cached by
``memory_version`` with the seq it runs through, and extended with the newer messages.

A workspace whose redaction policy lets agents see re-identified memory is served its
pseudonyms (``<PERSON_1>``) replaced by their values, before the budget is fitted. Those
renders are cached under a key of their own that also changes whenever a pseudonym is
forgotten, so a value never outlives its deletion in the cache.

The package: ``tiers`` (what a context reads), ``rendering`` (the body in each format),
``budget`` (fitting ``max_tokens``, and what each tier costs), ``caches`` (the worker's own
and the shared cache), ``read`` (``context_for_conversation``, through the caches) and
``served`` (``context_read``: a read as the REST route and the MCP tool serve it, counted
for the prompt-cache metric).
"""
