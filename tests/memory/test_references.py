"""Ticket, case and order ids in a note's text."""

from __future__ import annotations

import pytest

from memory.references import references_in


@pytest.mark.parametrize(
    ("text", "ticket_id", "tags"),
    [
        (
            "Assistant opened ticket #452; refund for order ORD-7 in 5 business days",
            "452",
            ["ticket:452", "order:ORD-7"],
        ),
        ("Case number: 88123 escalated to billing", "88123", ["case:88123"]),
        ("User's order 4521 has not arrived", "4521", ["order:4521"]),
        ("ticket TKT-991 closed, see INC-22", "TKT-991", ["ticket:TKT-991", "ticket:INC-22"]),
        ("User wants order 1 of the blue cables", "", []),  # a count, not an id
        ("User prefers email", "", []),
    ],
)
def test_it_files_a_note_under_the_ids_it_names(text, ticket_id, tags):
    found = references_in(text)
    assert (found.ticket_id, found.tags) == (ticket_id, tags)
