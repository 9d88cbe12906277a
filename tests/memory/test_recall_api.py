"""Recall for agents: ``POST /v1/search`` across tiers in a scope, and ``GET /context?query=``
ending with the verbatim turns that answer a question while the memory before them stays
byte for byte what it was."""

from __future__ import annotations

import pytest

from memory.models import Observation
from memory.services.conversations import conversation_create
from tests.dashboard.factories import CHAT, chat, observe
from tests.governance.builders import set_policy

REFUND_ANSWER = "Done: the refund of $129 will land within 5 business days."
LATER = [
    ("user", "One more thing: can you change my delivery address?"),
    ("assistant", "Of course, what is the new address?"),
]


@pytest.fixture
def observed(conversation):
    """The support chat, observed: the refund's answer is memory now, not a recent turn;
    two later turns are the recent messages."""
    chat(conversation)
    observe(conversation)
    chat(conversation, LATER)
    return conversation


def _search(api, body):
    return api.post("/v1/search", body, format="json")


def test_search_ranks_every_tier_and_traces_a_message_to_its_notes(api, observed) -> None:
    found = _search(
        api, {"query": "how long will the refund take", "conversationId": str(observed.pk)}
    )

    assert found.status_code == 200, found.content
    body = found.json()
    assert body["scope"] == "conversation"
    tiers = {hit["tier"] for hit in body["hits"]}
    assert {"message", "observation"} <= tiers
    answer = next(h for h in body["hits"] if h["snippet"] == REFUND_ANSWER)
    marked = [answer["snippet"][a:b] for a, b in answer["highlights"]]
    assert "refund" in marked
    notes = Observation.objects.filter(pk__in=answer["observationIds"])
    assert [note.text for note in notes] and all("refund" in n.text for n in notes)
    scores = [h["score"] for h in body["hits"]]
    assert scores == sorted(scores, reverse=True)


def test_search_keeps_to_one_end_user_and_an_agent_key_may_not_search_everyone(
    api, curator_api, workspace, observed
) -> None:
    other = conversation_create(workspace=workspace, user_id="erik")
    chat(other, [("user", "My refund never arrived.")])

    dana = _search(api, {"query": "refund", "userId": "dana"}).json()
    everyone = _search(curator_api, {"query": "refund"}).json()
    refused = _search(api, {"query": "refund"})

    assert {h["conversationId"] for h in dana["hits"]} == {str(observed.pk)}
    assert dana["scope"] == "user"
    assert {h["conversationId"] for h in everyone["hits"]} == {str(observed.pk), str(other.pk)}
    assert refused.status_code == 403
    assert refused.json()["code"] == "scope_required"
    assert "conversationId or userId" in refused.json()["message"]


def test_another_workspaces_conversation_is_not_found(other_api, observed) -> None:
    answer = _search(other_api, {"query": "refund", "conversationId": str(observed.pk)})

    assert answer.status_code == 404
    assert _search(other_api, {"query": "refund", "userId": "dana"}).json()["hits"] == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "query"),
        ({"query": "  ", "userId": "dana"}, "query"),
        ({"query": "x", "userId": "dana", "tiers": ["memo"]}, "tiers[0]"),
        ({"query": "x", "userId": "dana", "tiers": []}, "tiers"),
        ({"query": "x", "userId": "dana", "limit": 0}, "limit"),
        ({"query": "x", "userId": "dana", "limit": 201}, "limit"),
        ({"query": "x", "userId": "dana", "role": "boss"}, "role"),
        ({"query": "x", "userId": "dana", "since": "2026-02-01", "until": "2026-01-01"}, "until"),
        ({"query": "x", "conversationId": "not-an-id"}, "conversationId"),
    ],
)
def test_bad_search_input_is_a_400_naming_the_field(api, observed, body, field) -> None:
    answer = _search(api, body)

    assert answer.status_code == 400, answer.content
    assert answer.json()["field"] == field


def test_a_hit_reads_as_its_tier_is_served(api, observed, workspace) -> None:
    """The private policy: notes hold pseudonyms, and so do their hits; once agents may
    see the values, the hits show them, as the context does."""
    scope = {"query": "name", "conversationId": str(observed.pk), "tiers": ["observation"]}
    pseudonymised = _search(api, scope).json()["hits"][0]["snippet"]
    set_policy(workspace, agents_see_reidentified=True)
    revealed = _search(api, scope).json()["hits"][0]["snippet"]

    assert "<PERSON_" in pseudonymised and "Dana" not in pseudonymised
    assert "Dana" in revealed and "<PERSON_" not in revealed


def _context(api, conversation, **params):
    return api.get(f"/v1/conversations/{conversation.pk}/context", params)


def test_a_question_appends_the_answering_turns_after_unchanged_memory(api, observed) -> None:
    plain = _context(api, observed, format="text")
    asked = _context(api, observed, format="text", query="how long will the refund take")

    text = asked.content.decode()
    assert text.startswith(plain.content.decode() + "\n\n## Recalled\n")
    recalled = text.split("## Recalled\n", 1)[1].splitlines()
    assert any(line.endswith(REFUND_ANSWER) for line in recalled)
    # The recent messages are in the context already: not recalled again.
    assert not any(LATER[0][1] in line for line in recalled)
    assert asked["ETag"] != plain["ETag"]
    again = api.get(
        f"/v1/conversations/{observed.pk}/context",
        {"format": "text", "query": "how long will the refund take"},
        HTTP_IF_NONE_MATCH=asked["ETag"],
    )
    assert again.status_code == 304


def test_json_and_messages_formats_carry_the_recalled_turns(api, observed) -> None:
    as_json = _context(api, observed, query="refund", recall=1).json()
    as_chat = _context(api, observed, format="messages", query="refund").json()

    assert len(as_json["recalled"]["turns"]) == 1
    assert as_json["recalled"]["query"] == "refund"
    assert as_json["recalled"]["turns"][0]["tier"] == "message"
    last = as_chat["messages"][-1]
    assert last["role"] == "system" and "refund" in last["content"].lower()


def test_the_recalled_section_stays_inside_max_tokens(api, observed) -> None:
    budget = 120
    body = _context(api, observed, query="refund", max_tokens=budget).json()

    assert body["recalled"]["turns"], "a quarter of the budget holds one turn at least"
    assert body["tokenCount"] + body["recalled"]["tokenCount"] <= budget


def test_under_a_budget_the_memory_is_the_same_whatever_the_question(api, observed) -> None:
    """A prompt cache keyed on what comes before the recalled section keeps hitting when
    the question changes, a budget or not: the memory's share does not depend on it."""
    budget = 120
    refund = _context(api, observed, format="text", query="refund", max_tokens=budget)
    address = _context(api, observed, format="text", query="delivery address", max_tokens=budget)
    nothing = _context(api, observed, format="text", query="zeppelin", max_tokens=budget)

    before = [r.content.decode().split("## Recalled")[0].rstrip() for r in (refund, address)]
    assert "## Recalled" in refund.content.decode()
    assert before[0] == before[1] == nothing.content.decode()


def test_recalled_turns_read_in_the_conversations_order_under_their_day(api, observed) -> None:
    text = _context(api, observed, format="text", query="refund phone calls", recall=4)
    section = text.content.decode().split("## Recalled\n", 1)[1].splitlines()
    day = observed.messages.order_by("seq").first().created_at.date().isoformat()

    assert section[0] == f"### {day}"
    turns = section[1:]
    assert len(turns) >= 2 and all(line.startswith("[") for line in turns)
    seqs = [observed.messages.get(content=line.split("] ", 1)[1]).seq for line in turns]
    assert seqs == sorted(seqs)


def test_nothing_is_recalled_that_the_recent_messages_hold(api, conversation) -> None:
    chat(conversation)  # nothing observed: every turn is a recent message

    body = _context(api, conversation, query="refund").json()

    assert body["recalled"]["turns"] == []
    assert len(body["recentMessages"]) == len(CHAT)


@pytest.mark.parametrize("recall", ["0", "51", "ten"])
def test_a_bad_recall_count_is_a_400(api, observed, recall) -> None:
    answer = _context(api, observed, query="refund", recall=recall)

    assert answer.status_code == 400
    assert answer.json()["field"] == "recall"
