"""The scan's cost per text is bounded (issue 25): long texts are read in pieces, the runs
of symbols that made the tokenizer quadratic are read as spaces, a text that still cannot
be read in ``MEMDESK_SCAN_TEXT_SECONDS`` is marked as not scanned (masked whole, held out
of the Observer's reading, shown to compliance) and never sent round again, and a task
leaves what it has no time for to the next one."""

from __future__ import annotations

import pytest

from governance.models import MessageScan, RedactionFinding, ScanRequest
from governance.redaction import presidio, scan
from governance.redaction.pieces import PIECE_CHARS, pieces, readable
from governance.redaction.policy import redaction_policy_get_or_create
from governance.tasks import message_scan_task
from memory.models import Conversation, Message
from memory.services.messages import MessageInput, messages_append
from tests.governance.builders import set_policy

pytestmark = pytest.mark.django_db

EMAIL = "dana.whitfield@example.com"
PROSE = "The parcel arrived on Tuesday and the box was fine, thank you for asking. "


def _long_text_with_email_at_the_end() -> str:
    """Prose over three pieces, the e-mail address in the last one."""
    text = PROSE * (3 * PIECE_CHARS // len(PROSE))
    return f"{text}Write to me at {EMAIL} from now on."


def _write(conversation: Conversation, *texts: str) -> list[Message]:
    return messages_append(
        conversation=conversation, items=[MessageInput(role="user", content=t) for t in texts]
    )


# --- pieces --------------------------------------------------------------------------------


def test_a_long_text_is_read_in_pieces_cut_between_words_that_make_up_the_whole():
    text = _long_text_with_email_at_the_end()
    parts = pieces(text)

    assert len(parts) >= 3
    assert "".join(part.text for part in parts) == text
    assert all(len(part.text) <= PIECE_CHARS for part in parts)
    for part in parts[1:]:
        assert text[part.offset - 1] == " "  # cut after a space, never inside a word
    assert text.index(EMAIL) >= parts[-1].offset  # the address is whole in one piece


def test_runs_of_symbols_are_read_as_spaces_without_moving_anything():
    text = "Call me!!!!!!!!!!!!!!!!!!!!!!!!!! on 212-555-0147 \N{GRINNING FACE}" * 2 + (
        "\N{GRINNING FACE}" * 40
    )
    read = readable(text)

    assert len(read) == len(text)
    assert "!" * 17 not in read and "\N{GRINNING FACE}" * 17 not in read
    assert read.index("212-555-0147") == text.index("212-555-0147")
    assert "Call me" in read and "\N{GRINNING FACE}" in read  # short runs are kept


def test_personal_data_deep_in_a_long_message_is_found_where_it_is():
    text = _long_text_with_email_at_the_end()
    spec = presidio.PolicySpec(workspace_id="bounded", version=1)

    [found] = presidio.engine().detect([text], spec=spec)

    emails = [d for d in found if d.entity_type == "EMAIL_ADDRESS"]
    assert [(d.start, d.end) for d in emails] == [
        (text.index(EMAIL), text.index(EMAIL) + len(EMAIL))
    ]


# --- a text the scan cannot read in time ---------------------------------------------------


@pytest.fixture
def no_time(settings):
    """No time to read a text of more than one piece: as a text too hard to read."""
    settings.MEMDESK_SCAN_TEXT_SECONDS = 0
    return settings


def test_a_message_not_read_in_time_is_marked_and_never_sent_round_again(
    conversation, no_time, monkeypatch
):
    [long_message, short] = _write(conversation, _long_text_with_email_at_the_end(), f"Hi {EMAIL}")
    requests = list(ScanRequest.objects.values_list("pk", flat=True))

    outcome = message_scan_task.apply(args=[requests]).get()

    assert outcome["scanned"] == 2
    assert not ScanRequest.objects.exists()  # nothing for the sweeper to send again
    [marked] = RedactionFinding.objects.filter(target_id=long_message.pk)
    assert (marked.entity_type, marked.start, marked.end, marked.status) == (
        scan.UNSCANNED,
        0,
        len(long_message.content),
        "detected",
    )
    # The short message was read as usual.
    assert RedactionFinding.objects.filter(target_id=short.pk, entity_type="EMAIL_ADDRESS")

    # Current now: the Observer and later tasks reuse the mark instead of reading again.
    def never(*args, **kwargs):
        raise AssertionError("the engine read a message whose scan is current")

    monkeypatch.setattr(presidio.RedactionEngine, "detect_within", never)
    policy = redaction_policy_get_or_create(workspace_id=conversation.workspace_id)
    again = scan.messages_scan(policy=policy, messages=[long_message, short])
    assert again.reused == 2


def test_the_observer_reads_nothing_of_a_message_not_read_in_time(conversation, no_time):
    [long_message, short] = _write(conversation, _long_text_with_email_at_the_end(), "Thanks!")
    policy = redaction_policy_get_or_create(workspace_id=conversation.workspace_id)

    contents, _ = scan.observer_texts(policy=policy, messages=[long_message, short])

    assert contents == ["", "Thanks!"]
    assert MessageScan.objects.filter(message_id=long_message.pk).exists()


def test_a_viewer_sees_a_message_not_read_in_time_masked_whole(
    conversation, no_time, client, member
):
    [long_message] = _write(conversation, _long_text_with_email_at_the_end())
    message_scan_task.apply(args=[list(ScanRequest.objects.values_list("pk", flat=True))])
    client.force_login(member(role="viewer"))

    page = client.get(f"/conversations/{conversation.pk}/").content.decode()

    assert EMAIL not in page and "The parcel arrived on Tuesday" not in page
    assert f"&lt;{scan.UNSCANNED}&gt;" in page


def test_with_redaction_at_ingest_a_message_not_read_in_time_is_refused(api, conversation, no_time):
    set_policy(conversation.workspace, redact_at_ingest=True)
    _write(conversation, "Kept from before.")

    response = api.post(
        f"/v1/conversations/{conversation.pk}/messages",
        {"role": "user", "content": _long_text_with_email_at_the_end()},
        format="json",
    )

    assert response.status_code == 422
    assert response.json()["code"] == "unscannable"
    assert "shorter messages" in response.json()["message"]
    assert list(Message.objects.values_list("content", flat=True)) == ["Kept from before."]


# --- a task's own time ---------------------------------------------------------------------


def test_a_task_out_of_time_leaves_the_rest_to_a_task_sent_at_once(
    conversation, monkeypatch, sent_tasks, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(scan, "TASK_ROUND_CHARS", 10)
    monkeypatch.setattr(scan, "TASK_SECONDS", 0)
    with django_capture_on_commit_callbacks(execute=False):
        first = _write(conversation, f"Mail {EMAIL} please")[0]
        second = _write(conversation, "And call me on 212-555-0147 today")[0]
    requests = list(ScanRequest.objects.order_by("pk").values_list("pk", flat=True))

    with django_capture_on_commit_callbacks(execute=True):
        outcome = message_scan_task.apply(args=[requests[:1], str(conversation.workspace_id)])

    assert outcome.get()["scanned"] == 1  # one round, then no time left
    assert MessageScan.objects.filter(message_id=first.pk).exists()
    assert not MessageScan.objects.filter(message_id=second.pk).exists()
    [left] = ScanRequest.objects.all()
    assert left.first_seq == second.seq
    assert sent_tasks[-1] == (scan.SCAN_TASK, [[left.pk], str(conversation.workspace_id)])


def test_compliance_finds_the_messages_not_read_in_time_on_the_review_page(
    conversation, no_time, client, member
):
    [long_message] = _write(conversation, _long_text_with_email_at_the_end())
    message_scan_task.apply(args=[list(ScanRequest.objects.values_list("pk", flat=True))])
    client.force_login(member(role="compliance"))

    page = client.get("/compliance/review/").content.decode()

    assert "Messages not scanned in time" in page
    assert f"/conversations/{conversation.pk}/" in page
    assert f"#{long_message.seq}" in page and f"{len(long_message.content)} characters" in page
    assert "The parcel arrived on Tuesday" not in page
