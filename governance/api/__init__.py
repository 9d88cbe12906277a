"""The governance REST API: one module of views per concern, the answers' shapes in
``api_schema`` and the rows as sent in ``wire``."""
