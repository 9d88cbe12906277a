import django.db.models.deletion
from django.db import migrations, models


def _conversation_id(body):
    """The conversation a stored reply names: a created conversation, a message, or the
    first message of a bulk append."""
    if not isinstance(body, dict):
        return None
    if "conversationId" in body:
        return body["conversationId"]
    messages = body.get("messages")
    if isinstance(messages, list) and messages and isinstance(messages[0], dict):
        return messages[0].get("conversationId")
    return body.get("id")


def backfill(apps, schema_editor):
    IdempotencyRecord = apps.get_model("memory", "IdempotencyRecord")
    Conversation = apps.get_model("memory", "Conversation")
    for record in IdempotencyRecord.objects.filter(conversation__isnull=True).iterator():
        conversation_id = _conversation_id(record.response_body)
        if conversation_id and Conversation.objects.filter(pk=conversation_id).exists():
            record.conversation_id = conversation_id
            record.save(update_fields=["conversation"])


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0004_conversation_tags"),
    ]

    operations = [
        migrations.AddField(
            model_name="idempotencyrecord",
            name="conversation",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="memory.conversation",
            ),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
