"""What the message scan saves the Observer: the redaction gate in front of the Observer
(``observer_reading``, redacting by default) with the messages already scanned by the
scan task (it reuses the findings) and without (it runs Presidio itself, then stores the
scan as the task would).

Run: ``.venv/bin/python bench/observer_scan_reuse.py [--conversations 40] [--repeat 3]``
(about a minute). Prints figures only, never text.

Texts: the turns of ``abcd_sample.json`` and the sentences of
``presidio_generated_small.json`` (``../shared/data/``), dealt into conversations of 20
messages. A throwaway SQLite database in a temporary directory, migrated; the engine is
loaded and warmed before the clock starts. Each row is the best of ``--repeat`` runs
over fresh conversations, wall clock for the gate's call, over every conversation.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT))
PER_CONVERSATION = 20


def load_texts() -> list[str]:
    pii = json.loads((DATA / "pii" / "presidio_generated_small.json").read_text())
    dialogues = json.loads((DATA / "conversations" / "abcd_sample.json").read_text())
    texts = [item["full_text"] for item in pii]
    return texts + [text for dialogue in dialogues for _, text in dialogue["original"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not DATA.is_dir():
        sys.exit(f"the evaluation data is not at {DATA}")
    tmp = tempfile.mkdtemp(prefix="bench-scan-")
    os.environ["DATABASE_URL"] = f"sqlite:///{tmp}/bench.sqlite3"
    os.environ["MEMDESK_VAR_DIR"] = tmp
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")

    import django

    django.setup()
    from django.core.management import call_command

    from governance.models import ScanRequest
    from governance.redaction.gates import observer_reading
    from governance.redaction.presidio import PolicySpec, RedactionEngine, engine, spacy_model_name
    from governance.redaction.scan import message_scan_requests
    from memory.models import Message
    from memory.services.conversations import conversation_create
    from memory.services.messages import MessageInput, messages_append
    from tenancy.services import workspace_get_or_create

    call_command("migrate", verbosity=0)
    texts = load_texts()
    workspace = workspace_get_or_create(name="bench")
    engine().detect(texts[:64], spec=PolicySpec(workspace_id="w", version=1))

    calls = {"texts": 0}
    original = RedactionEngine.detect

    def counting(self, batch, **kwargs):  # type: ignore[no-untyped-def]
        calls["texts"] += len(batch)
        return original(self, batch, **kwargs)

    RedactionEngine.detect = counting  # type: ignore[method-assign]

    def conversations() -> list[tuple[object, list[Message]]]:
        made = []
        for n in range(args.conversations):
            conversation = conversation_create(workspace=workspace)
            start = (n * PER_CONVERSATION) % len(texts)
            chunk = (texts * 2)[start : start + PER_CONVERSATION]
            messages = messages_append(
                conversation=conversation,
                items=[MessageInput(role="user", content=text) for text in chunk],
            )
            made.append((conversation, messages))
        return made

    messages_total = args.conversations * PER_CONVERSATION
    print(
        f"{args.conversations} conversations of {PER_CONVERSATION} messages "
        f"({messages_total} messages), pipeline {spacy_model_name()}"
    )
    for label, scanned_first in (
        ("not scanned: the gate runs Presidio", False),
        ("scanned by the task: the gate reuses it", True),
    ):
        best = None
        for _ in range(args.repeat):
            made = conversations()
            if scanned_first:
                message_scan_requests(
                    request_ids=list(ScanRequest.objects.values_list("pk", flat=True))
                )
            calls["texts"] = 0
            started = time.perf_counter()
            for conversation, messages in made:
                observer_reading(conversation=conversation, messages=messages, tool_outputs=[])
            elapsed = time.perf_counter() - started
            best = elapsed if best is None else min(best, elapsed)
            read = calls["texts"]
        assert best is not None
        print(
            f"{label:42} {best * 1000:8.1f} ms  {best * 1e6 / messages_total:8.0f} us/message"
            f"  texts through Presidio: {read}"
        )


if __name__ == "__main__":
    main()
