"""Detection quality on the shared PII data (../shared/data/pii), with the families and
matching rule of bench/redaction_quality.py, which prints the full tables: every text of
presidio_generated_small.json, and a fixed seeded slice of the contextual anonymizer
corpus (a few seconds), against stock Presidio on the same pipeline."""

from __future__ import annotations

import pytest

from bench.redaction_quality import evaluate
from tests.governance.evaluation_data import data_file

SLICE = 200


@pytest.fixture(scope="module")
def generated():
    data_file("pii/presidio_generated_small.json")
    return evaluate("presidio_generated_small")


@pytest.fixture(scope="module")
def contextual():
    data_file("pii/contextual_anonymizer/spans_clean.json")
    return evaluate("contextual_anonymizer", count=SLICE)


@pytest.fixture(scope="module")
def contextual_stock():
    data_file("pii/contextual_anonymizer/spans_clean.json")
    return evaluate("contextual_anonymizer", "stock", count=SLICE)


@pytest.mark.parametrize("family", ["email", "phone", "card"])
def test_contact_and_payment_data_is_found_in_the_generated_sentences(generated, family):
    score = generated.families[family]
    assert score.gold > 0
    assert score.recall >= 0.95, f"{family}: {score.recalled}/{score.gold} recalled"


def test_cards_and_email_addresses_are_redacted_without_waiting_for_review(generated):
    assert generated.families["card"].auto_recall == 1.0
    assert generated.families["email"].auto_recall == 1.0


def test_names_are_mostly_found_in_the_generated_sentences(generated):
    assert generated.families["person"].recall >= 0.8


@pytest.mark.parametrize(
    ("family", "floor"),
    [("person", 0.93), ("email", 0.95), ("phone", 0.95), ("address", 0.9), ("username", 0.85)],
)
def test_recall_per_family_on_realistic_texts(contextual, family, floor):
    score = contextual.families[family]
    assert score.gold > 0
    assert score.recall >= floor, f"{family}: {score.recalled}/{score.gold} recalled"


def test_overall_recall_and_f2_on_realistic_texts(contextual):
    assert contextual.recall >= 0.9
    assert contextual.f2 >= 0.88
    assert contextual.distinct_recall >= 0.85


def test_every_family_is_found_at_least_as_often_as_by_stock_presidio(contextual, contextual_stock):
    for family, score in contextual.families.items():
        if score.gold:
            stock = contextual_stock.families[family]
            assert score.recall >= stock.recall, f"{family}: {score.recall} < {stock.recall}"


def test_non_pii_ids_are_flagged_less_often_than_by_stock_presidio(contextual, contextual_stock):
    assert contextual.ids > 0
    assert contextual.ids_flagged < contextual_stock.ids_flagged
