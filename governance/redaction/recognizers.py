"""The recognizers Memdesk adds to Presidio's predefined ones (the context rules that
lower their scores are in ``governance.redaction.context_rules``).

Imported by ``governance.redaction.presidio`` only when the engine loads (it imports Presidio).
Every rule is general: checksums, patterns, context words and name lists, never values
of a dataset. What each one changed is measured in docs/benchmarks/2026-11-30.md
("Redaction", "Quality: both PII datasets, against stock Presidio").

Scores follow the engine's bands: at least 0.7 is applied, 0.4 to 0.7 is held for
review, under 0.4 is dropped. Presidio's context enhancer adds 0.35 to a result of a
recognizer that has context words when one of them is among the five words before it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from presidio_analyzer import AnalysisExplanation, EntityRecognizer, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts
from presidio_analyzer.predefined_recognizers import PhoneRecognizer

# (start, end, score) of what a recognizer found.
Spans = Iterable[tuple[int, int, float]]


def wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


# Types Memdesk detects beyond Presidio's (SUPPORTED_ENTITIES in governance.redaction.presidio).
ADDRESS = "ADDRESS"
USERNAME = "USERNAME"
ACCOUNT_NUMBER = "ACCOUNT_NUMBER"
PERSONAL_ID = "PERSONAL_ID"

# Seven digits, each at most three separators from the next: the shortest phone number.
PHONE_CANDIDATE = re.compile(r"\d(?:[ ().+/-]{0,3}\d){6}")
# spaCy counts "call" as a stop word, and Presidio's context matching skips stop words,
# so the phone recognizer's own "call" could never raise a score. These words can.
PHONE_CONTEXT = [
    "phone",
    "telephone",
    "cell",
    "mobile",
    "fax",
    "tel",
    "desk",
    "office",
    "number",
    "contact",
    "text",
    "reach",
    "whatsapp",
]
# python-phonenumbers regions asked about: Presidio's eight and the other countries of
# Europe, Oceania and the Americas whose numbers support tickets carry most. Each region
# is one more scan of the text (guarded below), so the list stays short.
PHONE_REGIONS = ("US", "GB", "DE", "FR", "IL", "IN", "CA", "BR", "AU", "NL", "IE", "ES", "IT")

# Words that name a value as a record of the business, not of a person: a number after
# one of them is an order, ticket or case id, not a phone, card or bank number.
ID_WORDS = wordset(
    """order orders ticket tickets case claim policy invoice inv tracking reference ref
    transaction txn confirmation booking reservation shipment parcel package receipt
    serial sku model item product part version build error code request incident rma
    quote po pnr flight batch lot job task issue bug"""
)


# Words, and the words just before a position on its line: what the recognizers and the
# context rules read a value's cue from.
WORDS = re.compile(r"[^\W\d_]+|#")
PHONE_WORDS = wordset(
    "phone telephone tel cell mobile fax call text number contact reach whatsapp desk office"
)


def words_before(text: str, start: int, count: int = 4) -> list[str]:
    line_start = text.rfind("\n", 0, start) + 1
    return [w.lower() for w in WORDS.findall(text[max(line_start, start - 48) : start])][-count:]


def _result(
    recognizer: EntityRecognizer, entity: str, start: int, end: int, score: float
) -> RecognizerResult:
    # Named by the class: mypy cannot infer the type of the ``name`` attribute that
    # Presidio's EntityRecognizer sets in its __init__.
    name = type(recognizer).__name__
    return RecognizerResult(
        entity,
        start,
        end,
        score,
        # Presidio's context enhancer records the word that raised a score here.
        analysis_explanation=AnalysisExplanation(recognizer=name, original_score=score),
        recognition_metadata={
            RecognizerResult.RECOGNIZER_NAME_KEY: name,
            RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: recognizer.id,
        },
    )


class _Recognizer(EntityRecognizer):
    """A recognizer that needs no loading; subclasses implement ``find``."""

    ENTITY = ""
    CONTEXT: Sequence[str] = ()

    def __init__(self) -> None:
        super().__init__(
            supported_entities=[self.ENTITY],
            name=type(self).__name__,
            context=list(self.CONTEXT) or None,
        )

    def load(self) -> None:
        pass

    def analyze(
        self, text: str, entities: list[str], nlp_artifacts: NlpArtifacts | None = None
    ) -> list[RecognizerResult]:
        return [
            _result(self, self.ENTITY, start, end, score)
            for start, end, score in self.find(text, nlp_artifacts)
        ]

    def find(self, text: str, nlp_artifacts: NlpArtifacts | None) -> Spans:
        """(start, end, score) of each value in ``text``: what each recognizer below
        defines. The base class has no values of its own to find."""
        raise NotImplementedError(f"{type(self).__name__} must define find()")


# --- phone numbers ---------------------------------------------------------------------------


class GuardedPhoneRecognizer(PhoneRecognizer):
    """Presidio's phone recognizer (python-phonenumbers) on more regions, run only on
    texts that can hold a phone number: it scans the text once per region, the costliest
    recognizer by far, and a text without seven digits in a row, give or take separators,
    has nothing for it to find (skipping it saved 27% of the recognizers' time)."""

    def __init__(self) -> None:
        super().__init__(context=PHONE_CONTEXT, supported_regions=PHONE_REGIONS)

    def analyze(self, text, entities, nlp_artifacts=None):  # type: ignore[no-untyped-def]  # Presidio types the None default NlpArtifacts
        if not PHONE_CANDIDATE.search(text):
            return []
        return super().analyze(text, entities, nlp_artifacts)


_DIGIT = re.compile(r"\d")


def has_digit(text: str) -> bool:
    return _DIGIT.search(text) is not None


class InternationalPhoneRecognizer(_Recognizer):
    """Numbers written for regions python-phonenumbers is not asked about, or not valid
    there ("(07) 5331 0577", "69 987 88 37", "001-420-335-7509x38548", "+4455667788"):
    digit groups with separators, or a plus and 8 to 15 digits; 7 to 15 digits in all,
    not a date or an IP address. Uncertain alone (the review band); context raises it."""

    ENTITY = "PHONE_NUMBER"
    CONTEXT = PHONE_CONTEXT
    PATTERN = re.compile(
        r"(?<![\w+#/.-])(?:"
        r"(?:(?:\+|00)\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]\d{2,4}){1,4}"
        r"|\(\d{2,4}\)[ ]?\d{3,4}(?:[ .-]\d{3,4})?"
        r"|\+\d{8,15}"
        r")(?:[ ]?(?:x|ext\.?)[ ]?\d{1,6})?(?![\w]|[.,-]\d)"
    )
    DATE_OR_IP = re.compile(
        r"^\d{4}-\d{1,2}-\d{1,2}$|^\d{1,2}[./-]\d{1,2}[./-]\d{2,4}$|^\d{1,3}(?:\.\d{1,3}){3}$"
    )
    SCORE = 0.4

    def find(self, text: str, nlp_artifacts: NlpArtifacts | None) -> Spans:
        if not PHONE_CANDIDATE.search(text):
            return
        for match in self.PATTERN.finditer(text):
            value = match.group(0)
            digits = sum(ch.isdigit() for ch in re.split(r"[xe]", value)[0])
            if 7 <= digits <= 15 and not self.DATE_OR_IP.match(value):
                yield match.start(), match.end(), self.SCORE


# --- cards, accounts, ids --------------------------------------------------------------------


def luhn_valid(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


class LuhnCardRecognizer(_Recognizer):
    """Card numbers of 12 to 19 digits, written together or in groups separated by
    spaces or dashes, that pass the Luhn check. Presidio's own recognizer wants the
    issuers' prefixes and groups of four; this one also takes the rest, uncertain unless
    the prefix is an issuer's (2 to 6) or a card word is near. A Luhn check passes one
    random number in ten, so an order or ticket word before it lowers it (``rescore``)."""

    ENTITY = "CREDIT_CARD"
    CONTEXT = [
        "card",
        "credit",
        "debit",
        "visa",
        "mastercard",
        "amex",
        "discover",
        "maestro",
        "cc",
        "pan",
    ]
    PATTERN = re.compile(r"(?<![\w.,/-])\d(?:[ -]?\d){11,18}(?![\w-]|[.,/]\d)")

    def find(self, text: str, nlp_artifacts: NlpArtifacts | None) -> Spans:
        for match in self.PATTERN.finditer(text):
            value = match.group(0)
            digits = re.sub(r"\D", "", value)
            groups = re.split(r"[ -]", value)
            if len(groups) > 1 and min(len(g) for g in groups[:-1]) < 3:
                continue  # "12 34 56 ...": a list of numbers, not one number
            if len(set(digits)) == 1 or not luhn_valid(digits):
                continue
            issuer = digits[0] in "23456" and 13 <= len(digits) <= 19
            yield match.start(), match.end(), 0.9 if issuer else 0.5


_NUMBER = r"[A-Z]{0,4}[-#]?\d[\d -]{2,24}\d[A-Z]?|\d{4}"
_FILLER = (
    r"(?i:\s*(?:(?:number|no|num|nr|id|is|was|ending in|ending with|ending|ends in|of|on file)"
    r"(?![a-z])\.?|[#:=-]))*"
)


class AccountNumberRecognizer(_Recognizer):
    """A number named as an account: "Account Number: 1234567890", "acct # 555-666-777",
    "the account ending in 1234". The words make it certain; the digits alone would not."""

    ENTITY = ACCOUNT_NUMBER
    PATTERN = re.compile(
        rf"\b(?i:(?:bank |checking |savings |sender |receiver |beneficiary )?"
        rf"(?:account|acct|a/c|acc)){_FILLER}\s*(?P<value>{_NUMBER})(?![\w-])"
    )
    # "What's your account number?" ... "Sure, it's 123456789.": the answer to a question
    # about the account, when no other kind of number was asked about since.
    ANSWER = re.compile(
        r"(?i:\b(?:it's|it’s|it is|its|sure|yes|here it is|that's|that is))[,:!]?\s*"
        r"(?P<value>\d[\d -]{4,24}\d)(?![\w-])"
    )
    ASKED = re.compile(r"(?i:\b(?:account|acct)\b)")
    SCORE = 0.85

    def find(self, text: str, nlp_artifacts: NlpArtifacts | None) -> Spans:
        for match in self.PATTERN.finditer(text):
            yield match.start("value"), match.end("value"), self.SCORE
        for match in self.ANSWER.finditer(text):
            before = text[max(0, match.start() - 160) : match.start()]
            asked = list(self.ASKED.finditer(before))
            if not asked:
                continue
            since = WORDS.findall(before[asked[-1].end() :].lower())
            if not any(word in ID_WORDS or word in PHONE_WORDS - {"number"} for word in since):
                yield match.start("value"), match.end("value"), 0.6


class PersonalIdRecognizer(_Recognizer):
    """A number that identifies a person, named by the words before it: national ids
    (PESEL, NIP, SSN, national insurance, tax id, passport, driver's licence) and the
    ids an organisation gives a person (patient, student, employee, member, customer)."""

    ENTITY = PERSONAL_ID
    PATTERN = re.compile(
        r"\b(?i:pesel|nip|ssn|social security|national id|national insurance|nino|tax id|"
        r"tax identification|taxpayer id|tin|passport|driver'?s? licen[cs]e|licen[cs]e|"
        r"(?:student|patient|employee|member(?:ship)?|customer|staff|personnel) (?:id|number)|"
        r"personal id|id card|identity card|"
        rf"national identity|health id|insurance id|medical record|mrn){_FILLER}\s*"
        r"(?P<value>[A-Z]{0,3}\d[\d -]{3,20}\d[A-Z]?)(?![\w-])"
    )
    # "Patient: Michael Brown, ID: 123456": a bare "ID:" in a record about a person.
    RECORD_ID = re.compile(
        r"\bID(?:\s*(?:#|No\.?|number))?\s*[:#]\s*(?P<value>[A-Z]{0,3}\d{4,12})(?![\w-])"
    )
    RECORD_OF_PERSON = re.compile(
        r"(?i:\b(?:patient|student|employee|member|applicant|insured|client|customer|"
        r"holder|name|candidate|resident|policyholder|beneficiary)\b)"
    )
    SCORE = 0.85

    def find(self, text: str, nlp_artifacts: NlpArtifacts | None) -> Spans:
        for match in self.PATTERN.finditer(text):
            yield match.start("value"), match.end("value"), self.SCORE
        for match in self.RECORD_ID.finditer(text):
            before = text[max(0, match.start() - 80) : match.start()]
            if self.RECORD_OF_PERSON.search(before) and not ID_WORDS.intersection(
                words_before(text, match.start(), 2)
            ):
                yield match.start("value"), match.end("value"), 0.7


class UsernameRecognizer(_Recognizer):
    """A handle named as one ("username: jdoe42", "my handle is @dana_w", "user name
    dana.whitfield", "my account ID is aphoenix939"), certain; an @handle in running text
    (not an e-mail address), uncertain. An account id of digits alone is an account
    number's."""

    ENTITY = USERNAME
    NAMED = re.compile(
        r"\b(?i:user\s?name|user\s?id|login(?: name| id)?|handle|screen\s?name|gamertag|"
        r"nick(?:name)?|account name|(?P<account>account\s?id))"
        r"(?P<colon>\s*[:=])?(?i:\s*(?:is|was)(?![\w'’]))?"
        r"\s*[\"'“‘]?(?P<value>@?[A-Za-z0-9][A-Za-z0-9._-]{1,31}[A-Za-z0-9_])(?![\w@])"
    )
    # A value without a colon before it must look like a handle, not a word: "login
    # attempts", "my username is incorrect".
    HANDLE = re.compile(r"[@\d_.]|[a-z][A-Z]")
    MENTION = re.compile(r"(?<![\w.@/])@(?P<value>[A-Za-z_][A-Za-z0-9_.]{1,30}[A-Za-z0-9_])")
    NOT_HANDLES = frozenset({"is", "was", "and", "the", "for", "please", "here"})

    def find(self, text: str, nlp_artifacts: NlpArtifacts | None) -> Spans:
        for match in self.NAMED.finditer(text):
            value = match.group("value")
            if value.lower() in self.NOT_HANDLES or (match.group("account") and value.isdigit()):
                continue
            if match.group("colon") or self.HANDLE.search(value):
                yield match.start("value"), match.end("value"), 0.85
        for match in self.MENTION.finditer(text):
            yield match.start(), match.end(), 0.6


# --- street addresses ------------------------------------------------------------------------

# A word of a street's or a place's name. Bounded: an unbounded word run searched from
# every letter of a long line ("-x-x-x...") made the search quadratic in the line.
_WORD = r"[^\W\d_][\w'’.-]{0,40}"
_STREET_TYPES = (
    "street|st|avenue|ave|av|road|rd|boulevard|blvd|lane|ln|drive|dr|court|ct|way|place|pl|"
    "terrace|ter|circle|cir|parkway|pkwy|highway|hwy|square|sq|trail|trl|alley|row|crescent|"
    "cres|close|walk|plaza|loop|path|pike|route|rte|broadway|gardens|grove|heights|mews|"
    "quay|wharf|esplanade|promenade"
)
_FOREIGN_SUFFIXES = (
    "straat|strasse|straße|str|gasse|weg|laan|plein|gracht|allee|platz|vej|gade|gatan|"
    "vägen|gränd|katu|tie|utca|útja|ulica|kade|dijk|markt|damm|ufer|steig|ring"
)
_FOREIGN_PREFIXES = (
    "rue|avenue|boulevard|chemin|calle|avenida|carrer|paseo|rua|via|viale|piazza|corso|"
    "plac|ulica|ul\\.|aleja|al\\."
)
_UNIT = r"(?i:apt|apartment|suite|ste|unit|floor|fl|room|rm|bldg|building|#)\.?\s?#?\s?[\w-]{1,6}"
_PLACE = r"[A-Z][\w'’.-]{0,40}(?:[ ][A-Z][\w'’.-]{0,40}){0,2}"
_POSTCODE = r"\d{5}(?:-\d{4})?|[A-Z]\d[A-Z] ?\d[A-Z]\d|[A-Z]{1,2}\d[A-Z\d]? ?\d[A-Z]{2}|\d{4}"
# After a street: a unit, then a town, then a state or region, then a postcode.
_TAIL = (
    rf"(?:,?[ ]{_UNIT})?(?:,[ ]?{_PLACE})?(?:,[ ]?(?:[A-Z]{{2}}|{_PLACE}))?"
    rf"(?:,?[ ](?:{_POSTCODE}))?(?![\w])"
)


class StreetAddressRecognizer(_Recognizer):
    """Street addresses: a house number, street words and a street type ("123 Elm St",
    "42 rue des Lilas"); a street type of another language with its number ("Nassaustraat
    123"); each with what follows it in an address (unit, town, state, postcode). The
    ``usaddress`` parser (a CRF trained on US addresses) is a second reader: the spans it
    tags as number, street and street type or postcode are kept when they look like an
    address. Measured against ``pyap2``, which found half as many on the same data at six
    times the cost (docs/benchmarks/2026-11-30.md, "Quality: both PII datasets, against
    stock Presidio")."""

    ENTITY = ADDRESS
    CONTEXT = ["address", "live", "reside", "locate", "ship", "deliver", "move", "street"]
    NUMBERED = re.compile(
        rf"\b\d{{1,6}}[A-Za-z]?(?:[ -]\d{{1,6}})?[ ]+(?:[NSEW]\.?[ ]+)?(?:{_WORD}[ ]+){{0,4}}?"
        rf"(?i:{_STREET_TYPES})\b\.?{_TAIL}"
    )
    FOREIGN = re.compile(
        rf"\b(?:{_WORD}[ ]+){{0,2}}?{_WORD}(?i:{_FOREIGN_SUFFIXES})\.?[ ]+\d{{1,5}}[A-Za-z]?\b"
        rf"{_TAIL}"
        rf"|\b(?i:{_FOREIGN_PREFIXES})[ ]+(?:(?:de|des|du|la|le|del|della|di|da|dos|das)[ ]+)?"
        rf"[A-Z][\w'’.-]{{0,40}}(?:[ ]+[A-Z][\w'’.-]{{0,40}}){{0,3}}(?:[ ]+\d{{1,5}}[A-Za-z]?)?"
        rf"{_TAIL}"
    )
    # "the new café on Oak Street", "on 5th Avenue": a named street without a number.
    NAMED = re.compile(
        r"\b(?:on|at|off|near)[ ]+(?P<value>(?:\d{1,3}(?:st|nd|rd|th)|[A-Z][a-z]+)"
        r"(?:[ ][A-Z][a-z]+)?[ ](?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Drive|"
        r"Way|Place|Terrace|Parkway|Square|Broadway)\b\.?)"
    )
    # "his address: 46 velký průhon 426, opocnice", "lives at 87 Jakobi 69, Laane": what
    # follows an address cue and starts with a house number, to the end of the clause.
    CUED = re.compile(
        r"(?i:\baddress(?:es)?(?:\s+is|:)|\b(?:lives?|lived|living|resides?|located|based)"
        r"\s+(?:at|on)|\b(?:return|ship|deliver|send|mail|moved)(?:\s+it)?\s+to|"
        r"\b(?:it|that)\s+is)\s+(?P<value>\d{1,6}[^\W\d_]?(?:[ ,]+\d{1,6})?[ ]+[^\W\d_]"
        r"(?:(?![ ](?i:for|in case|if|because|and|but|when|please|thanks)\b)[^\n.!?;:]){1,60}"
        r"(?:\n[ \t]*,?[ \t]*[^\W_][^\n.!?;:]{0,30}){0,4})"
    )
    # A postal block: a line that starts with a house number and street words, then short
    # lines down to one that ends with a postcode ("11 Školní 939\n Apt. 827\n Kaplice 1\n
    # Iceland 80392").
    BLOCK = re.compile(
        r"(?m:^[^\S\n]*(?:[^\w\s]+[^\S\n]+)?(?P<value>\d{1,6}[^\S\n]+(?:\d{1,6}[^\S\n]+)?"
        r"[^\W\d_][^\n]{1,45}(?:\n+[^\S\n]*(?:[^\w\s]+[^\S\n]+)?[^\n]{1,40}){0,4}?"
        r"[^\W\d_][^\n]{0,30}[ ]\d{4,6})$)"
    )
    DIGIT_WORD = re.compile(r"\d[ ]+[^\W\d_]")
    # Words no street's name holds: times of day, words of the sentence, and what counts
    # a distance, a duration, a share or a recipe's measure ("45 minutes each way", "3
    # miles per day", "1 1/2 oz (45 ml) Gin").
    NOT_STREET = re.compile(
        r"(?i)\b(?:am|pm|a\.m|p\.m|via|at|and|or|the|to|in|on|for|with|my|your|each|per|"
        r"every|minutes|hours|days|weeks|months|years|miles|times|oz|ml|cups|tbsp|tsp|lbs)\b"
    )
    HOUSE_NUMBER = re.compile(r"^\d{1,6}(?:-\d{1,6})?[A-Za-z]?$")
    SENTENCE_BREAK = re.compile(r"[.!?:]\s+\S|\n\s*\n")
    PHONE_LIKE = re.compile(r"\d{3}\)?[ .-]\d{3}[ .-]?\d{4}|\d{7}")

    # What FOREIGN cannot match without: a street type of another language at the end of
    # a word right before a number, or a street word of another language before a space.
    # Looked for first: FOREIGN's word runs cost more than every other pattern here
    # together (0.10 s per 1,000 contextual texts, bench/redaction_throughput.py).
    WORD_BEFORE_NUMBER = re.compile(r"([^\W\d_]+)\.?[ ]+\d")
    FOREIGN_SUFFIX = re.compile(rf"(?i:{_FOREIGN_SUFFIXES})$")
    FOREIGN_PREFIX = re.compile(rf"\b(?i:{_FOREIGN_PREFIXES})[ ]")

    def _foreign_possible(self, text: str) -> bool:
        return bool(self.FOREIGN_PREFIX.search(text)) or any(
            self.FOREIGN_SUFFIX.search(match[1]) for match in self.WORD_BEFORE_NUMBER.finditer(text)
        )

    def find(self, text: str, nlp_artifacts: NlpArtifacts | None) -> Spans:
        # NUMBERED, CUED and BLOCK start with a house number, the parser's read with one
        # before a word (DIGIT_WORD): a text without a digit is searched for the rest only.
        digits = has_digit(text)
        for match in self.NUMBERED.finditer(text) if digits else ():
            street = match.group(0)
            if self.NOT_STREET.search(street.split(",")[0]):
                continue  # "7 PM at the Italian place", "2 of us on the road"
            yield match.start(), match.end(), 0.85 if "," in street else 0.75
        for match in self.FOREIGN.finditer(text) if self._foreign_possible(text) else ():
            yield match.start(), match.end(), 0.6
        for match in self.NAMED.finditer(text):
            yield match.start("value"), match.end("value"), 0.6
        if not digits:
            return
        for match in self.CUED.finditer(text):
            value = match.group("value").rstrip(" ,\n")
            if not self.NOT_STREET.match(value.split()[1]):
                yield match.start("value"), match.start("value") + len(value), 0.75
        for match in self.BLOCK.finditer(text):
            yield match.start("value"), match.end("value"), 0.75
        if self.DIGIT_WORD.search(text):
            yield from self._parsed(text)

    def _parsed(self, text: str) -> Iterable[tuple[int, int, float]]:
        import usaddress

        position = 0
        run: list[tuple[int, int, str]] = []
        for token, label in usaddress.parse(text):
            start = text.find(token, position)
            if start < 0:
                continue
            position = start + len(token)
            if label in ("Recipient", "NotAddress", "LandmarkName", "USPSBoxType"):
                yield from self._parsed_span(text, run)
                run = []
            else:
                run.append((start, position, label))
        yield from self._parsed_span(text, run)

    def _parsed_span(
        self, text: str, run: list[tuple[int, int, str]]
    ) -> Iterable[tuple[int, int, float]]:
        numbers = [
            index
            for index, (start, end, label) in enumerate(run)
            if label == "AddressNumber" and self.HOUSE_NUMBER.match(text[start:end])
        ]
        if not numbers:
            return
        run = run[numbers[0] :]
        labels = {label for _, _, label in run}
        if "StreetName" not in labels or not labels & {"StreetNamePostType", "ZipCode"}:
            return
        start = run[0][0]
        value = text[start : run[-1][1]].rstrip(",.;:")
        if (
            len(value) > 90
            or "@" in value
            or self.SENTENCE_BREAK.search(value)
            or self.PHONE_LIKE.search(value)
            or self.NOT_STREET.search(" ".join(value.split()[:3]))
        ):
            return  # a sentence, a phone number or a time the parser read as an address
        yield start, start + len(value), 0.55


class PostcodeRecognizer(_Recognizer):
    """A postcode named as one ("ZIP: 11164", "postal code SW1A 1AA")."""

    ENTITY = ADDRESS
    PATTERN = re.compile(
        rf"\b(?i:zip(?: ?code)?|post(?:al)? ?code|postcode)(?:\s*(?:is|:|-))?\s*"
        rf"(?P<value>{_POSTCODE})(?![\w])"
    )

    def find(self, text: str, nlp_artifacts: NlpArtifacts | None) -> Spans:
        for match in self.PATTERN.finditer(text):
            yield match.start("value"), match.end("value"), 0.85


# --- places ----------------------------------------------------------------------------------

# The small words inside a town's name: "Frankfurt am Main", "Vila Nova de Cerveira",
# "Ústí nad Labem", "Stratford upon Avon".
_PLACE_PARTICLES = wordset(
    "am an im nad pod de del della di da do dos das du la le les en sur upon op aan den der y"
)
# Words of a journey: "from" after one of them comes before a place ("arrived this
# morning from Niger", "got back from Gozo").
TRAVEL_WORDS = wordset(
    """arrived arrives arriving flew flies flying traveled travelled traveling travelling
    returned returning returns back drove emigrated immigrated relocated hail hails hailing
    originally"""
)
# Kinds of venue a place is named by, before or after its name ("Café Central",
# "Blue Door Bistro", "Hotel Adlon"): a name with one of them is a place, not a person.
VENUE_WORDS = wordset(
    "café cafe restaurant bistro brasserie trattoria pizzeria diner tavern hotel motel"
)
_VENUE = "|".join(sorted(word.capitalize() for word in VENUE_WORDS))
# Words of the landscape or of a site that end a landmark's name ("Blue Mountain", "Pearl
# Harbor Memorial", "Kegon Falls").
LANDMARK_WORDS = wordset(
    """Mountain Mountains Lake River Beach Park Canyon Valley Falls Island Islands Bay Harbor
    Harbour Memorial Monument Bridge Square Gardens Forest Hills Peak Coast Cathedral Castle
    Palace Stadium Airport Glacier Lagoon Reservoir Pier Marina"""
)
# What a meeting's "Where:" holds when it is no place.
_NO_PLACE = wordset(
    "online remote virtual hybrid tbd tba tbc zoom teams skype webex meet phone video call "
    "home various unknown none"
)
_POSSESSIVE_AFTER = re.compile(r"['’]s?\b")
_POSSESSIVE_END = re.compile(r"['’]s?$")
_PLACE_NAME = r"(?P<value>[^\W\d_][\w'’.-]{0,40}(?:[ ][^\W\d_][\w'’.-]{0,40}){0,5})"


class PlaceCueRecognizer(_Recognizer):
    """A place named where a place goes, which the small pipeline often calls an
    organisation, a nationality or nothing: a form's place field ("Where: Kouklia
    Country Club", "Location: Harborview Lodge"), where someone lives or comes from
    ("grew up in Ústí nad Labem", "born in ZLIN", "lives in Kohtla-Järve"), where a
    journey started ("arrived from Niger", "got back from Gozo"), a landmark named by its
    kind ("Blue Mountain", "Pearl Harbor Memorial", "Lake Bled", "Café Central") and the
    town a university is named after or its campus ("University of Coimbra",
    "University of Illinois, Urbana-Champaign").

    The name is its capitalised words and the particles between them. After a field it
    is certain unless it says the meeting is not in a place ("Where: Online"). After the
    other cues a name made of words of the lexicon must be one the tagger reads as a
    place or a nationality ("back from Legal", "based in Engineering" name departments),
    a listed first name the tagger does not call a place is a person's, and so is a name
    with a possessive ("lived in the Project Manager's house")."""

    ENTITY = "LOCATION"
    FIELD = re.compile(
        r"(?im:^[ \t]*(?:where|location|venue|meeting place|place|city|town|country|"
        rf"hometown|destination)[ \t]*:[ \t]*){_PLACE_NAME}"
    )
    CUED = re.compile(
        r"\b(?i:(?:grew up|born|raised|lives?|lived|living|resides?|resided|residing|based|"
        r"settled)[ ]+in"
        rf"|(?:{'|'.join(sorted(TRAVEL_WORDS))})"
        r"(?:[ ]+(?:in|home|over|here|down|up|back|today|yesterday|tonight|early|late|"
        r"(?:this|last)[ ](?:morning|afternoon|evening|night|week|month)))*[ ]+from)"
        rf"[ ]+(?:the[ ]+)?{_PLACE_NAME}"
    )
    # Capitalised words before a word of the landscape or of a site ("Blue Mountain",
    # "Pearl Harbor Memorial"), or after one ("Lake Bled", "Mount Kenya"); the town of
    # a university ("University of Coimbra"), read as the other cues' places are.
    LANDMARK = re.compile(
        r"\b(?P<value>(?:[A-Z][\w'’-]*[ ]){1,3}"
        rf"(?:{'|'.join(sorted(LANDMARK_WORDS))}|{_VENUE})"
        rf"|(?:Lake|Mount|Mt\.|Cape|{_VENUE})[ ][A-Z][\w'’-]*(?:[ ][A-Z][\w'’-]*)?)\b"
        r"|\b(?:University|College) of (?P<town>[A-Z][\w'’-]*(?:[ ][A-Z][\w'’-]*)?)"
        r"(?:,[ ](?P<campus>[A-Z][\w'’]*(?:[-–][A-Z][\w'’]*)?))?\b"
    )
    SCORE = 0.75

    def find(self, text: str, nlp_artifacts: NlpArtifacts | None) -> Spans:
        for match in self.FIELD.finditer(text):
            span = self._name(text, match.start("value"), match.group("value"))
            if span is not None and text[span[0] : span[1]].split()[0].lower() not in _NO_PLACE:
                yield span[0], span[1], self.SCORE
        for match in self.CUED.finditer(text):
            span = self._name(text, match.start("value"), match.group("value"))
            if (
                span is not None
                and not _POSSESSIVE_AFTER.match(text, span[1])  # "lived in Maria's house"
                and self._reads_as_place(nlp_artifacts, *span)
            ):
                yield span[0], span[1], self.SCORE
        for match in self.LANDMARK.finditer(text):
            if match.group("town"):
                span = self._name(text, match.start("town"), match.group("town"))
                if span is not None and self._reads_as_place(nlp_artifacts, *span):
                    yield span[0], span[1], self.SCORE
                if match.group("campus"):  # "University of Illinois, Urbana-Champaign"
                    yield match.start("campus"), match.end("campus"), self.SCORE
                continue
            span = self._landmark(match.start("value"), match.group("value"))
            if span is not None:
                yield span[0], span[1], self.SCORE

    @staticmethod
    def _landmark(start: int, value: str) -> tuple[int, int] | None:
        """The landmark's name without an article or a greeting before it; None for a
        person's name ("Sarah Hill", "Jessica Park") or a title ("The One at the Beach")."""
        from spacy.lang.en.stop_words import STOP_WORDS

        from governance.redaction.name_recognizers import NOT_NAMES, name_lists

        words = value.split(" ")
        while len(words) > 1 and (words[0].lower() in NOT_NAMES or words[0] == "The"):
            start += len(words[0]) + 1
            words = words[1:]
        first_names, _ = name_lists()
        if (
            len(words) < 2
            or (len(words) == 2 and words[0] in first_names)
            or any(word.lower() in STOP_WORDS for word in words)
        ):
            return None
        return start, start + len(" ".join(words))

    @staticmethod
    def _name(text: str, start: int, words: str) -> tuple[int, int] | None:
        """The capitalised words at ``start`` and the particles between them."""
        kept: list[str] = []
        pending: list[str] = []
        for word in words.split(" "):
            bare = _POSSESSIVE_END.sub("", word.rstrip(".,;:!?"))
            if bare[:1].isupper():
                kept += pending + [bare]
                pending = []
                if bare != word:
                    break  # punctuation or a possessive ends the name
            elif kept and word in _PLACE_PARTICLES:
                pending.append(word)
            else:
                break
        if not kept:
            return None
        value = " ".join(kept)
        return start, start + len(value)

    @staticmethod
    def _reads_as_place(nlp_artifacts: NlpArtifacts | None, start: int, end: int) -> bool:
        # name_recognizers imports this module: its lists are read when a text is.
        from governance.redaction.name_recognizers import NOT_NAMES, common_words, name_lists

        if nlp_artifacts is None or nlp_artifacts.tokens is None:
            return False
        tokens = [t for t in nlp_artifacts.tokens if start <= t.idx < end and t.is_alpha]
        if not tokens or tokens[0].lower_ in NOT_NAMES:
            return False
        first_names, _ = name_lists()
        label = tokens[0].ent_type_
        if tokens[0].text in first_names and label not in ("GPE", "LOC", "FAC"):
            return False
        common = common_words(nlp_artifacts)
        if all(t.lower_ in common for t in tokens if t.text not in _PLACE_PARTICLES):
            return label in ("GPE", "LOC", "FAC", "NORP")
        return True


def recognizers() -> list[EntityRecognizer]:
    """Memdesk's recognizers of numbers, handles, addresses and places, added to Presidio's
    predefined ones (PhoneRecognizer is replaced by the guarded one); those of names are
    in ``governance.redaction.name_recognizers``."""
    return [
        GuardedPhoneRecognizer(),
        InternationalPhoneRecognizer(),
        LuhnCardRecognizer(),
        AccountNumberRecognizer(),
        PersonalIdRecognizer(),
        UsernameRecognizer(),
        StreetAddressRecognizer(),
        PostcodeRecognizer(),
        PlaceCueRecognizer(),
    ]
