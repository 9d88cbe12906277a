"""The audit trail: the writer (``writer``), the signed checkpoints (``checkpoints``), the
chain's verification (``verify``) and the audited admin (``admin``)."""
