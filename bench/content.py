"""Made-up but realistic chat content: varying lengths, a few tool results, some code.

Deterministic for a given seed, so a run can be repeated. Nothing here is ever printed.
"""

from __future__ import annotations

import json
import random

_VOCABULARY = (
    "the a to of and in is it that for on with as this be you are was not have can we",
    "order invoice account refund shipping delivery password login error payment card",
    "subscription plan upgrade downgrade cancel renewal discount coupon address customer",
    "ticket support agent escalate manager policy warranty return replacement damaged",
    "package tracking number carrier delayed warehouse inventory stock backorder estimate",
    "please thanks sorry help issue problem question answer check update confirm verify",
    "email phone message chat call tomorrow today yesterday week month morning afternoon",
    "database server deploy release version migration rollback latency timeout retry",
    "request response header token cache queue worker job cron schedule backup restore",
    "report dashboard export import csv spreadsheet chart metric alert threshold budget",
    "meeting agenda notes decision deadline owner priority blocker follow-up review draft",
    "contract renewal legal compliance audit retention privacy consent gdpr delete",
    "Berlin Lisbon Toronto Osaka Nairobi Austin Maria Kenji Priya Tomasz Aisha Daniel",
    "would could should might will just also only really still already maybe probably",
)
WORDS = [word for line in _VOCABULARY for word in line.split()]
ENDINGS = (".", ".", ".", "?", "!", ",")
TOOL_NAMES = ("search_orders", "get_invoice", "lookup_customer", "create_ticket", "run_sql")


def _sentence(rng: random.Random) -> str:
    words = rng.choices(WORDS, k=rng.randint(5, 18))
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words)), f"#{rng.randint(1000, 999999)}")
    return " ".join(words).capitalize() + rng.choice(ENDINGS)


def _prose(rng: random.Random, length: int) -> str:
    parts: list[str] = []
    size = 0
    while size < length:
        sentence = _sentence(rng)
        parts.append(sentence)
        size += len(sentence) + 1
    text = " ".join(parts)
    if length > 600 and rng.random() < 0.25:
        code = "\n".join(
            f"    {rng.choice(WORDS)}_{i} = fetch({rng.randint(1, 99)}, retry={rng.random() < 0.5})"
            for i in range(rng.randint(3, 12))
        )
        text += f"\n\n```python\ndef handler(event):\n{code}\n```\n"
    return text


def _tool_result(rng: random.Random, length: int) -> str:
    rows = []
    size = 0
    while size < length:
        row = {
            "id": rng.randint(10_000, 99_999),
            "status": rng.choice(("open", "shipped", "refunded", "pending")),
            "note": _sentence(rng),
            "amount": round(rng.uniform(3, 900), 2),
        }
        rows.append(row)
        size += 90 + len(row["note"])
    return json.dumps({"results": rows, "count": len(rows)})


def message_batch(seed: int, size: int) -> list[dict[str, str]]:
    """``size`` messages for the API's bulk body: user / assistant turns with a tool result
    now and then; lengths are log-normal (median about 200 characters, a tail to 6,000)."""
    rng = random.Random(seed)
    messages = []
    for index in range(size):
        length = int(min(max(rng.lognormvariate(5.3, 0.9), 12), 6000))
        if rng.random() < 0.1:
            messages.append(
                {
                    "role": "tool",
                    "content": _tool_result(rng, length),
                    "toolName": rng.choice(TOOL_NAMES),
                    "toolCallId": f"call_{rng.getrandbits(48):012x}",
                }
            )
        else:
            role = "user" if index % 2 == 0 else "assistant"
            messages.append({"role": role, "content": _prose(rng, length)})
    return messages


def memory_text(seed: int, length: int) -> str:
    """Text in the register of an observation or reflection: short factual sentences."""
    rng = random.Random(seed)
    sentences: list[str] = []
    while sum(len(sentence) + 1 for sentence in sentences) < length:
        sentences.append(_sentence(rng))
    return " ".join(sentences)
