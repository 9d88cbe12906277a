"""Detection quality on presidio_generated_small.json (../shared/data), with the matching
rule and entity mapping of bench/redaction_quality.py, which prints the full table."""

from __future__ import annotations

import pytest

from bench.redaction_quality import evaluate
from tests.governance.test_redaction_support import data_file


@pytest.fixture(scope="module")
def scores():
    data_file("pii/presidio_generated_small.json")
    return evaluate()


@pytest.mark.parametrize("label", ["EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD"])
def test_recall_of_contact_and_payment_data_is_at_least_0_9(scores, label):
    score = scores[label]
    assert score.gold > 0
    assert score.recall >= 0.9, f"{label}: {score.recalled}/{score.gold} recalled"


def test_cards_and_email_addresses_are_redacted_without_waiting_for_review(scores):
    assert scores["CREDIT_CARD"].auto_recall == 1.0
    assert scores["EMAIL_ADDRESS"].auto_recall == 1.0


def test_names_are_mostly_found(scores):
    # The small pipeline's ceiling; a larger one (MEMDESK_REDACTION_SPACY_MODEL) does better.
    assert scores["PERSON"].recall >= 0.7
