"""A read after a write extends the body the worker rendered last (memory/context/extension.py)
instead of rendering it again: the agent must get byte for byte what a whole render gives."""

from __future__ import annotations

import hashlib
import random

import pytest
from django.utils import timezone

from memory.context import caches, read
from memory.context.budget import budget_fit, effective_max_tokens
from memory.context.rendering import compose, layout, memory_block
from memory.context.tiers import memory_tiers, recent_messages
from memory.models import Conversation, Message
from memory.services.conversations import memory_version_bump
from tests.memory.factories import ObservationFactory

WORDS = [
    *("order", "refund", "parcel", "Berlin", "Tuesday", "invoice"),
    *("café", "naïve", "東京", '"quoted"', "back\\slash"),
]


def _whole_render(conversation_id: str, fmt: str, max_tokens: int | None) -> bytes:
    """The body a worker with nothing kept renders: every tier read and fitted afresh."""
    conversation = Conversation.objects.select_related("workspace").get(pk=conversation_id)
    max_tokens = effective_max_tokens(conversation, max_tokens)
    today = timezone.now().date()
    tiers = memory_tiers(conversation, today=today, reidentifier=None)
    block = memory_block(tiers, fmt="json" if fmt == "json" else "lines", conversation=conversation)
    fitted = budget_fit(block, recent_messages(conversation, reidentifier=None), max_tokens)
    laid = layout(conversation.pk, fitted=fitted, wires={}, fmt=fmt, max_tokens=max_tokens)
    return compose(laid, fitted=fitted, fmt=fmt).body


def _messages(rng: random.Random, count: int, calls: list[str]) -> list[dict]:
    """User and named turns, assistant turns that call tools, and tool results that answer
    a call (made earlier, perhaps trimmed away since) or none."""
    messages = []
    for _ in range(count):
        text = " ".join(rng.choices(WORDS, k=rng.randint(1, 12)))
        kind = rng.choice(["user", "named", "assistant", "call", "tool"])
        if kind == "named":
            messages.append({"role": "user", "content": text, "name": "José Ramírez"})
        elif kind == "call":
            call_id = f"call_{len(calls)}"
            calls.append(call_id)
            call = {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}
            messages.append(
                {"role": "assistant", "content": text, "metadata": {"toolCalls": [call]}}
            )
        elif kind == "tool":
            answered = rng.choice(calls) if calls and rng.random() < 0.7 else "call_none"
            messages.append(
                {"role": "tool", "content": text, "toolCallId": answered, "toolName": "f"}
            )
        else:
            messages.append({"role": kind, "content": text})
    return messages


@pytest.mark.parametrize("fmt", ["json", "text", "messages"])
@pytest.mark.parametrize("max_tokens", [None, 400, 120])
def test_a_read_after_each_write_serves_what_a_whole_render_gives(
    api, monkeypatch, fmt, max_tokens
):
    conversation_id = api.post("/v1/conversations", {}, format="json").json()["id"]
    path = f"/v1/conversations/{conversation_id}/context?format={fmt}" + (
        f"&max_tokens={max_tokens}" if max_tokens else ""
    )
    renders, extensions = [], []
    render_extendable, extend = read.render_extendable, read.extend
    monkeypatch.setattr(
        read, "render_extendable", lambda *a, **kw: renders.append(1) or render_extendable(*a, **kw)
    )

    def counted_extend(*args, **kwargs):
        extended = extend(*args, **kwargs)
        extensions.append(extended is not None)
        return extended

    monkeypatch.setattr(read, "extend", counted_extend)
    rng = random.Random(f"{fmt}-{max_tokens}")
    calls: list[str] = []
    for step in range(30):
        api.post(
            f"/v1/conversations/{conversation_id}/messages/bulk",
            {"messages": _messages(rng, rng.randint(1, 3), calls)},
            format="json",
        )
        if step == 15:  # memory changes: an Observer's note covers the oldest messages
            covered = Message.objects.filter(conversation_id=conversation_id, seq__lte=8)
            ObservationFactory(
                conversation_id=conversation_id,
                window_start_seq=1,
                window_end_seq=8,
                source_message_ids=[str(m.pk) for m in covered.order_by("seq")],
                text="User asked about a parcel.",
            )
            memory_version_bump(conversation_id)
        response = api.get(path)
        assert response.status_code == 200
        assert response.content == _whole_render(conversation_id, fmt, max_tokens), step
        assert response["ETag"] == ('"' + hashlib.sha256(response.content).hexdigest()[:32] + '"')

    assert sum(extensions) >= 10  # most reads extended the body kept, not rendered it
    if max_tokens is None:
        # The first read, and the first after memory changed: nothing else renders whole.
        assert len(renders) == 2


def test_a_read_that_follows_another_workers_write_extends_from_its_own_last_body(api):
    conversation_id = api.post("/v1/conversations", {}, format="json").json()["id"]
    path = f"/v1/conversations/{conversation_id}/context"
    post = f"/v1/conversations/{conversation_id}/messages"
    api.post(post, {"role": "user", "content": "first"}, format="json")
    api.get(path)
    for n in range(3):  # written through another worker; this one reads only at the end
        api.post(post, {"role": "user", "content": f"later {n}"}, format="json")

    body = api.get(path).json()

    assert [m["content"] for m in body["recentMessages"]] == [
        "first",
        "later 0",
        "later 1",
        "later 2",
    ]


def test_a_deleted_conversation_leaves_nothing_to_extend_in_the_worker(
    api, django_capture_on_commit_callbacks
):
    conversation_id = api.post("/v1/conversations", {}, format="json").json()["id"]
    api.post(
        f"/v1/conversations/{conversation_id}/messages",
        {"role": "user", "content": "my card is 4111 1111 1111 1111"},
        format="json",
    )
    api.get(f"/v1/conversations/{conversation_id}/context")
    kept = [slot for slot in list(caches._EXTENDABLE) if conversation_id in slot]
    assert kept  # the read kept its body to extend

    with django_capture_on_commit_callbacks(execute=True):
        assert api.delete(f"/v1/conversations/{conversation_id}").status_code == 204

    assert not [slot for slot in list(caches._EXTENDABLE) if conversation_id in slot]
