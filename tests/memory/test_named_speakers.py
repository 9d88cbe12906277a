"""Named speakers end to end: a hand-over between a customer, an agent and a supervisor,
written through the API with each speaker's name, stored, read back, given to the
engines, named in the notes, served in the context and shown on the dashboard; bad
names refused; clients that send only {role, content} served as before."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from core.errors import MemdeskError
from governance.redaction.policy import redaction_policy_get_or_create
from memory.models import Conversation, Message, Observation
from memory.services.messages import MessageInput, messages_append
from tests.memory.fake_openai import completion

HAND_OVER = [
    {
        "role": "user",
        "name": "Maria Lopez",
        "content": "My parcel to Berlin is two weeks late and I need it before my trip on Friday.",
    },
    {
        "role": "assistant",
        "name": "Tom Berg",
        "content": "I have escalated it to the courier; they will call you tomorrow morning.",
    },
    {
        "role": "assistant",
        "name": "Priya Shah",
        "content": "I am the supervisor. I approved a refund of 40 euros for the delay.",
    },
    {
        "role": "user",
        "name": "Maria Lopez",
        "content": "Thank you. I prefer e-mail over phone calls.",
    },
]
FIRST_NAMES = {"Maria Lopez": "Maria", "Tom Berg": "Tom", "Priya Shah": "Priya"}
# What a message carried before names existed, in the order the API has always sent it.
UNNAMED_MESSAGE_KEYS = [
    "id",
    "conversationId",
    "seq",
    "role",
    "content",
    "createdAt",
    "tokenCount",
    "metadata",
]


def _observed_as_written(workspace) -> None:
    """The workspace's Observer reads messages as written (no redaction before it), so
    the engine is given the speakers' names."""
    policy = redaction_policy_get_or_create(workspace_id=workspace.pk)
    policy.redact_before_observation = False
    policy.save()


def _conversation(api) -> str:
    response = api.post("/v1/conversations", {"userId": "maria-17"}, format="json")
    assert response.status_code == 201
    return response.json()["id"]


def test_three_named_speakers_travel_from_the_api_to_notes_context_and_dashboard(
    api, workspace, member
):
    _observed_as_written(workspace)
    cid = _conversation(api)

    written = api.post(
        f"/v1/conversations/{cid}/messages/bulk", {"messages": HAND_OVER}, format="json"
    )

    assert written.status_code == 201
    names = [m["name"] for m in HAND_OVER]
    assert [m["name"] for m in written.json()["messages"]] == names
    rows = list(Message.objects.filter(conversation_id=cid).order_by("seq"))
    assert [(r.role, r.name) for r in rows] == [(m["role"], m["name"]) for m in HAND_OVER]
    listed = api.get(f"/v1/conversations/{cid}/messages").json()["messages"]
    assert [m["name"] for m in listed] == names[::-1]  # newest first
    found = api.post(f"/v1/conversations/{cid}/search", {"query": "refund"}, format="json")
    assert [m["name"] for m in found.json()["messages"]] == ["Priya Shah"]

    run = api.post(f"/v1/conversations/{cid}/observe?wait=true")

    assert run.status_code == 200 and run.json()["status"] == "succeeded"
    speaker_of = {str(r.pk): FIRST_NAMES[r.name] for r in rows}
    notes = list(Observation.objects.filter(conversation_id=cid))
    assert notes
    named_in_notes: set[str] = set()
    for note in notes:
        named = {first for first in FIRST_NAMES.values() if first in note.text}
        sources = {speaker_of[str(i)] for i in note.source_message_ids}
        # Every note says who, by name, among the people whose words it was drawn from
        # (it may name who they spoke to: "they will call Maria"): the agent and the
        # supervisor, who share a role, are never one "Assistant".
        assert named & sources, (note.text, sources)
        assert not re.search(r"\b(User|Assistant)\b", note.text), note.text
        named_in_notes |= named
    assert {"Maria", "Priya"} <= named_in_notes

    # A turn after the Observer ran is served word for word, with who said it.
    follow_up = "I will e-mail you the courier's tracking link today."
    posted = api.post(
        f"/v1/conversations/{cid}/messages",
        {"role": "assistant", "name": "Tom Berg", "content": follow_up},
        format="json",
    )
    assert posted.status_code == 201 and posted.json()["name"] == "Tom Berg"

    as_json = api.get(f"/v1/conversations/{cid}/context").json()
    assert [(m["name"], m["content"]) for m in as_json["recentMessages"]] == [
        ("Tom Berg", follow_up)
    ]
    assert any("Maria" in o["text"] for o in as_json["observations"])
    as_text = api.get(f"/v1/conversations/{cid}/context?format=text").content.decode()
    assert f"## Recent Messages\n[Tom Berg (assistant)] {follow_up}" in as_text
    as_chat = api.get(f"/v1/conversations/{cid}/context?format=messages").json()["messages"]
    assert as_chat[-1] == {"role": "assistant", "content": follow_up, "name": "Tom_Berg"}

    client = Client()
    client.force_login(member("viewer"))
    page = client.get(f"/conversations/{cid}/").content.decode()
    # Pages mask a speaker's name as they mask a person in a message (the policy redacts
    # people): a viewer sees that a person spoke, and in which role, not who.
    for message in [*HAND_OVER, {"role": "assistant", "name": "Tom Berg"}]:
        shown = (
            '<strong class="speaker">&lt;PERSON&gt;</strong> '
            f'<span class="role">({message["role"]})</span>'
        )
        assert shown in page
        assert f'<strong class="speaker">{message["name"]}' not in page
    transcript = b"".join(
        client.get(f"/conversations/{cid}/transcript?format=text").streaming_content
    ).decode()
    heads = re.findall(r"^#(\d+)  \S+ \S+  ([^\n]*?\))(?:  \[[^\n]*)?$", transcript, re.M)
    assert heads == [
        ("1", "<PERSON> (user)"),
        ("2", "<PERSON> (assistant)"),
        ("3", "<PERSON> (assistant)"),
        ("4", "<PERSON> (user)"),
        ("5", "<PERSON> (assistant)"),
    ]


def test_the_openai_engine_is_told_who_said_each_message(api, llm_workspace, fake_openai):
    _observed_as_written(llm_workspace)
    llm_workspace.observer_threshold = 30_000  # observed on demand below, not on write
    llm_workspace.save()
    cid = _conversation(api)
    api.post(f"/v1/conversations/{cid}/messages/bulk", {"messages": HAND_OVER}, format="json")
    fake_openai.enqueue(
        completion("- [high] (unknown) Maria Lopez needs the parcel before Friday {refs: 1}")
    )

    run = api.post(f"/v1/conversations/{cid}/observe?wait=true")

    assert run.status_code == 200 and run.json()["status"] == "succeeded"
    (request,) = fake_openai.requests
    system, user = request.body["messages"]
    assert "write the name, not the role" in system["content"]
    sent = user["content"]
    assert "#1 [Maria Lopez (user)] (" in sent
    assert "#2 [Tom Berg (assistant)] (" in sent
    assert "#3 [Priya Shah (assistant)] (" in sent
    assert "#4 [Maria Lopez (user)] (" in sent


BAD_NAMES = [
    ("x" * 65, "is 65 characters once its whitespace is collapsed; the limit is 64."),
    ("Maria\x07Lopez", "must not hold control characters; it holds U+0007."),
    ("Maria\x00", "must not hold control characters; it holds U+0000."),
    ("\u202eziroM", "must not hold control characters; it holds U+202E."),
    (7, "Not a valid string."),
    ({"first": "Maria"}, "Not a valid string."),
    (["Maria"], "Not a valid string."),
]


@pytest.mark.parametrize(("name", "why"), BAD_NAMES)
def test_a_bad_name_is_a_400_naming_the_field_and_stores_nothing(api, name, why):
    cid = _conversation(api)

    single = api.post(
        f"/v1/conversations/{cid}/messages",
        {"role": "user", "content": "Hello", "name": name},
        format="json",
    )
    bulk = api.post(
        f"/v1/conversations/{cid}/messages/bulk",
        {
            "messages": [
                {"role": "user", "content": "Hello", "name": "Maria Lopez"},
                {"role": "assistant", "content": "Hi", "name": name},
            ]
        },
        format="json",
    )

    assert single.status_code == 400
    assert (single.json()["field"], single.json()["message"]) == ("name", f"name: {why}")
    assert bulk.status_code == 400
    assert bulk.json()["field"] == "messages[1].name"
    assert bulk.json()["message"] == f"messages[1].name: {why}"
    assert not Message.objects.filter(conversation_id=cid).exists()
    assert Conversation.objects.get(pk=cid).last_seq == 0


def test_a_client_that_sends_only_role_and_content_is_served_as_before(api):
    cid = _conversation(api)

    written = api.post(
        f"/v1/conversations/{cid}/messages",
        {"role": "user", "content": "Where is my parcel?"},
        format="json",
    )

    assert written.status_code == 201
    assert list(written.json()) == UNNAMED_MESSAGE_KEYS
    assert Message.objects.get(pk=written.json()["id"]).name == ""
    [listed] = api.get(f"/v1/conversations/{cid}/messages").json()["messages"]
    assert list(listed) == UNNAMED_MESSAGE_KEYS
    [recent] = api.get(f"/v1/conversations/{cid}/context").json()["recentMessages"]
    assert list(recent) == UNNAMED_MESSAGE_KEYS
    text = api.get(f"/v1/conversations/{cid}/context?format=text").content.decode()
    assert text == "## Recent Messages\n[user] Where is my parcel?"
    chat = api.get(f"/v1/conversations/{cid}/context?format=messages").json()["messages"]
    assert chat == [{"role": "user", "content": "Where is my parcel?"}]


def test_a_caller_of_the_service_gets_a_clear_error_for_a_name_too_long(conversation):
    with pytest.raises(MemdeskError) as raised:
        messages_append(
            conversation=conversation,
            items=[MessageInput(role="user", content="hello", name="x" * 65)],
        )
    assert raised.value.code == "invalid_name"
    assert "is 65 characters" in str(raised.value) and "the limit is 64" in str(raised.value)
    assert not Message.objects.filter(conversation=conversation).exists()


def test_messages_stored_before_names_existed_get_theirs_from_metadata(conversation):
    import importlib

    from django.apps import apps

    migration = importlib.import_module("memory.migrations.0020_message_name_from_metadata")
    old, bad, unnamed, named = messages_append(
        conversation=conversation,
        items=[
            MessageInput(role="user", content="one", metadata={"name": "  Jo\n Smith "}),
            MessageInput(role="user", content="two", metadata={"name": "Jo\u202eSmith"}),
            MessageInput(role="user", content="three", metadata={"kind": "note"}),
            MessageInput(role="user", content="four", name="Ana", metadata={"name": "Other"}),
        ],
    )

    migration.names_from_metadata(apps, None)

    names = dict(Message.objects.values_list("pk", "name"))
    assert names[old.pk] == "Jo Smith"
    assert names[bad.pk] == "" and names[unnamed.pk] == ""
    assert names[named.pk] == "Ana"
    assert Message.objects.get(pk=old.pk).metadata == {"name": "  Jo\n Smith "}
