"""How Presidio's analyzer runs Memdesk's rules: the recognizers in a fixed order, each
pattern recognizer of Presidio's only on texts it can match, and the context words read
only for the results of recognizers that have some. None of it changes a result; the
rules themselves are in ``governance.redaction.recognizers``, ``name_recognizers`` and
``context_rules``.

Imported by ``governance.redaction.presidio`` only when the engine loads (it imports
Presidio).
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from presidio_analyzer import EntityRecognizer, RecognizerRegistry, RecognizerResult
from presidio_analyzer.context_aware_enhancers import LemmaContextAwareEnhancer
from presidio_analyzer.nlp_engine import NlpArtifacts

from governance.redaction.recognizers import has_digit

# Answers of ``OrderedRegistry.get_recognizers`` kept: one per policy in use.
CHOSEN_CACHE_SIZE = 64


class OrderedRegistry(RecognizerRegistry):
    """Presidio's registry, handing out the recognizers in a fixed order: a workspace's
    own first, then Presidio's, then Memdesk's, each in the order they were added.

    Presidio's returns them as a set, ordered by where the objects sit in memory, which
    changed with the process and the path the code ran from. Two recognizers that find
    the same span at the same score give one result (the analyzer keeps the first), and
    the context rules read which recognizer found a name ("Mr. Clean" is a name the title
    cue and the tagger both find; the tagger's is dropped as a word of the lexicon), so
    one text was redacted in one worker and kept in another, and bench/memory_quality.py
    counted 263 or 268 PERSON labels on FriendsQA for the same code. Presidio's come
    before Memdesk's: a name the tagger found goes through the rules for the tagger's
    names whichever cue found it too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._chosen: OrderedDict[tuple[Any, ...], list[EntityRecognizer]] = OrderedDict()

    def get_recognizers(
        self,
        language: str,
        entities: list[str] | None = None,
        all_fields: bool = False,
        ad_hoc_recognizers: list[EntityRecognizer] | None = None,
    ) -> list[EntityRecognizer]:
        # The analyzer asks once per text, with the same question for a whole batch.
        # The key holds the recognizers themselves, so adding or removing one asks
        # Presidio again.
        key = (
            language,
            tuple(entities) if entities is not None else None,
            all_fields,
            tuple(ad_hoc_recognizers or ()),
            tuple(self.recognizers),
        )
        chosen = self._chosen.get(key)
        if chosen is None:
            chosen = self._choose(language, entities, all_fields, ad_hoc_recognizers)
            self._chosen[key] = chosen
            while len(self._chosen) > CHOSEN_CACHE_SIZE:
                self._chosen.popitem(last=False)
        return list(chosen)

    def forget_choices(self) -> None:
        """Ask Presidio again on the next call (its answers were kept)."""
        self._chosen.clear()

    def _choose(
        self,
        language: str,
        entities: list[str] | None,
        all_fields: bool,
        ad_hoc_recognizers: list[EntityRecognizer] | None,
    ) -> list[EntityRecognizer]:
        found = super().get_recognizers(language, entities, all_fields, ad_hoc_recognizers)
        added = [*(ad_hoc_recognizers or ()), *self.recognizers]
        rank = {id(recognizer): index for index, recognizer in enumerate(added)}
        ad_hoc = {id(recognizer) for recognizer in ad_hoc_recognizers or ()}
        return sorted(
            found,
            key=lambda r: (
                id(r) not in ad_hoc,
                type(r).__module__.startswith("governance."),
                rank.get(id(r), len(rank)),
            ),
        )


# --- Presidio's pattern recognizers, run only on texts they can match -----------------------


def _has_at(text: str) -> bool:
    return "@" in text


def _may_hold_ip(text: str) -> bool:
    return ":" in text or ("." in text and has_digit(text))  # IPv6; IPv4


# What a text must hold for each of Presidio's pattern recognizers to find anything, with
# the SHA-256 (first 16 hex digits) of its patterns as they were read: every pattern of
# the card, bank, licence, ITIN, passport, SSN, NHS, IBAN, DEA and crypto recognizers needs
# a digit (a crypto address starts with "1", "3" or "bc1"), the e-mail one an "@", the IP
# one a ":" (IPv6) or a digit and a "." (IPv4). Most chat texts hold no digit: skipped,
# these recognizers' regexes were a third of the recognizers' time on short texts
# (bench/redaction_throughput.py). A recognizer whose patterns changed (another Presidio)
# runs on every text, as before, until its entry is read again.
PATTERN_GUARDS: dict[str, tuple[str, Callable[[str], bool]]] = {
    "CreditCardRecognizer": ("f619fa242c932c37", has_digit),
    "UsBankRecognizer": ("77ff5492baf67207", has_digit),
    "UsLicenseRecognizer": ("a5ad4472a28cc70f", has_digit),
    "UsItinRecognizer": ("1dc3ba3379d4812d", has_digit),
    "UsPassportRecognizer": ("4d39378952a1fd07", has_digit),
    "UsSsnRecognizer": ("99e2c61f6a973b04", has_digit),
    "NhsRecognizer": ("d813b701023b5188", has_digit),
    "CryptoRecognizer": ("9d9a993fd6aee894", has_digit),
    "IbanRecognizer": ("1f98697e78e08d67", has_digit),
    "MedicalLicenseRecognizer": ("8b00da21c7ca480a", has_digit),
    "EmailRecognizer": ("004723abbb67ff6c", _has_at),
    "IpRecognizer": ("2e5b4e8ccce1e531", _may_hold_ip),
}


def patterns_fingerprint(recognizer: Any) -> str:
    regexes = "\n".join(pattern.regex for pattern in recognizer.patterns or ())
    return hashlib.sha256(regexes.encode()).hexdigest()[:16]


def guard_pattern_recognizers(registry: RecognizerRegistry) -> list[str]:
    """Make Presidio's pattern recognizers of ``PATTERN_GUARDS`` skip a text that lacks
    what their patterns need (the same results, sooner); the names of those guarded.
    The guard wraps the instance's ``analyze``: the class, name and id stay Presidio's,
    which the registry's order and the context rules read."""
    guarded = []
    for recognizer in registry.recognizers:
        name = type(recognizer).__name__
        guard = PATTERN_GUARDS.get(name)
        if (
            guard is None
            or not type(recognizer).__module__.startswith("presidio_analyzer.")
            or getattr(recognizer, "deny_list", None)
            or patterns_fingerprint(recognizer) != guard[0]
        ):
            continue
        recognizer.analyze = _guarded(recognizer.analyze, guard[1])  # type: ignore[method-assign]  # the instance's, on purpose
        guarded.append(name)
    return guarded


def _guarded(
    analyze: Callable[..., list[RecognizerResult]], can_match: Callable[[str], bool]
) -> Callable[..., list[RecognizerResult]]:
    def guarded_analyze(
        text: str,
        entities: list[str],
        nlp_artifacts: NlpArtifacts | None = None,
        regex_flags: int | None = None,
    ) -> list[RecognizerResult]:
        if not can_match(text):
            return []
        return analyze(text, entities, nlp_artifacts, regex_flags)

    return guarded_analyze


class ContextEnhancer(LemmaContextAwareEnhancer):
    """Presidio's lemma context enhancer, given only the results of recognizers that
    have context words: it deep-copies every result it is given before it looks at
    them, and the others (the tagger's names, most of Memdesk's) it would only copy.
    They are passed through as they are, in their places. The token a result starts in
    is found by bisection, not by walking the text's tokens from the first for each
    result (a spaCy token object made per step: 0.5 s of a profiled batch of 1,000
    contextual texts)."""

    @staticmethod
    def _find_index_of_match_token(
        word: str, start: int, tokens: Any, tokens_indices: list[int]
    ) -> int:
        # Presidio's answer: the first token that starts at ``start`` or ends after it.
        # Token ends only grow, so it is the last token starting at or before
        # ``start`` if it ends after it, else the next one.
        at = bisect_right(tokens_indices, start) - 1
        if at >= 0 and start < tokens_indices[at] + len(tokens[at]):
            return at
        if at + 1 < len(tokens_indices):
            return at + 1
        raise ValueError("a result starts after the last token of its text")

    def enhance_using_context(
        self,
        text: str,
        raw_results: list[RecognizerResult],
        nlp_artifacts: NlpArtifacts,
        recognizers: list[EntityRecognizer],
        context: list[str] | None = None,
    ) -> list[RecognizerResult]:
        with_context = {recognizer.id for recognizer in recognizers if recognizer.context}
        places = [
            index
            for index, result in enumerate(raw_results)
            if (result.recognition_metadata or {}).get(RecognizerResult.RECOGNIZER_IDENTIFIER_KEY)
            in with_context
        ]
        if len(places) == len(raw_results):
            return super().enhance_using_context(
                text, raw_results, nlp_artifacts, recognizers, context
            )
        enhanced = super().enhance_using_context(
            text, [raw_results[index] for index in places], nlp_artifacts, recognizers, context
        )
        results = list(raw_results)
        for index, result in zip(places, enhanced, strict=True):
            results[index] = result
        return results
