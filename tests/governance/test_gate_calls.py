"""The gates a pipeline step passes in one call: the Observer's reading of a window (its
messages, its speakers' names and its tool calls' output, from one read of the policy)
and a message write's passage (redacted at ingest, or scanned after the write)."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from governance.models import (
    AuditEvent,
    MessageScan,
    RedactionFinding,
    RedactionPolicy,
    ScanRequest,
)
from governance.redaction import scan
from governance.redaction.gates import (
    RedactionGateError,
    message_ingest,
    observer_reading,
    observer_run_summary,
)
from memory.models import Conversation, Message
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from memory.tokens import token_count

CARD = "4111 1111 1111 1111"
EMAIL = "dana.whitfield@example.com"
CONTENTS = [f"Please charge my card {CARD}.", f"Write to me at {EMAIL}, thanks."]
TOOL_OUTPUTS = [f'{{"email": "{EMAIL}"}}', ""]


@pytest.fixture
def chat_with_pii(workspace) -> Conversation:
    """Two messages with a card number and an e-mail address (CONTENTS)."""
    conversation = conversation_create(workspace=workspace, user_id="dana")
    messages_append(
        conversation=conversation,
        items=[MessageInput(role="user", content=content) for content in CONTENTS],
    )
    return Conversation.objects.select_related("workspace").get(pk=conversation.pk)


def _messages(conversation: Conversation) -> list[Message]:
    return list(conversation.messages.order_by("seq"))


def _policy_reads(queries: CaptureQueriesContext) -> int:
    table = RedactionPolicy._meta.db_table
    return sum(
        1
        for query in queries.captured_queries
        if query["sql"].lstrip().upper().startswith("SELECT") and f'"{table}"' in query["sql"]
    )


def _observe_flag(workspace, value: bool) -> None:
    RedactionPolicy.objects.update_or_create(
        workspace=workspace, defaults={"redact_before_observation": value}
    )


@pytest.mark.parametrize("redacts", [True, False])
def test_the_observer_reads_redacted_texts_only_where_the_policy_says(chat_with_pii, redacts):
    _observe_flag(chat_with_pii.workspace, redacts)
    messages = _messages(chat_with_pii)

    reading = observer_reading(
        conversation=chat_with_pii, messages=messages, tool_outputs=TOOL_OUTPUTS
    )

    assert reading.redacts is redacts
    if redacts:
        assert not any(CARD in text or EMAIL in text for text in reading.contents)
        assert EMAIL not in reading.tool_outputs[0]
    else:
        assert list(reading.contents) == CONTENTS
        assert list(reading.tool_outputs) == TOOL_OUTPUTS


@pytest.mark.parametrize("redacts", [True, False])
def test_a_run_reads_the_policy_once_for_its_reading_and_its_summary(chat_with_pii, redacts):
    _observe_flag(chat_with_pii.workspace, redacts)
    messages = _messages(chat_with_pii)
    # The first scan of the messages reads the policy for its own bookkeeping: done
    # before counting, as the scan task would have done after the write.
    observer_reading(conversation=chat_with_pii, messages=messages, tool_outputs=TOOL_OUTPUTS)
    summary = [f"Charge the card {CARD}.", ""]

    with CaptureQueriesContext(connection) as queries:
        reading = observer_reading(
            conversation=chat_with_pii, messages=messages, tool_outputs=TOOL_OUTPUTS
        )
        kept = observer_run_summary(conversation=chat_with_pii, reading=reading, texts=summary)

    assert _policy_reads(queries) == 1
    if redacts:  # read from redacted messages: nothing in it to redact
        assert kept == summary
    else:  # read from messages as stored: the summary's values are replaced
        assert CARD not in kept[0] and "<CREDIT_CARD>" in kept[0]


@pytest.mark.parametrize("redacts", [True, False])
def test_a_run_with_nothing_to_observe_reads_the_policy_for_its_summary(chat_with_pii, redacts):
    _observe_flag(chat_with_pii.workspace, redacts)
    summary = [f"Charge the card {CARD}.", ""]

    kept = observer_run_summary(conversation=chat_with_pii, reading=None, texts=summary)

    if redacts:
        assert kept == summary
    else:
        assert CARD not in kept[0] and "<CREDIT_CARD>" in kept[0]


def test_a_workspace_without_a_policy_gets_the_defaults_once_there_is_something_to_read(
    workspace,
):
    conversation = conversation_create(workspace=workspace, user_id="dana")
    RedactionPolicy.objects.filter(workspace=workspace).delete()

    empty = observer_reading(conversation=conversation, messages=[], tool_outputs=[""])

    assert empty.redacts is True  # the defaults redact before observation
    assert not RedactionPolicy.objects.filter(workspace=workspace).exists()
    assert not AuditEvent.objects.filter(action="redaction_policy.create").exists()

    reading = observer_reading(conversation=conversation, messages=[], tool_outputs=[EMAIL])

    assert EMAIL not in reading.tool_outputs[0]
    assert RedactionPolicy.objects.filter(workspace=workspace).count() == 1
    assert AuditEvent.objects.filter(action="redaction_policy.create").count() == 1


def test_a_message_changed_during_the_scan_stops_the_run_for_a_retry(chat_with_pii, monkeypatch):
    _observe_flag(chat_with_pii.workspace, True)

    def changed(**_: object) -> list[str]:
        raise scan.ScanConflict("a message")

    monkeypatch.setattr(scan, "observer_texts", changed)

    with pytest.raises(RedactionGateError) as raised:
        observer_reading(
            conversation=chat_with_pii, messages=_messages(chat_with_pii), tool_outputs=[]
        )
    assert raised.value.retryable


def _insert(conversation: Conversation, contents: list[str]) -> list[Message]:
    first = conversation.last_seq + 1
    messages = [
        Message(
            conversation=conversation,
            seq=first + offset,
            role="user",
            content=content,
            token_count=token_count(content),
        )
        for offset, content in enumerate(contents)
    ]
    Message.objects.bulk_create(messages)
    return messages


def test_a_write_without_redaction_at_ingest_stores_the_contents_and_asks_for_a_scan(
    workspace, django_capture_on_commit_callbacks
):
    conversation = conversation_create(workspace=workspace, user_id="dana")

    ingest = message_ingest(workspace_id=workspace.pk, contents=CONTENTS)
    with django_capture_on_commit_callbacks(), transaction.atomic():
        stored = ingest.stored_contents()
        ingest.record(conversation=conversation, messages=_insert(conversation, stored))

    assert ingest.redacts is False
    assert stored == CONTENTS
    assert ScanRequest.objects.filter(conversation_id=conversation.pk).count() == 1
    assert not RedactionFinding.objects.filter(conversation_id=conversation.pk).exists()


def test_a_write_with_redaction_at_ingest_stores_redacted_contents_and_their_findings(
    workspace,
):
    RedactionPolicy.objects.update_or_create(
        workspace=workspace, defaults={"redact_at_ingest": True}
    )
    conversation = conversation_create(workspace=workspace, user_id="dana")

    ingest = message_ingest(workspace_id=workspace.pk, contents=CONTENTS)
    with transaction.atomic():
        stored = ingest.stored_contents()
        messages = _insert(conversation, stored)
        ingest.record(conversation=conversation, messages=messages)

    assert ingest.redacts is True
    assert not any(CARD in text or EMAIL in text for text in stored)
    assert not ScanRequest.objects.filter(conversation_id=conversation.pk).exists()
    assert MessageScan.objects.filter(message_id__in=[m.pk for m in messages]).count() == 2
    assert set(
        RedactionFinding.objects.filter(conversation_id=conversation.pk).values_list(
            "entity_type", flat=True
        )
    ) >= {"CREDIT_CARD", "EMAIL_ADDRESS"}
