"""The context rules that lower a score where the words around a value say it is
something else (a record's id taken for a phone number, a field label or a title taken
for a name, a subject of study or an id's name taken for a place), and that set the
bounds of a name: "I'm Maria" names "Maria", "Murakami's" names "Murakami", and a first
name beside a word tagged as a place is one name ("Alessandro Phoenix").

Imported by ``governance.redaction.presidio`` only when the engine loads (it imports
Presidio). What each rule changed is measured in docs/benchmarks/2026-11-30.md
("Redaction", "Quality: both PII datasets, against stock Presidio") and
docs/benchmarks/2026-12-05-issue24-detection.md.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from typing import Any

from presidio_analyzer import RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts
from spacy.lang.en.stop_words import STOP_WORDS

from governance.redaction.name_recognizers import (
    INTERJECTIONS,
    NOT_NAMES,
    RELATIVES,
    THING_LABELS,
    common_words,
    in_lexicon,
    name_lists,
    thing_word,
)
from governance.redaction.pseudonyms import HONORIFICS
from governance.redaction.recognizers import (
    ACCOUNT_NUMBER,
    ADDRESS,
    ID_WORDS,
    LANDMARK_WORDS,
    PHONE_WORDS,
    TRAVEL_WORDS,
    VENUE_WORDS,
    WORDS,
    AccountNumberRecognizer,
    PersonalIdRecognizer,
    words_before,
    wordset,
)

# Types whose value is a bare number that an id word before it explains away.
_NUMBER_TYPES = frozenset(
    {
        "PHONE_NUMBER",
        "CREDIT_CARD",
        "US_BANK_NUMBER",
        "UK_NHS",
        "US_DRIVER_LICENSE",
        "US_PASSPORT",
        "US_ITIN",
        "US_SSN",
        "MEDICAL_LICENSE",
        ACCOUNT_NUMBER,
    }
)
# Words that name the value itself: nearer than an id word, they win ("policy account
# 1234567890", "order questions? call 555-123-4567").
_VALUE_WORDS = PHONE_WORDS | wordset("account acct card iban passport licence license ssn")
_PRODUCT_WORDS = wordset(
    "order product item model sku plan version ticket case question step option"
)
_PRODUCT_GAP = re.compile(r"[^\W\d_][ \t]*[:#-]?[ \t]*$")
_NHS_WORDS = wordset("nhs health patient")
# Words that say the next word names someone: a relation, or naming itself.
_RELATION_WORDS = wordset(
    """kid kids son daughter child baby wife husband partner boyfriend girlfriend fiance
    fiancee brother sister mom mum mother dad father grandma grandpa grandson
    granddaughter uncle aunt cousin nephew niece friend buddy colleague coworker boss
    manager roommate neighbor neighbour named called dear"""
)

# A pet's name, after whose animal it is or what it is called ("my cat Luna", "User's
# horse, Luna", "a dog named Max", "my cat's name is Luna"): not a person's. Not "the cat
# Maria adopted".
_PETS = (
    r"(?:cat|kitten|kitty|dog|puppy|pup|horse|pony|rabbit|bunny|hamster|parrot|budgie|bird|"
    r"fish|goldfish|turtle|tortoise|snake|lizard|gecko|ferret|guinea[ ]pig|pet)s?"
)
_PET_BEFORE = re.compile(
    rf"(?:\b(?i:my|our|your|his|her|their)|['’]s)[ ]+(?:(?i:new|little|old)[ ]+)?"
    rf"(?i:{_PETS}),?[ ]+$|\b(?i:{_PETS})[ ]+(?:named|called)[ ]+$"
    rf"|\b(?i:{_PETS})['’]s[ ]+name[ ]+(?:is|was)[ ]+$"
)

_CODE = re.compile(r"[^\W\d_]\d|\d[^\W\d_]")
_ABBREVIATION = re.compile(r"^(?:[A-Za-z]\.){2,}$")
_ACRONYM = re.compile(r"^[A-Z]{2,5}$")


def _known_name(value: str) -> bool:
    first_names, surnames = name_lists()
    return any(word in first_names or word in surnames for word in value.split())


# A programmer's name for a field ("order_id", "customerName" stays a possible name):
# lower case words joined by underscores. No person is written so; tool output's JSON
# keys are, and the tagger takes some of them for names.
_IDENTIFIER = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")

# Capitalised words linked by a lowercase "the", "of the" or "on the": the title of a
# work or the name of a thing ("Kafka on the Shore", "Walk the Moon", "Lord of the
# Rings"). No person's name holds one. (Not "at the", "in the": "Maria at the Hilton".)
_TITLE_LINK = r"(?:[ ](?:of|on))?[ ]the[ ]"
_TITLE_AFTER = re.compile(rf"{_TITLE_LINK}[A-Z][a-z]")
_TITLE_BEFORE = re.compile(rf"(?<![\w'’-])(?P<word>[A-Z][a-z][\w'’-]*){_TITLE_LINK}$")
_NO_TITLE_WORDS = frozenset(STOP_WORDS) | NOT_NAMES
# The small pipeline calls brands and products facilities ("moisturizer from La Mer",
# "the Citi Double Cash Card"); a facility is a place where the words before it put
# something there ("at the Riverside Park", "near Tokyo Tower", "visit the Statue of
# Liberty"), after a house number ("456 Tech Park") or as a form's field ("Branch: Main
# Street").
_AT_A_PLACE = wordset(
    "at in near to on into inside outside around across past towards toward behind "
    "opposite beside by via through visit visited visiting visits"
)
# Words before a place that do not come before a person ("in London", "from India";
# not "to", as in "talked to Lydia").
_PLACED_BY = wordset("in from near across around throughout inside outside visit visited visiting")
_JOURNEY_BEFORE_TO = TRAVEL_WORDS | wordset(
    "trip trips flight flights move moved moving go going went travel way"
)
_FIELD_OR_NUMBER = re.compile(r"(?:\d|:)[ \t]*(?:the[ ]+)?$", re.IGNORECASE)
# A subject of study, not a place: "a degree in Geology", "Master of Arts in History",
# "the Master's program in Biology", "B.S. in Chemistry"; and the degree's abbreviation
# itself before it. Not "an exchange program in Berlin", "martial arts in Kyoto".
_DEGREE_BEFORE = re.compile(
    r"(?i:\b(?:degree|diploma|doctorate|ph\.?d\.?|major|majored|majoring|minor|minored|"
    r"of[ ](?:arts|science|sciences|engineering|education|business[ ]administration)|"
    r"(?:master['’]?s?|bachelor['’]?s?|degree|doctoral|graduate|undergraduate)[ ]"
    r"program(?:me)?))[ ]+(?:in|of)[ ]+$"
    r"|(?<![\w.])(?:[A-Z][a-z]?\.){2,}[ ]+(?:in|of)[ ]+$"
)
_DEGREE_AFTER = re.compile(r"\.?[ ]+(?:in|of)[ ]+[A-Z]")
_DOTTED = re.compile(r"^(?:[A-Z][a-z]?\.)+[A-Z][a-z]?\.?$")
# A field's name: "Nurse:", "Parent's Name:".
_FIELD_NAME_AFTER = re.compile(r"(?:['’]s[ ][A-Z]?[a-z]+)?:")
# An indefinite article before a name uses it as a kind of thing: "an AI language model",
# "a Broadway show", "a Wonder Mop".
_INDEFINITE = re.compile(r"(?:^|[^\w'’])(?:a|an|A|An)[ ]$")
# A letter three times over: a word drawn out in speech, never a name.
_DRAWN_OUT = re.compile(r"([^\W\d_])\1\1", re.IGNORECASE)
# What the tagger may call a name other than a person or a place (a place stays redacted).
_THINGS_NOT_PLACES = THING_LABELS - {"GPE", "LOC", "FAC"}
_POSSESSIVE = re.compile(r"['’]s?$")
_LEADING_THE = re.compile(r"^(?:the|The)[ ]+")
# A person is not called "The" or "A" anything: a name that opens with an article is a
# work's, a band's or a company's ("The Nightingale", "The Boring Company").
_ARTICLE_FIRST = re.compile(r"(?:The|A|An)[ ]")
_TRAILING = ":;,.!?-–—*_\"'“”‘’()[] \t\n"


def _first_word_is_no_name(word: str, common: frozenset[str]) -> bool:
    """Whether the first word of a detected name is a word before the name: lower case,
    a contraction ("I'm"), a greeting or a role, or a common word no name list holds
    ("Later Maria Lopez")."""
    first_names, surnames = name_lists()
    if word in first_names or word in surnames:
        return False
    return (
        not word[:1].isupper()
        or "'" in word
        or "’" in word
        or word.lower() in NOT_NAMES
        or word.lower() in common
    )


def _bounded(text: str, result: RecognizerResult, common: frozenset[str]) -> bool:
    """Set a person's or a place's span to the name itself: without the words before a
    person's name ("Later", "I'm") or lower-case words after it, a place's article, a
    possessive or punctuation after it. False when nothing of a name is left, or what is
    left is the last word of a thing's name (``_a_things_last_word``)."""
    start, end = result.start, result.end
    value = text[start:end]
    stripped = value.rstrip(_TRAILING)
    stripped = _POSSESSIVE.sub("", stripped).rstrip(_TRAILING)
    end = start + len(stripped)
    if result.entity_type == "LOCATION":
        article = _LEADING_THE.match(text[start:end])
        if article:
            start += article.end()
    elif not text[start:end].islower():  # "tracy sukhorukova" is written so
        # Nor the words after it in lower case ("Monica kiss"): a name's particles
        # ("van", "de") stand inside it, not at its end.
        while " " in text[start:end] and text[start:end].rsplit(" ", 1)[1].islower():
            end = start + len(text[start:end].rsplit(" ", 1)[0].rstrip(_TRAILING))
        led: list[str] = []
        while True:
            word = text[start:end].split(" ", 1)
            if len(word) < 2 or not _first_word_is_no_name(word[0], common):
                break
            led.append(word[0])
            start += len(word[0]) + 1
            while start < end and text[start] == " ":
                start += 1
        if led and _a_things_last_word(text, result, led, text[start:end]):
            return False
    start += len(text[start:end]) - len(text[start:end].lstrip(_TRAILING))
    if end <= start or text[start:end].rstrip(".").lower() in HONORIFICS:
        return False  # nothing left, or a title alone ("Dr")
    result.start, result.end = start, end
    return True


# Words that lead a person's name and are no name: a role, a title, a relation, a
# greeting ("Nurse Sizemore", "Uncle Kit", "Dear Kate").
_LEAD_A_NAME = NOT_NAMES | HONORIFICS | RELATIVES | _RELATION_WORDS
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n\"“(\[])\s*$")


def _a_things_last_word(text: str, result: RecognizerResult, led: list[str], rest: str) -> bool:
    """Whether a person the tagger found is the last word of a thing's name: capitalised
    common words lead it inside the tagger's entity mid-sentence ("and Color Starter
    Kit"), or one does after another capitalised word ("Philips Hue White"), none of them
    a role, a title, a relation or a greeting, and one word is left. A person's name
    after a word of the lexicon stays one where a sentence starts ("Later Maria") or
    after one word alone ("see Big Mike")."""
    if " " in rest or _recognizer_name(result) != "SpacyRecognizer":
        return False
    if any(not (w.istitle() and w.isalpha()) or w.lower() in _LEAD_A_NAME for w in led):
        return False
    before = text[max(0, result.start - 60) : result.start]
    if _SENTENCE_START.search(before):
        return False
    previous = before.split()[-1]
    return len(led) >= 2 or (previous.istitle() and previous.isalpha())


def _recognizer_name(result: RecognizerResult) -> str:
    return str((result.recognition_metadata or {}).get("recognizer_name", ""))


# Tokens are found by bisecting their start offsets (``tokens_indices``): walking the
# text's tokens made a spaCy token object per step, for every result.


def _token_at(nlp_artifacts: NlpArtifacts | None, start: int) -> Any:
    if nlp_artifacts is None or nlp_artifacts.tokens is None:
        return None
    at = bisect_left(nlp_artifacts.tokens_indices, start)
    if at < len(nlp_artifacts.tokens_indices) and nlp_artifacts.tokens_indices[at] == start:
        return nlp_artifacts.tokens[at]
    return None


def _tokens_in(nlp_artifacts: NlpArtifacts | None, start: int, end: int) -> list[Any]:
    if nlp_artifacts is None or nlp_artifacts.tokens is None:
        return []
    found = []
    for at in range(bisect_left(nlp_artifacts.tokens_indices, start), len(nlp_artifacts.tokens)):
        token = nlp_artifacts.tokens[at]
        if token.idx + len(token) > end:
            break
        found.append(token)
    return found


def _in_a_run(token: Any) -> bool:
    """Whether a capitalised word stands beside another, in one run of a name."""
    doc = token.doc
    before = doc[token.i - 1] if token.i > 0 else None
    after = doc[token.i + 1] if token.i + 1 < len(doc) else None
    return bool(
        (before is not None and before.is_title and before.is_alpha and before.whitespace_)
        or (after is not None and after.is_title and after.is_alpha and token.whitespace_)
    )


def _names_no_one(
    text: str,
    result: RecognizerResult,
    nlp_artifacts: NlpArtifacts | None,
    common: frozenset[str],
) -> bool:
    """Whether a name the tagger found reads as no person or place here: in a title
    ("Kafka on the Shore"), a person's name that opens with an article ("The
    Nightingale": a work's, unless it names a venue, a place), a word drawn out
    ("Nooo") or interjections only ("Ahh"), a facility nothing places anyone at
    ("moisturizer from La Mer"), after an indefinite article ("an AI"), or, for a
    person the tagger alone found: lower-case words no name list knows ("kung pao"),
    common words only, with no first name first nor surname last ("Kidney Injury"), or
    a single word no list has as a name that it reads as no proper noun, or that is a
    word of the lexicon with no relation word before it ("Bake for 15 minutes", "Peel",
    "Google Cloud Storage"; not "my kid Mali")."""
    start, end = result.start, result.end
    if _DRAWN_OUT.search(text, start, end):
        return True  # "Nooo", "Helloooo"
    words = WORDS.findall(text, start, end)
    if words and all(word.lower() in INTERJECTIONS for word in words):
        return True  # "Ahh", "Yeesh"
    titled = _TITLE_BEFORE.search(text, max(0, start - 40), start)
    if _TITLE_AFTER.match(text, end) or (
        titled and titled["word"].lower() not in _NO_TITLE_WORDS  # not "It's the"
    ):
        return True
    value = text[start:end]
    if result.entity_type == "PERSON" and _ARTICLE_FIRST.match(value):
        return not _a_place(value)  # "The Nightingale", "The Boring Company"; "The Inn at X"
    if result.entity_type == "LOCATION":
        token = _token_at(nlp_artifacts, start)
        if token is not None and token.ent_type_ == "FAC":
            if _FIELD_OR_NUMBER.search(text, max(0, start - 12), start):
                return False
            before = [w for w in words_before(text, start, 3) if w != "the"]
            if before[-1:] == ["from"]:
                # "arrived this morning from Niger"; not "moisturizer from La Mer"
                return TRAVEL_WORDS.isdisjoint(words_before(text, start, 8))
            return not before or before[-1] not in _AT_A_PLACE
    first_names, surnames = name_lists()
    words = value.split()
    listed = words[0].capitalize() in first_names or words[-1].capitalize() in surnames
    if not listed and _INDEFINITE.search(text[max(0, start - 4) : start]):
        return True  # not "a Timothy Laarman concert"
    if result.entity_type != "PERSON" or _recognizer_name(result) != "SpacyRecognizer":
        return False
    if value.islower() and not any(
        w.capitalize() in first_names or w.capitalize() in surnames for w in words
    ):
        # "mule deer", "vanilla powder", "kung pao": people write a name in lower case
        # ("tracy sukhorukova"), but then a list knows one of its words.
        return True
    if listed:
        return False
    tokens = _tokens_in(nlp_artifacts, start, end)
    if tokens and (_called_a_thing(tokens) or _modifies_a_noun(tokens)):
        return True  # "Instagram" an ORG elsewhere in the text; "Coursera courses"
    if " " in value:
        # "Rice Bowl", "Smart Plug", "Influencer Database": every word a common word,
        # and neither a first name first nor a surname last; "Instagram Shopping",
        # "Ableton Live": a thing word last
        return bool(tokens) and (
            all(in_lexicon(t, common) for t in tokens if t.is_alpha)
            or (thing_word(tokens[-1], common) and not _a_place(value))
        )
    # One word: "Bake for 15 minutes"; a capitalised common word no list has as a name
    # ("Lemon", "Humidifier", "Probiotics"), alone or cut out of a longer name ("Google
    # Cloud Storage", "Lighthouse Builders Inc."), unless the words before it say whom it
    # names ("my kid Mali", "a friend called Sky")
    token = _token_at(nlp_artifacts, start)
    if token is None:
        return False
    if token.pos_ != "PROPN":
        return True
    return in_lexicon(token, common) and (
        _in_a_run(token) or _RELATION_WORDS.isdisjoint(words_before(text, start, 2))
    )


def _called_a_thing(tokens: list[Any]) -> bool:
    """Whether the tagger, everywhere else in the text, calls these words (alone or inside
    a longer name) a thing more often than a person: an organisation, a product, a work
    ("Instagram" an ORG in six of its mentions, a PERSON in two)."""
    doc = tokens[0].doc
    words = [t.text for t in tokens]
    as_person = as_thing = 0
    for entity in doc.ents:
        if entity.start == tokens[0].i:
            continue  # this mention itself
        inside = [t.text for t in entity]
        if not any(inside[i : i + len(words)] == words for i in range(len(inside))):
            continue
        if entity.label_ == "PERSON":
            as_person += 1
        elif entity.label_ in _THINGS_NOT_PLACES:
            as_thing += 1
    return as_thing > as_person


def _modifies_a_noun(tokens: list[Any]) -> bool:
    """Whether a lower-case common noun follows the name directly: the name says what
    kind of thing it is ("Coursera courses", "an Instagram account"), as a person's does
    not; a noun of time says when ("Mr. Okonkwo yesterday"), and a title before the name
    says it is a person's."""
    doc = tokens[0].doc
    first, last = tokens[0], tokens[-1]
    before = doc[first.i - 1] if first.i > 0 else None
    after = doc[last.i + 1] if last.i + 1 < len(doc) else None
    return bool(
        after is not None
        and last.whitespace_ == " "
        and after.pos_ == "NOUN"
        and after.is_lower
        and after.is_alpha
        and after.ent_type_ not in ("DATE", "TIME")
        and (before is None or before.lower_.rstrip(".") not in HONORIFICS)
    )


def _a_place(value: str) -> bool:
    """Whether a name the tagger calls a person is named by a kind of venue ("Café
    Central", "Hotel Adlon", "Blue Door Bistro") or ends with a word of the landscape
    that is no surname ("Hanauma Bay", "Kegon Falls"; not "Ji-hoon Park"): a place."""
    words = _LEADING_THE.sub("", value).split()
    if len(words) < 2:
        return False
    last = words[-1]
    return (
        words[0].lower() in VENUE_WORDS
        or last.lower() in VENUE_WORDS
        or (last in LANDMARK_WORDS and last not in name_lists()[1])
    )


def _after_a_product_word(text: str, start: int) -> bool:
    """Whether the word at ``start`` follows an order or product word directly ("order
    Jasper", "Model: Aria"); after a comma it is the one spoken to ("my order, Crystal?")."""
    words = words_before(text, start, 1)
    return bool(words) and words[0] in _PRODUCT_WORDS and bool(_PRODUCT_GAP.search(text, 0, start))


def _names_a_number(text: str, start: int) -> bool:
    """Whether the word at ``start`` names the kind of the number after it ("PESEL
    number 92031504567", "Account 1234567890"), as the recognizers of ids read it."""
    return any(
        pattern.match(text, start)
        for pattern in (PersonalIdRecognizer.PATTERN, AccountNumberRecognizer.PATTERN)
    )


def _a_subject(
    text: str, result: RecognizerResult, nlp_artifacts: NlpArtifacts | None, common: frozenset[str]
) -> bool:
    """Whether a place the tagger found is a subject, a degree or a class: after a degree
    ("a degree in Geology", "B.S. in Chemistry"), a degree's abbreviation ("B.S. in"), or
    words of the lexicon with a number ("Grade 11", "Biology 101")."""
    start, end = result.start, result.end
    if _DEGREE_BEFORE.search(text, max(0, start - 40), start):
        return True
    if _DOTTED.match(text[start:end]) and _DEGREE_AFTER.match(text, end):
        return True
    tokens = _tokens_in(nlp_artifacts, start, end)
    return (
        len(tokens) > 1
        and tokens[-1].like_num
        and all(in_lexicon(t, common) for t in tokens[:-1] if t.is_alpha)
        and any(t.is_alpha for t in tokens[:-1])
    )


def _acts(text: str, result: RecognizerResult, nlp_artifacts: NlpArtifacts | None) -> bool:
    """Whether a single first name the tagger calls a place is the subject of a verb
    right after it ("Phoebe settles it", "Lauren is coming"): a person, unless the text
    puts the same word where a place goes at another mention ("a week in London. London
    is expensive"). Either way the word is redacted; this only keeps a person's label a
    person's and a town's a town's."""
    value = text[result.start : result.end]
    first_names, _ = name_lists()
    token = _token_at(nlp_artifacts, result.start)
    if " " in value or value not in first_names or token is None:
        return False
    after = token.doc[token.i + 1] if token.i + 1 < len(token.doc) else None
    return (
        after is not None
        and after.pos_ in ("VERB", "AUX")
        and after.lower_ != "'s"
        and not _placed_elsewhere(token)
    )


def _placed_elsewhere(token: Any) -> bool:
    """Whether the text puts this word, alone, where a place goes at another mention
    ("back to India in May. India has ...", "a week in London. London is ..."): then the
    name lists' "India" and "London" do not make it a person where it acts."""
    for entity in token.doc.ents:
        if (
            len(entity) == 1
            and entity.start != token.i
            and entity[0].text == token.text
            and entity.label_ in ("GPE", "LOC")
            and _placed(entity.doc, entity.start)
        ):
            return True
    return False


def _placed(doc: Any, at: int) -> bool:
    """Whether the word before token ``at`` puts it where a place goes: "in", "from", or
    "to" after a word of a journey ("back to", "a trip to", "moved to")."""
    before = doc[at - 1].lower_ if at > 0 else ""
    if before in _PLACED_BY:
        return True
    return before == "to" and at > 1 and doc[at - 2].lower_ in _JOURNEY_BEFORE_TO


def _joined(text: str, results: list[RecognizerResult]) -> list[RecognizerResult]:
    """A person's name and a word tagged as a place right beside it, with one space
    between, are one name ("Alessandro Phoenix", "Chandler Bing"): one PERSON span."""
    ordered = sorted(results, key=lambda r: (r.start, -r.end))
    joined: list[RecognizerResult] = []
    for result in ordered:
        previous = joined[-1] if joined else None
        if (
            previous is not None
            and {previous.entity_type, result.entity_type} == {"PERSON", "LOCATION"}
            and text[previous.end : result.start] == " "
        ):
            previous.entity_type = "PERSON"
            previous.end = result.end
            previous.score = max(previous.score, result.score)
            continue
        joined.append(result)
    return joined


def rescore(
    text: str, results: Sequence[RecognizerResult], nlp_artifacts: NlpArtifacts | None = None
) -> list[RecognizerResult]:
    """Lower (never raise) scores where the text says a value is something else:
    - a number whose nearest cue word before it is an order, ticket, case, invoice or
      tracking word ("order 5551234567", "Ticket #48213") is that record's id, not a
      phone, card, bank or licence number: dropped (a card number only to the review
      band: a person looks);
    - a UK NHS number with no NHS word near it: Presidio's checksum passes one number in
      eleven, so most ten-digit phone numbers would otherwise come out as NHS numbers;
    - a person's name with a digit in it ("question4"), right after an order or product
      word, or written as a field name ("order_id") is a label, not a name; a pet's name
      ("my cat Luna", "a dog named Max") is no person's, wherever the text names it;
    - a person's or a place's span is set to the name itself (``_bounded``), dropped where
      it reads as no one (``_names_no_one``), and joined with a place tagged right
      beside it (``_joined``); a first name tagged as a place that acts is a person
      (``_acts``), and a name with a kind of venue or place in it is a place
      (``_a_place``);
    - a word that names the number after it ("your PESEL is 92031504567") is neither a
      person nor a place, and neither is a field's name ("Parent's Name:"); a place
      after a degree, a degree's abbreviation and a class with its number are subjects
      of study (``_a_subject``: "a degree in Geology", "B.S. in", "Grade 11")."""
    common = common_words(nlp_artifacts)
    kept: list[RecognizerResult] = []
    pets: set[str] = set()
    for result in results:
        kind = result.entity_type
        if kind in ("PERSON", "LOCATION") and (
            not _bounded(text, result, common) or _names_no_one(text, result, nlp_artifacts, common)
        ):
            continue
        if kind == "PERSON" and _PET_BEFORE.search(text, max(0, result.start - 40), result.start):
            pets.add(text[result.start : result.end])  # the name as bounded, as kept ones are
            continue
        before = words_before(text, result.start)
        if kind in _NUMBER_TYPES:
            cue = next((w for w in reversed(before) if w in ID_WORDS or w in _VALUE_WORDS), None)
            if cue in ID_WORDS:
                if kind != "CREDIT_CARD":
                    continue
                result.score = min(result.score, 0.45)
            if kind == "PHONE_NUMBER" and before[-1:] == ["#"]:
                continue  # "#5551234": numbered like a record, never how a phone is written
        if kind == "UK_NHS" and _NHS_WORDS.isdisjoint(words_before(text, result.start, 8)):
            continue
        value = text[result.start : result.end]
        label = bool(_FIELD_NAME_AFTER.match(text, result.end))
        if kind in ("PERSON", "LOCATION") and _names_a_number(text, result.start):
            continue  # "your PESEL is 92031504567": the number's kind
        if kind == "LOCATION" and (
            _CODE.search(value)
            or value.islower()
            or _ABBREVIATION.match(value)
            or label
            or _a_subject(text, result, nlp_artifacts, common)
        ):
            continue  # "ACC987654321", "’s", "Nurse:", "B.S. in", "Grade 11": not places
        if kind == "PERSON" and label and not _known_name(value):
            continue  # "Email: dana@example.com": a form's field, not a person
        if kind == "PERSON" and (
            text[result.start - 1 : result.start] == "#"
            or _ACRONYM.match(value)
            or any(ch.isdigit() for ch in value)
            or _after_a_product_word(text, result.start)
            or _IDENTIFIER.fullmatch(value)
        ):
            continue  # "#TravelGoals", "RSVP", "question4", "order Jasper", "order_id"
        kept.append(result)
    # A pet named once is the pet wherever the text names it ("Luna loves it").
    kept = _joined(
        text, [r for r in kept if r.entity_type != "PERSON" or text[r.start : r.end] not in pets]
    )
    for result in kept:
        if result.entity_type == "LOCATION" and _acts(text, result, nlp_artifacts):
            result.entity_type = "PERSON"
        elif result.entity_type == "PERSON" and _a_place(text[result.start : result.end]):
            result.entity_type = "LOCATION"
    # A town the tagger found inside a street address, or a street named after a person
    # ("Nelson Mandela Drive"), is part of that address.
    addresses = [r for r in kept if r.entity_type == ADDRESS]
    return [
        r
        for r in kept
        if r.entity_type not in ("LOCATION", "PERSON")
        or not any(a.start <= r.start and r.end <= a.end for a in addresses)
    ]
