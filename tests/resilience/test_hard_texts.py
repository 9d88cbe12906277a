"""The texts the PII scan finds hardest never stall the workers (issue 25): with real
worker processes laid out as the Procfile lays them out (a scanner on the scan queue, the
worker on the default and governance queues, two slots), an erasure and an Observer run
of another conversation complete within 30 s while two such texts wait to be scanned.

Before the scan read texts in bounded pieces, 16,000 "!" took 82 s to tokenise and 2 MB
of emoji never finished; erasures waited 15 minutes behind them."""

from __future__ import annotations

import pytest

from governance.models import ErasureRequest, MessageScan, RedactionFinding
from governance.redaction.scan import UNSCANNED
from memory.models import Conversation, ObserverRun
from tests.memory.celery_workers import Worker, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

# The probe's (2 MB of emoji) and the hardest kind left (a dense run of one-letter
# tokens, read in pieces at linear cost, 500,000 characters of it in about 30 s).
HARD_TEXTS = ["\N{GRINNING FACE}" * 500_000, "-x" * 250_000]
TURNS = [
    {"role": "user", "content": "My order ORD-1 arrived broken and I want a refund please."},
    {"role": "assistant", "content": "I am sorry. The refund takes less than a week."},
]


def _conversation(api, user_id: str, messages: list[dict]) -> Conversation:
    created = api.post("/v1/conversations", {"userId": user_id}, format="json")
    assert created.status_code == 201, created.content
    conversation_id = created.json()["id"]
    written = api.post(
        f"/v1/conversations/{conversation_id}/messages/bulk", {"messages": messages}, format="json"
    )
    assert written.status_code == 201, written.content
    return Conversation.objects.get(pk=conversation_id)


def test_an_erasure_and_another_observer_run_finish_while_hard_texts_wait(
    api, admin_api, workspace, broker, workers
):
    workspace.observer_threshold = 20
    workspace.save()
    workers.append(Worker("scanner", broker, {}, queues=(broker.scan_queue,)))
    for slot in ("worker-1", "worker-2"):  # the Procfile's worker: two slots
        workers.append(Worker(slot, broker, {}, queues=(broker.queue, broker.governance_queue)))
    # The 30 s are counted from running workers, not from starting processes.
    wait_until(
        lambda: all(" ready." in worker.log() for worker in workers),
        timeout=120,
        what="the workers to start",
        logs=workers,
    )
    erased = _conversation(api, "erase-me", TURNS)
    hard = _conversation(api, "someone", [{"role": "user", "content": text} for text in HARD_TEXTS])

    requested = admin_api.post(
        "/v1/erasure-requests", {"userId": "erase-me", "reason": "GDPR request 7"}, format="json"
    )
    assert requested.status_code == 202, requested.content
    observed = _conversation(api, "another", TURNS)

    wait_until(
        lambda: ErasureRequest.objects.filter(
            pk=requested.json()["id"], status="completed"
        ).exists(),
        timeout=30,
        what="the erasure",
        logs=workers,
    )
    wait_until(
        lambda: ObserverRun.objects.filter(conversation=observed, status="succeeded").exists(),
        timeout=30,
        what="the other conversation's Observer run",
        logs=workers,
    )
    assert not Conversation.objects.filter(pk=erased.pk).exists()

    # The hard texts are scanned in the end, each once: read, or marked as not readable
    # in time (masked whole, held out of memory), never sent round again.
    def scanned() -> bool:
        return MessageScan.objects.filter(conversation=hard).count() == len(HARD_TEXTS)

    wait_until(scanned, timeout=180, what="the scan of the hard texts", logs=workers)
    emoji = hard.messages.get(seq=1)
    assert not RedactionFinding.objects.filter(target_id=emoji.pk, entity_type=UNSCANNED).exists()
