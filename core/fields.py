"""Model fields shared by the apps."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper


class ClientJSONField(models.JSONField):
    """A client's own JSON object (``metadata``), read back with its keys in the order the
    client sent them: PostgreSQL's ``jsonb`` sorts keys, and clients compare what they
    read with what they wrote (the NAMS TypeScript client's checks do, key order
    included), so on PostgreSQL it is stored as ``json``, which keeps the text. Nothing
    queries inside it, so nothing needs jsonb's operators. SQLite keeps the text
    anyway."""

    def db_type(self, connection: BaseDatabaseWrapper) -> str | None:
        if connection.vendor == "postgresql":
            return "json"
        return super().db_type(connection)

    def get_db_prep_value(
        self, value: Any, connection: BaseDatabaseWrapper, prepared: bool = False
    ) -> Any:
        if connection.vendor != "postgresql" or value is None:
            return super().get_db_prep_value(value, connection, prepared)
        from psycopg.types.json import Json

        # Json, not the Jsonb that JSONField sends: a jsonb value would be normalized
        # (its keys sorted) on the way into the json column.
        return Json(value if prepared else self.get_prep_value(value), dumps=self._dumps)

    def _dumps(self, value: Any) -> str:
        import json

        return json.dumps(value, cls=self.encoder)

    def from_db_value(self, value: Any, expression: Any, connection: BaseDatabaseWrapper) -> Any:
        # psycopg parses a json column itself (only jsonb comes back as text for Django).
        if value is not None and not isinstance(value, str):
            return value
        return super().from_db_value(value, expression, connection)
