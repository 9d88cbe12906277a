"""The compliance pages, under /compliance/: the audit log, the review queue, the
redaction policy and re-scans, legal holds, retention, erasure and pseudonyms. Each
page group's views are a module of ``dashboard.compliance.views``; their forms and the
reads only these pages need are ``forms`` and ``selectors`` here."""
