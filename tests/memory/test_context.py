"""The three-tier context: what goes in, in which order, formats, budgets, caching."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone
from django_redis import get_redis_connection

from governance.redaction.pseudonyms import WorkspacePseudonyms
from memory.context import caches, read
from memory.context.rendering import Tail
from memory.models import Message
from memory.tokens import token_count
from tests.governance.builders import set_policy
from tests.memory.factories import ObservationFactory, ReflectionFactory


@pytest.fixture
def ten_message_conversation_id(api):
    """The id of a conversation with ten messages, made over the API."""
    conversation_id = api.post("/v1/conversations", {}, format="json").json()["id"]
    api.post(
        f"/v1/conversations/{conversation_id}/messages/bulk",
        {"messages": [{"role": "user", "content": f"message number {n}"} for n in range(1, 11)]},
        format="json",
    )
    return conversation_id


def _observe(conversation_id: str, start: int, end: int, **fields):
    messages = Message.objects.filter(conversation_id=conversation_id, seq__range=(start, end))
    return ObservationFactory(
        conversation_id=conversation_id,
        window_start_seq=start,
        window_end_seq=end,
        source_message_ids=[str(m.pk) for m in messages.order_by("seq")],
        **fields,
    )


def test_recent_messages_are_only_those_no_observation_covers(api, ten_message_conversation_id):
    _observe(ten_message_conversation_id, 1, 6, text="User counted to six.")
    body = api.get(f"/v1/conversations/{ten_message_conversation_id}/context").json()
    assert [m["seq"] for m in body["recentMessages"]] == [7, 8, 9, 10]
    assert [o["text"] for o in body["observations"]] == ["User counted to six."]


def test_a_gap_between_observed_windows_stays_recent(api, ten_message_conversation_id):
    _observe(ten_message_conversation_id, 1, 3)
    _observe(ten_message_conversation_id, 6, 8)
    body = api.get(f"/v1/conversations/{ten_message_conversation_id}/context").json()
    assert [m["seq"] for m in body["recentMessages"]] == [4, 5, 9, 10]


def test_reflected_observations_leave_the_context_but_still_cover_messages(
    api, ten_message_conversation_id
):
    reflection = ReflectionFactory(
        conversation_id=ten_message_conversation_id, text="User counts a lot."
    )
    _observe(ten_message_conversation_id, 1, 10, status="reflected", reflection=reflection)
    body = api.get(f"/v1/conversations/{ten_message_conversation_id}/context").json()
    assert body["observations"] == []
    assert body["recentMessages"] == []
    assert [r["text"] for r in body["reflections"]] == ["User counts a lot."]


def test_superseded_reflections_are_not_in_the_context(api, ten_message_conversation_id):
    ReflectionFactory(conversation_id=ten_message_conversation_id, text="old", status="superseded")
    ReflectionFactory(conversation_id=ten_message_conversation_id, text="new", generation=2)
    body = api.get(f"/v1/conversations/{ten_message_conversation_id}/context").json()
    assert [r["text"] for r in body["reflections"]] == ["new"]


def test_observation_lines_carry_marker_dates_and_relative_date(api, ten_message_conversation_id):
    now = timezone.now()
    _observe(
        ten_message_conversation_id,
        1,
        2,
        text="User will return the parcel.",
        priority="high",
        observed_at=now - timedelta(days=2),
        referenced_at=now + timedelta(days=5),
    )
    [item] = api.get(f"/v1/conversations/{ten_message_conversation_id}/context").json()[
        "observations"
    ]
    assert item["content"] == (
        f"\N{LARGE RED CIRCLE} {(now - timedelta(days=2)):%Y-%m-%d} (2 days ago) User will return"
        f" the parcel. (event date {(now + timedelta(days=5)):%Y-%m-%d}, in 5 days)"
    )
    assert item["relativeDate"] == "in 5 days"
    assert item["windowStartSeq"] == 1 and item["windowEndSeq"] == 2
    assert len(item["sourceMessageIds"]) == 2


def test_text_format_is_the_three_section_block(api, ten_message_conversation_id):
    _observe(ten_message_conversation_id, 1, 9, text="User counted.")
    ReflectionFactory(conversation_id=ten_message_conversation_id, text="User likes numbers.")
    response = api.get(f"/v1/conversations/{ten_message_conversation_id}/context?format=text")
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    text = response.content.decode()
    sections = text.split("\n\n")
    assert sections[0].startswith("## Reflections\n") and "User likes numbers." in sections[0]
    assert sections[1].startswith("## Observations\n") and "User counted." in sections[1]
    assert sections[2] == "## Recent Messages\n[user] message number 10"


def test_messages_format_is_a_memory_system_message_then_the_turns(
    api, ten_message_conversation_id
):
    _observe(ten_message_conversation_id, 1, 8, text="User counted.")
    chat = api.get(
        f"/v1/conversations/{ten_message_conversation_id}/context?format=messages"
    ).json()["messages"]
    assert chat[0]["role"] == "system"
    assert chat[0]["content"].startswith("Relevant memory for this conversation\n\n")
    assert "User counted." in chat[0]["content"]
    assert chat[1:] == [
        {"role": "user", "content": "message number 9"},
        {"role": "user", "content": "message number 10"},
    ]


def test_messages_format_keeps_tool_results_valid_for_openai(api):
    conversation_id = api.post("/v1/conversations", {}, format="json").json()["id"]
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    api.post(
        f"/v1/conversations/{conversation_id}/messages/bulk",
        {
            "messages": [
                {"role": "assistant", "content": "checking", "metadata": {"toolCalls": [call]}},
                {"role": "tool", "content": "answered", "toolCallId": "call_1", "toolName": "f"},
                {"role": "tool", "content": "orphan", "toolName": "lookup"},
            ]
        },
        format="json",
    )
    chat = api.get(f"/v1/conversations/{conversation_id}/context?format=messages").json()[
        "messages"
    ]
    assert chat == [
        {"role": "assistant", "content": "checking", "tool_calls": [call]},
        {"role": "tool", "content": "answered", "tool_call_id": "call_1"},
        {"role": "user", "content": "[lookup result] orphan"},
    ]


def test_max_tokens_drops_oldest_recent_messages_first_and_says_so(
    api, ten_message_conversation_id
):
    full = api.get(
        f"/v1/conversations/{ten_message_conversation_id}/context?max_tokens=100000"
    ).json()
    per_message = full["tokenCount"] // 10
    body = api.get(
        f"/v1/conversations/{ten_message_conversation_id}/context?max_tokens={per_message * 3}"
    ).json()
    assert [m["seq"] for m in body["recentMessages"]] == [8, 9, 10]
    assert body["trimmed"] == {"recentMessages": 7, "observations": 0, "reflections": 0}
    assert body["tokenCount"] <= per_message * 3


def test_max_tokens_then_drops_lowest_priority_observations(api, ten_message_conversation_id):
    _observe(
        ten_message_conversation_id, 1, 4, text="Background detail about weather.", priority="low"
    )
    _observe(
        ten_message_conversation_id, 5, 8, text="Customer must get a refund today.", priority="high"
    )
    _observe(ten_message_conversation_id, 9, 10, text="Customer prefers email.", priority="medium")
    full = api.get(
        f"/v1/conversations/{ten_message_conversation_id}/context?max_tokens=100000"
    ).json()
    low_cost = next(o["tokenCount"] for o in full["observations"] if o["priority"] == "low")
    body = api.get(
        f"/v1/conversations/{ten_message_conversation_id}/context"
        f"?max_tokens={full['tokenCount'] - low_cost}"
    ).json()
    assert [o["priority"] for o in body["observations"]] == ["high", "medium"]
    assert body["trimmed"]["observations"] == 1


def test_max_tokens_never_splits_an_item(api, ten_message_conversation_id):
    body = api.get(f"/v1/conversations/{ten_message_conversation_id}/context?max_tokens=1").json()
    assert body["recentMessages"] == []
    assert body["trimmed"]["recentMessages"] == 10


@pytest.mark.parametrize(
    ("query", "field"),
    [("max_tokens=0", "max_tokens"), ("max_tokens=abc", "max_tokens"), ("format=xml", "format")],
)
def test_bad_context_parameters_are_400(api, ten_message_conversation_id, query, field):
    response = api.get(f"/v1/conversations/{ten_message_conversation_id}/context?{query}")
    assert response.status_code == 400
    assert response.json()["field"] == field


def test_unchanged_context_is_byte_identical_with_etag_and_304(api, ten_message_conversation_id):
    _observe(ten_message_conversation_id, 1, 5)
    path = f"/v1/conversations/{ten_message_conversation_id}/context"
    first, second = api.get(path), api.get(path)
    assert first.content == second.content
    assert first["ETag"] == second["ETag"]
    not_modified = api.get(path, HTTP_IF_NONE_MATCH=first["ETag"])
    assert not_modified.status_code == 304
    assert not_modified.content == b""


@pytest.mark.parametrize("change", ["message", "observation_edit"])
def test_any_change_to_memory_changes_the_context_and_etag(
    curator_api, ten_message_conversation_id, change
):
    api = curator_api
    observation = _observe(ten_message_conversation_id, 1, 5)
    path = f"/v1/conversations/{ten_message_conversation_id}/context"
    before = api.get(path)
    if change == "message":
        api.post(
            f"/v1/conversations/{ten_message_conversation_id}/messages",
            {"role": "user", "content": "new"},
            format="json",
        )
    else:
        api.patch(
            f"/v1/conversations/{ten_message_conversation_id}/observations/{observation.pk}",
            {"text": "Corrected note.", "reason": "typo"},
            format="json",
        )
    after = api.get(path)
    assert after.content != before.content
    assert after["ETag"] != before["ETag"]
    assert api.get(path, HTTP_IF_NONE_MATCH=before["ETag"]).status_code == 200


@pytest.mark.parametrize("budget", ["", "&max_tokens=100000"])
def test_a_message_write_leaves_the_memory_sections_byte_identical(
    api, ten_message_conversation_id, budget
):
    # Prompt caches key on an exact prefix: the memory block must not move when an agent
    # writes a message, only the recent messages after it.
    _observe(ten_message_conversation_id, 1, 6, text="User counted to six.", priority="high")
    ReflectionFactory(conversation_id=ten_message_conversation_id, text="User likes numbers.")
    path = f"/v1/conversations/{ten_message_conversation_id}/context"
    text_before = api.get(f"{path}?format=text{budget}").content.decode()
    chat_before = api.get(f"{path}?format=messages{budget}").json()["messages"]
    json_before = api.get(f"{path}?format=json{budget}").json()

    api.post(
        f"/v1/conversations/{ten_message_conversation_id}/messages",
        {"role": "user", "content": "message number 11"},
        format="json",
    )

    text_after = api.get(f"{path}?format=text{budget}").content.decode()
    memory_before, _, tail_before = text_before.partition("\n\n## Recent Messages\n")
    memory_after, _, tail_after = text_after.partition("\n\n## Recent Messages\n")
    assert memory_after == memory_before
    assert tail_after == tail_before + "\n[user] message number 11"

    chat_after = api.get(f"{path}?format=messages{budget}").json()["messages"]
    assert chat_after[0] == chat_before[0]
    assert chat_after[1:] == [*chat_before[1:], {"role": "user", "content": "message number 11"}]

    json_after = api.get(f"{path}?format=json{budget}").json()
    for tier in ("pins", "reflections", "observations"):
        assert json_after[tier] == json_before[tier]
    assert [m["seq"] for m in json_after["recentMessages"]] == [7, 8, 9, 10, 11]


def test_the_memory_block_is_rendered_again_when_memory_changes(
    curator_api, ten_message_conversation_id
):
    observation = _observe(ten_message_conversation_id, 1, 6, text="User counted to six.")
    path = f"/v1/conversations/{ten_message_conversation_id}/context?format=text"
    curator_api.get(path)
    curator_api.post(
        f"/v1/conversations/{ten_message_conversation_id}/messages",
        {"role": "user", "content": "message number 11"},
        format="json",
    )
    assert "User counted to six." in curator_api.get(path).content.decode()

    curator_api.patch(
        f"/v1/conversations/{ten_message_conversation_id}/observations/{observation.pk}",
        {"text": "User counted to six, slowly.", "reason": "detail"},
        format="json",
    )

    assert "User counted to six, slowly." in curator_api.get(path).content.decode()


def test_a_read_after_a_message_write_reads_only_the_new_messages(
    api, ten_message_conversation_id, ledger_buffered
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    path = f"/v1/conversations/{ten_message_conversation_id}/context"
    api.get(path)
    api.post(
        f"/v1/conversations/{ten_message_conversation_id}/messages",
        {"role": "user", "content": "message number 11"},
        format="json",
    )

    with CaptureQueriesContext(connection) as queries:
        body = api.get(path).json()

    assert [m["seq"] for m in body["recentMessages"]] == list(range(1, 12))
    [read] = [q["sql"] for q in queries.captured_queries if 'FROM "memory_message"' in q["sql"]]
    assert re.search(r'\bseq"? > 10\b', read)  # only the messages after the kept tail
    # The worker kept the memory block and the tail: the conversation's versions (one
    # statement) are all it reads of the conversation, and nothing of its memory.
    conversation_reads = [
        q["sql"] for q in queries.captured_queries if '"memory_conversation"' in q["sql"]
    ]
    assert len(conversation_reads) == 1
    assert "last_seq, c.memory_version" in conversation_reads[0]
    assert not [q for q in queries.captured_queries if '"memory_observation"' in q["sql"]]


@pytest.mark.parametrize("fmt", ["json", "text", "messages"])
@pytest.mark.parametrize("max_tokens", [None, 40, 12])
def test_a_worker_keeping_only_the_newest_of_a_long_tail_serves_what_it_would_whole(
    api, ten_message_conversation_id, monkeypatch, fmt, max_tokens
):
    # The pipeline off: nothing shortens the tail, and a worker keeps its newest 4.
    path = f"/v1/conversations/{ten_message_conversation_id}/context?format={fmt}" + (
        f"&max_tokens={max_tokens}" if max_tokens else ""
    )
    monkeypatch.setattr(read, "LOCAL_TAIL_MAX_MESSAGES", 4)
    api.get(path)
    for n in (11, 12, 13):
        api.post(
            f"/v1/conversations/{ten_message_conversation_id}/messages",
            {"role": "user", "content": f"message number {n}"},
            format="json",
        )
        kept = api.get(path).content

    # The same read in a worker that never kept a tail, with no cache in front of it.
    monkeypatch.setattr(read, "LOCAL_TAIL_MAX_MESSAGES", 10_000)
    caches.local_clear()
    cache.clear()
    assert kept == api.get(path).content


def test_memory_items_carry_created_at_and_their_window_as_iso_strings(
    api, ten_message_conversation_id
):
    messages = list(
        Message.objects.filter(conversation_id=ten_message_conversation_id).order_by("seq")
    )
    note = _observe(
        ten_message_conversation_id,
        3,
        5,
        text="User counted from three.",
        window_start_at=messages[2].created_at,
        window_end_at=messages[4].created_at,
    )
    by_hand = ObservationFactory(
        conversation_id=ten_message_conversation_id, text="Written from no message."
    )
    body = api.get(f"/v1/conversations/{ten_message_conversation_id}/observations").json()
    items = {item["id"]: item for item in body["observations"]}

    windowed, unwindowed = items[str(note.pk)], items[str(by_hand.pk)]
    assert windowed["windowStart"] == messages[2].created_at.isoformat()
    assert windowed["windowEnd"] == messages[4].created_at.isoformat()
    assert (windowed["windowStartSeq"], windowed["windowEndSeq"]) == (3, 5)
    assert windowed["createdAt"] == note.created_at.isoformat()
    # Absent, not null: the TypeScript client types them as optional strings.
    assert "windowStart" not in unwindowed and "windowEnd" not in unwindowed
    assert unwindowed["windowStartSeq"] is None


def test_a_tool_message_is_a_labelled_user_turn_in_recent_messages(
    api, ten_message_conversation_id
):
    _observe(ten_message_conversation_id, 1, 10, text="User counted to ten.")
    api.post(
        f"/v1/conversations/{ten_message_conversation_id}/messages",
        {"role": "tool", "content": "21C and sunny", "toolName": "weather"},
        format="json",
    )

    [recent] = api.get(f"/v1/conversations/{ten_message_conversation_id}/context").json()[
        "recentMessages"
    ]
    stored = api.get(f"/v1/conversations/{ten_message_conversation_id}/messages?limit=1").json()[
        "messages"
    ]

    assert (recent["role"], recent["originalRole"]) == ("user", "tool")
    assert recent["content"] == "[weather result] 21C and sunny"
    assert recent["toolName"] == "weather"
    # The message itself keeps its role and content.
    assert (stored[0]["role"], stored[0]["content"]) == ("tool", "21C and sunny")


def test_a_worker_keeps_one_tail_per_conversation_and_a_bounded_number_of_items(
    api, curator_api, ten_message_conversation_id, monkeypatch
):
    path = f"/v1/conversations/{ten_message_conversation_id}/context"
    api.get(path)
    observation = _observe(ten_message_conversation_id, 1, 3, text="User counted to three.")
    curator_api.patch(
        f"/v1/conversations/{ten_message_conversation_id}/observations/{observation.pk}",
        {"text": "User counted to three, aloud.", "reason": "detail"},
        format="json",
    )
    api.get(path)
    # The tail read before memory changed is gone, not left to age out.
    tails = [
        key
        for key in caches._LOCAL
        if key.startswith("memdesk:ctxtail:") and ten_message_conversation_id in key
    ]
    assert len(tails) == 1

    kept = caches._EntriesAndItems(entries=caches.LOCAL_ENTRIES_KEPT, items=15)
    monkeypatch.setattr(caches, "_LOCAL", kept)
    for _ in range(3):
        other = api.post("/v1/conversations", {}, format="json").json()["id"]
        api.post(
            f"/v1/conversations/{other}/messages/bulk",
            {"messages": [{"role": "user", "content": f"m{n}"} for n in range(8)]},
            format="json",
        )
        assert api.get(f"/v1/conversations/{other}/context").status_code == 200
    assert sum(caches._items_in(value) for value in caches._LOCAL.values()) <= 15
    assert caches._LOCAL.currsize <= 15


def _shared_cache_keys(fragment: str) -> list[str]:
    """The keys holding ``fragment`` in the shared cache itself (Redis or, without
    CACHE_URL, the process's in-memory cache)."""
    store = getattr(cache, "_cache", None)
    if isinstance(store, dict):  # LocMemCache
        keys = list(store)
    else:  # django-redis
        redis = get_redis_connection("default")
        keys = [key.decode() for key in redis.scan_iter(match=f"*{fragment}*")]
    return [key for key in keys if fragment in key]


def test_a_busy_conversation_keeps_one_body_per_format_in_the_shared_cache(
    api, ten_message_conversation_id, monkeypatch
):
    # Keyed by version, each write left a body behind for an hour: Redis filled up.
    _observe(ten_message_conversation_id, 1, 6, text="User counted to six.")
    path = f"/v1/conversations/{ten_message_conversation_id}/context"
    for n in range(11, 16):
        api.post(
            f"/v1/conversations/{ten_message_conversation_id}/messages",
            {"role": "user", "content": f"message number {n}"},
            format="json",
        )
        api.get(path)
        api.get(f"{path}?format=text")
    newest = api.get(path).content

    assert (
        len(
            _shared_cache_keys(
                f"memdesk:ctx:{caches.RENDER_VERSION}:{ten_message_conversation_id}:"
            )
        )
        == 2
    )
    assert (
        len(
            _shared_cache_keys(
                f"memdesk:ctxmem:{caches.RENDER_VERSION}:{ten_message_conversation_id}:"
            )
        )
        == 2
    )

    # A worker extends its own bodies (memory/context/extension.py) and shares only what
    # it renders whole: another worker with nothing of its own renders the newest body
    # once, and a third serves it from the shared cache without rendering it.
    caches.local_clear()
    assert api.get(path).content == newest
    caches.local_clear()
    monkeypatch.setattr(read, "render_extendable", lambda *args, **kwargs: pytest.fail("rendered"))
    assert api.get(path).content == newest


def test_a_worker_keeps_at_most_its_entries_and_nothing_larger_than_its_item_bound(
    monkeypatch,
):
    kept = caches._EntriesAndItems(entries=2, items=10)
    monkeypatch.setattr(caches, "_LOCAL", kept)
    caches.local_put("a", "block a")
    caches.local_put("b", "block b")
    assert caches.local_get("a") == "block a"  # now the most recently used
    caches.local_put("c", "block c")
    assert (caches.local_get("a"), caches.local_get("b")) == ("block a", None)

    too_long = Tail(0, (), tuple(range(11)), {})
    caches.local_put("tail", too_long)
    assert caches.local_get("tail") is None
    assert kept.currsize <= 10 and len(kept) <= 2


# --- who spoke the recent messages -----------------------------------------------------------


def _named_conversation(api, messages: list[dict]) -> str:
    conversation_id = api.post("/v1/conversations", {}, format="json").json()["id"]
    response = api.post(
        f"/v1/conversations/{conversation_id}/messages/bulk", {"messages": messages}, format="json"
    )
    assert response.status_code == 201
    return conversation_id


MEETING = [
    {"role": "user", "name": "José Álvarez", "content": "Shall we ship on Monday?"},
    {"role": "user", "name": "Ana Kim", "content": "Only if QA signs off."},
    {"role": "assistant", "content": "I will book the QA slot."},
    {"role": "user", "name": "李雷", "content": "Agreed."},
]


def test_every_format_says_who_spoke_each_recent_message(api):
    conversation_id = _named_conversation(api, MEETING)
    url = f"/v1/conversations/{conversation_id}/context"

    recent = api.get(url).json()["recentMessages"]
    text = api.get(f"{url}?format=text").content.decode()
    chat = api.get(f"{url}?format=messages").json()["messages"]

    assert [m.get("name") for m in recent] == ["José Álvarez", "Ana Kim", None, "李雷"]
    assert text == (
        "## Recent Messages\n"
        "[José Álvarez (user)] Shall we ship on Monday?\n"
        "[Ana Kim (user)] Only if QA signs off.\n"
        "[assistant] I will book the QA slot.\n"
        "[李雷 (user)] Agreed."
    )
    # OpenAI refuses a chat message whose name is not letters, digits, _ and -: the
    # name is given in that form, and left out when nothing of it is left.
    assert chat == [
        {"role": "user", "content": "Shall we ship on Monday?", "name": "Jose_Alvarez"},
        {"role": "user", "content": "Only if QA signs off.", "name": "Ana_Kim"},
        {"role": "assistant", "content": "I will book the QA slot."},
        {"role": "user", "content": "Agreed."},
    ]


def test_a_budget_counts_the_speakers_name(api):
    unnamed = _named_conversation(api, [{"role": "user", "content": "Shall we ship?"}])
    named = _named_conversation(
        api, [{"role": "user", "content": "Shall we ship?", "name": "José Álvarez"}]
    )
    costs = [
        api.get(f"/v1/conversations/{cid}/context?max_tokens=1000").json()["tokenCount"]
        for cid in (unnamed, named)
    ]
    assert costs[1] - costs[0] == token_count("José Álvarez") + 1


def test_a_pseudonymised_name_is_served_as_the_content_is(api, workspace):
    """A name stored as a pseudonym (a workspace that redacts at ingest) is served as a
    pseudonym, or as its value where the policy lets agents see values, as the content
    beside it is."""
    with transaction.atomic():
        label = WorkspacePseudonyms(workspace.pk).label("PERSON", "Maria Lopez")
    conversation_id = _named_conversation(
        api, [{"role": "user", "name": label, "content": f"Hi, I'm {label}."}]
    )
    url = f"/v1/conversations/{conversation_id}/context"

    assert api.get(f"{url}?format=text").content.decode() == (
        f"## Recent Messages\n[{label} (user)] Hi, I'm {label}."
    )
    set_policy(workspace, agents_see_reidentified=True)
    [recent] = api.get(url).json()["recentMessages"]
    assert (recent["name"], recent["content"]) == ("Maria Lopez", "Hi, I'm Maria Lopez.")
    assert api.get(f"{url}?format=text").content.decode() == (
        "## Recent Messages\n[Maria Lopez (user)] Hi, I'm Maria Lopez."
    )
    [listed] = api.get(f"/v1/conversations/{conversation_id}/messages").json()["messages"]
    assert listed["name"] == "Maria Lopez"
    assert api.get(f"{url}?format=messages").json()["messages"][0]["name"] == "Maria_Lopez"
