"""Generated demo conversations for ``make run``: support chats, some with tool calls and
some with (invented) personal data, so every part of the product has something to show.
Nothing here comes from real people; names, numbers and addresses are made up."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from tenancy.models import Workspace

CUSTOMERS = [
    ("Dana Whitfield", "dana.whitfield@example.com", "+1 415 555 0142", "cust-1042"),
    ("Tomás Ferreira", "tomas.ferreira@example.org", "+44 20 7946 0321", "cust-2210"),
    ("Priya Raman", "priya.raman@example.net", "+1 212 555 0187", "cust-3307"),
    ("Lukas Brenner", "lukas.brenner@example.com", "+49 30 5556 7788", "cust-4415"),
]
PRODUCTS = ["Aero 2 headphones", "Kestrel standing desk", "Nimbus router", "Orbit smart lamp"]


def _refund_with_tools(rng: random.Random, who: tuple[str, str, str, str]) -> list[tuple[Any, ...]]:
    name, email, phone, _ = who
    order = f"ORD-{rng.randint(100000, 999999)}"
    product = rng.choice(PRODUCTS)
    return [
        (
            "user",
            f"Hi, I'm {name}. My {product} arrived broken and I want a refund. Order {order}.",
        ),
        ("assistant", "Sorry to hear that. Let me look the order up."),
        (
            "tool",
            f'{{"order_id": "{order}", "status": "delivered", "items": [{{"sku": '
            f'"{product[:3].upper()}-01", "price": 129.0}}], "delivered": "3 days ago", '
            f'"email": "{email}"}}',
            "lookup_order",
        ),
        (
            "assistant",
            f"I see {order}, delivered three days ago, $129.00. I can refund it to "
            "the original card or send a replacement. Which do you prefer?",
        ),
        ("user", f"Refund please. You can call me on {phone} if you need anything."),
        (
            "tool",
            f'{{"refund_id": "RF-{rng.randint(1000, 9999)}", "amount": 129.0, "eta_days": 5}}',
            "create_refund",
        ),
        (
            "assistant",
            "Done: the refund of $129.00 is on its way and should land within 5 "
            "business days. I've also emailed you a return label.",
        ),
        ("user", "Great, thanks. I'll drop the parcel off next Tuesday."),
        ("user", "I prefer phone calls for updates."),
        ("user", "Actually, I now prefer email over phone calls for updates."),
    ]


def _shipping_question(rng: random.Random, who: tuple[str, str, str, str]) -> list[tuple[Any, ...]]:
    product = rng.choice(PRODUCTS)
    return [
        ("user", f"When will the {product} be back in stock? I'd prefer the black one."),
        (
            "tool",
            '{"sku": "' + product[:3].upper() + '-BLK", "in_stock": false, '
            '"restock_date": "in 2 weeks", "warehouse": "Reno"}',
            "check_inventory",
        ),
        (
            "assistant",
            "The black one is expected back in about two weeks. Want me to "
            "notify you when it ships?",
        ),
        ("user", "Yes please, and I prefer email over SMS."),
        ("assistant", "Noted: email notification only. You're on the list."),
    ]


def _account_issue(rng: random.Random, who: tuple[str, str, str, str]) -> list[tuple[Any, ...]]:
    name, email, _, username = who
    return [
        (
            "user",
            f"I can't log in. My username is {username} and the reset email never "
            f"comes to {email}.",
        ),
        ("assistant", "Let me check the account and the mail logs."),
        (
            "tool",
            f'{{"username": "{username}", "locked": true, "failed_attempts": 6, '
            '"last_reset_email": "bounced"}',
            "get_account",
        ),
        (
            "assistant",
            "Your account was locked after 6 failed attempts, and the reset "
            "email bounced. I've unlocked it; can you confirm the address?",
        ),
        ("user", f"The address is right. Maybe my spam filter? I'm {name} by the way."),
        (
            "assistant",
            "Likely. I've sent a new reset link; it expires in 24 hours. The "
            "ticket stays open until you confirm you're in.",
        ),
        ("user", "Got it, I'm in now. Thanks!"),
        ("assistant", "Glad it worked. I'll close the ticket."),
    ]


SCENARIOS = [_refund_with_tools, _shipping_question, _account_issue]


def load_demo_data(*, workspace: Workspace, conversations: int = 6, seed: int = 7) -> int:
    """Create ``conversations`` generated support chats; return how many messages."""
    rng = random.Random(seed)
    total = 0
    start: datetime = timezone.now() - timedelta(days=conversations + 2)
    for index in range(conversations):
        who = CUSTOMERS[index % len(CUSTOMERS)]
        turns = SCENARIOS[index % len(SCENARIOS)](rng, who)
        began = start + timedelta(days=index, hours=rng.randint(8, 17))
        conversation = conversation_create(
            workspace=workspace,
            user_id=who[3],
            title=turns[0][1][:60],
            metadata={"channel": rng.choice(["chat", "email"]), "demo": True},
            created_at=began,
        )
        items = [
            MessageInput(
                role=turn[0],
                content=turn[1],
                tool_name=turn[2] if len(turn) > 2 else "",
                tool_call_id=f"call_{index}_{n}" if turn[0] == "tool" else "",
                created_at=began + timedelta(minutes=2 * n),
            )
            for n, turn in enumerate(turns)
        ]
        total += len(messages_append(conversation=conversation, items=items))
    return total
