"""Messages written before ``Message.name`` existed carry their speaker, if at all, in
``metadata.name`` (where OpenAI-style clients put it). Copy it into ``name`` under the
rules the API applies to ``name`` (whitespace collapsed, at most 64 characters, no
control characters), so every reader reads the speaker from one field. Metadata is left
as the client sent it. Reversing keeps the names: they are the same data."""

import re

from django.db import migrations

NAME_MAX_CHARS = 64
_NOT_IN_A_NAME = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _name_of(metadata):
    value = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(value, str):
        return ""
    name = " ".join(value.split())
    if len(name) > NAME_MAX_CHARS or _NOT_IN_A_NAME.search(name):
        return ""
    return name


def names_from_metadata(apps, schema_editor):
    Message = apps.get_model("memory", "Message")
    rows = (
        # Metadata is stored as ``json`` on PostgreSQL (it keeps the client's key order),
        # which has no key operators: the text is searched, and the key checked here.
        Message.objects.filter(name="", metadata__icontains='"name"')
        .only("pk", "metadata")
        .iterator(chunk_size=2000)
    )
    batch = []
    for message in rows:
        name = _name_of(message.metadata)
        if name:
            message.name = name
            batch.append(message)
        if len(batch) >= 2000:
            Message.objects.bulk_update(batch, ["name"])
            batch = []
    if batch:
        Message.objects.bulk_update(batch, ["name"])


class Migration(migrations.Migration):
    dependencies = [("memory", "0019_message_name")]

    operations = [migrations.RunPython(names_from_metadata, migrations.RunPython.noop)]
