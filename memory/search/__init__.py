"""Recall: one ranked index over messages, observations, reflections and pins.

- ``index``: the index's rows (``SearchEntry``) and the SQL that keeps them in step with
  their sources, in the database itself (triggers), so that every door that writes or
  deletes a source (the API, the dashboard, ``/admin/``, a worker, retention's raw SQL,
  erasure, a conversation's delete) changes the index in the same transaction.
- ``query``: a question as the index reads it (stop words dropped, phrases, ``prefix*``,
  accents folded), and where its words are in a text (snippets and their highlights).
- ``ranked``: the search itself, scoped and filtered, ranked by the database (FTS5's
  ``bm25()`` on SQLite, ``ts_rank_cd`` over a stored ``tsvector`` on PostgreSQL).
"""
