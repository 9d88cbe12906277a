"""The governance REST API: one module of views per concern, and the answers' bodies in
``outputs`` (one output serializer per body, which the OpenAPI document describes)."""
