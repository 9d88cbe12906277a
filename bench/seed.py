"""One long conversation as the pipeline leaves it, for the benchmarks that read one
(bench/context.py, bench/dashboard_page.py). Runs inside Django: call django.setup()
first."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from content import memory_text, message_batch

PRIORITIES = ("high", "medium", "medium", "low", "completed")


def seed_long_conversation(
    workspace: Any,
    *,
    title: str,
    user_id: str,
    messages: int,
    observations: int,
    reflections: int,
    recent: int,
    rng_seed: int,
    reflected_share: float = 1.0,
    mark_reflected: bool = False,
    record_runs: bool = False,
    runs: int | None = None,
    newest_alike: bool = False,
) -> Any:
    """Messages 1..messages with ``recent`` unobserved ones at the end; observations whose
    windows tile the observed messages; ``reflections`` over consecutive groups of the
    oldest ``reflected_share`` of the observations. ``mark_reflected`` marks those
    observations reflected (they leave the context, as after several Reflector runs);
    ``record_runs`` adds the Observer and Reflector runs that would have made it all:
    ``runs`` Observer runs tiling the observed messages (by default 20 from 1,000
    messages, else 1). ``newest_alike`` draws each message, observation and reflection by
    its place from the newest, so conversations of different sizes end alike: a page
    that shows their newest items shows the same texts."""
    from django.db import transaction
    from django.utils import timezone

    from memory.models import (
        Conversation,
        Message,
        Observation,
        ObserverRun,
        Reflection,
        ReflectorRun,
    )
    from memory.tokens import token_counts

    rng = random.Random(rng_seed)

    def place(index: int, total: int) -> int:
        return total - 1 - index if newest_alike else index

    def draw(kind: str, index: int, total: int) -> random.Random:
        return random.Random(f"{kind}-{place(index, total)}") if newest_alike else rng

    now = timezone.now()
    began = now - timedelta(days=30)
    step = timedelta(days=30) / messages
    with transaction.atomic():
        conversation = Conversation.objects.create(
            workspace=workspace,
            user_id=user_id,
            title=title,
            last_seq=messages,
            created_at=began,
            updated_at=now,
        )
        bodies = [m for batch in range(-(-messages // 100)) for m in message_batch(batch, 100)]
        bodies = bodies[:messages]
        if newest_alike:
            bodies.reverse()
        counts = token_counts([body["content"] for body in bodies])
        rows = [
            Message(
                conversation=conversation,
                seq=seq,
                role=body["role"],
                content=body["content"],
                tool_name=body.get("toolName", ""),
                tool_call_id=body.get("toolCallId", ""),
                token_count=tokens,
                created_at=began + step * seq,
            )
            for seq, (body, tokens) in enumerate(zip(bodies, counts, strict=True), start=1)
        ]
        Message.objects.bulk_create(rows, batch_size=1000)
        by_seq = {row.seq: row for row in rows}

        covered = messages - recent
        texts = [
            memory_text(
                place(index, observations),
                draw("observation-text", index, observations).randint(80, 320),
            )
            for index in range(observations)
        ]
        observation_rows = []
        for index, (text, tokens) in enumerate(zip(texts, token_counts(texts), strict=True)):
            item = draw("observation", index, observations)
            start = 1 + index * covered // observations
            end = (index + 1) * covered // observations
            first, last = by_seq[start], by_seq[end]
            observation_rows.append(
                Observation(
                    conversation=conversation,
                    text=text,
                    priority=item.choice(PRIORITIES),
                    observed_at=last.created_at + timedelta(minutes=5),
                    referenced_at=(
                        last.created_at + timedelta(days=item.randint(-20, 20))
                        if item.random() < 0.2
                        else None
                    ),
                    window_start_seq=start,
                    window_end_seq=end,
                    window_start_at=first.created_at,
                    window_end_at=last.created_at,
                    source_message_ids=[
                        str(by_seq[seq].id) for seq in sorted(item.sample(range(start, end + 1), 2))
                    ],
                    source="observer",
                    engine="extractive",
                    tags=item.sample(["billing", "shipping", "account", "bug", "sales"], 2),
                    topics=[item.choice(["orders", "support", "product"])],
                    token_count=tokens,
                )
            )
        Observation.objects.bulk_create(observation_rows, batch_size=500)

        per_reflection = max(int(observations * reflected_share) // reflections, 1)
        texts = [
            memory_text(
                10_000 + place(index, reflections),
                draw("reflection-text", index, reflections).randint(400, 900),
            )
            for index in range(reflections)
        ]
        for index, (text, tokens) in enumerate(zip(texts, token_counts(texts), strict=True)):
            group = observation_rows[index * per_reflection : (index + 1) * per_reflection]
            reflection = Reflection.objects.create(
                conversation=conversation,
                text=text,
                priority=draw("reflection", index, reflections).choice(PRIORITIES[:3]),
                generation=1,
                observed_at=group[-1].observed_at + timedelta(minutes=10),
                window_start_seq=group[0].window_start_seq,
                window_end_seq=group[-1].window_end_seq,
                window_start_at=group[0].window_start_at,
                window_end_at=group[-1].window_end_at,
                source_observation_ids=[str(o.id) for o in group],
                engine="extractive",
                tags=["summary"],
                token_count=tokens,
            )
            if mark_reflected:
                Observation.objects.filter(pk__in=[o.pk for o in group]).update(
                    status="reflected", reflection=reflection
                )

        if record_runs:
            if runs is None:
                runs = 20 if messages >= 1000 else 1
            for index in range(runs):
                start = 1 + index * covered // runs
                end = (index + 1) * covered // runs
                ObserverRun.objects.create(
                    conversation=conversation,
                    trigger="threshold",
                    status="succeeded",
                    engine="extractive",
                    window_start_seq=start,
                    window_end_seq=end,
                    tokens_in=sum(by_seq[s].token_count for s in range(start, end + 1)),
                    tokens_out=2_000,
                    items_in=end - start + 1,
                    items_out=observations // runs,
                    duration_ms=rng.randint(40, 400),
                    created_at=began + step * end,
                    finished_at=began + step * end,
                )
            ReflectorRun.objects.create(
                conversation=conversation,
                trigger="threshold",
                status="succeeded",
                engine="extractive",
                generation=1,
                duration_ms=120,
                finished_at=now,
            )
    return conversation
