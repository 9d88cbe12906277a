"""What extending a kept body costs (memory/context/extension.py): a body of a long
unobserved tail extended by one 10-message write, the new pieces appended to the kept
bytes and their SHA-256 carried on, against the same extension laid out and hashed whole
(the kept hash dropped, as before the append), alternated in one process on the same
kept body. In process, SQLite, no server: the ratio holds on a noisy machine."""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import harness
from content import message_batch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=2000, help="the tail's length")
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    with harness.scratch_django():
        from core.actors import SYSTEM_ACTOR
        from memory.context.caches import local_extendable_get
        from memory.context.extension import extend
        from memory.context.read import context_for_conversation
        from memory.models import Conversation, Message
        from memory.services.conversations import conversation_create
        from memory.services.messages import MessageInput, messages_append
        from tenancy.services import workspace_get_or_create

        workspace = workspace_get_or_create(name="bench", actor=SYSTEM_ACTOR)
        workspace.context_max_tokens = None
        workspace.save()
        conversation = conversation_create(workspace=workspace, user_id="u")

        def written(seed: int, count: int) -> None:
            messages_append(
                conversation=conversation,
                items=[
                    MessageInput(
                        role=m["role"],
                        content=m["content"],
                        tool_name=m.get("toolName", ""),
                        tool_call_id=m.get("toolCallId", ""),
                    )
                    for m in message_batch(seed, count)
                ],
            )

        for start in range(0, args.messages, 100):
            written(start, min(100, args.messages - start))
        fresh = Conversation.objects.select_related("workspace")
        kept = {}
        for fmt in ("json", "text", "messages"):
            context_for_conversation(conversation=fresh.get(pk=conversation.pk), fmt=fmt)
            [kept[fmt]] = [local_extendable_get(key) for key in _slots(conversation.pk, fmt)]
        written(10_000, 10)  # the write the reads after it see
        last_seq = fresh.get(pk=conversation.pk).last_seq
        new = list(Message.objects.filter(conversation=conversation, seq__gt=last_seq - 10))
        for fmt, before in kept.items():
            timings: dict[str, list[float]] = {"appended": [], "whole": []}
            for _ in range(args.rounds):
                for name, start_from in (
                    ("appended", before),
                    ("whole", replace(before, prefix_hash=None)),
                ):
                    started = time.perf_counter()
                    extended = extend(start_from, new, wires={}, through_seq=last_seq)
                    timings[name].append((time.perf_counter() - started) * 1000)
            assert extended is not None
            appended = statistics.median(timings["appended"])
            whole = statistics.median(timings["whole"])
            harness.say(
                f"{fmt:<9} body {len(extended[0].body) / 1024:,.0f} KB, extended by 10 "
                f"messages: appended {appended:.3f} ms, laid out and hashed whole "
                f"{whole:.3f} ms (p50, {args.rounds} rounds): whole/appended "
                f"{whole / appended:.1f}x"
            )
    return 0


def _slots(conversation_id: object, fmt: str) -> list[str]:
    from memory.context.caches import RENDER_VERSION

    return [f"memdesk:ctx:{RENDER_VERSION}:{conversation_id}:{fmt}:None:pseudonyms"]


if __name__ == "__main__":
    harness.run_main(main)
