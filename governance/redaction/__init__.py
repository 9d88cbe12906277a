"""Redaction: the gates memory passes its text through (``gates``), the Presidio engine
(``presidio``), its recognizers and context rules, the workspace policy (``policy``), the
scan of written messages (``scan``), the review queue (``review``), pseudonyms
(``pseudonyms``) and masking for display (``masking``)."""
