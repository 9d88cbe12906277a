"""The recognizers of people's names, and what tells a name from the name of a thing.

Imported by ``governance.redaction.presidio`` only when the engine loads (it imports
Presidio). A capitalised word may be a person's name or a product's, a brand's, a work's,
a month's: the lists of first names and surnames (Faker's) say which words *can* be
names; spaCy's tags and entity labels, and the words around, say whether this one *is*
(``names_a_thing``):

- spaCy labels it as something else: an organisation, a product, a work of art, an
  event, a law, a nationality, a place ("Amazon Alexa", "German", "Sep 10"), or a date
  or a time that is a word of the lexicon ("Winter", "Monday");
- it is glued to a word before it by a hyphen ("T-Rex") or followed by a number ("Sep
  10", "Dell 15");
- a capitalised common word follows it ("Brooklyn Museum", "Green Party": a word of
  the English lexicon, as spaCy's lemmatizer tables hold it, that no name list has).

Scores follow the engine's bands (``governance.redaction.recognizers``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import import_module
from typing import Any

from presidio_analyzer.nlp_engine import NlpArtifacts
from spacy.lang.en.stop_words import STOP_WORDS

from governance.redaction.presidio import LANGUAGE
from governance.redaction.pseudonyms import HONORIFIC
from governance.redaction.recognizers import Spans, _Recognizer, wordset

# Faker's name lists (offline, in the package) of these locales, ASCII and Latin spellings.
NAME_LOCALES = (
    "en",
    "en_US",
    "en_GB",
    "en_IN",
    "en_NZ",
    "en_IE",
    "en_CA",
    "en_AU",
    "es_ES",
    "es_MX",
    "fr_FR",
    "de_DE",
    "it_IT",
    "pt_BR",
    "nl_NL",
    "pl_PL",
    "sv_SE",
    "da_DK",
    "no_NO",
    "fi_FI",
    "cs_CZ",
    "hu_HU",
    "tr_TR",
    "id_ID",
)
# Interjections, which open a spoken line as a name called out does ("Ah, you did").
INTERJECTIONS = wordset(
    """ah ahh aw aww eh ehh oh ohh ooh uh uhh um umm hm hmm huh ugh aye nah yeah yep yup nope
    wow whoa woah yay yikes oops whoops ouch phew geez jeez gosh sheesh yeesh blah meh duh
    psst shh hey haha oi alas"""
)
# Role words of transcripts and letters, and interjections: never a person's name in this
# position.
NOT_NAMES = INTERJECTIONS | wordset(
    """user assistant system customer client agent support admin bot ai human team staff
    sir madam all everyone there guys folks doctor nurse patient manager note subject
    account holder branch bank summary status description title position department
    re fwd from to cc date sent hi hello hey dear thanks thank regards best cheers sincerely
    yes no ok okay sure great good morning afternoon evening night today tomorrow
    monday tuesday wednesday thursday friday saturday sunday january february march april
    may june july august september october november december"""
)
# A person's relatives, whose name comes before them ("Amaka's husband").
RELATIVES = wordset(
    """son sons daughter daughters kid kids child children baby wife husband boyfriend
    girlfriend fiance fiancee fiancé fiancée mom mum mother dad father brother brothers
    sister sisters grandma grandpa grandmother grandfather grandson granddaughter uncle aunt
    cousin nephew niece stepson stepdaughter friend friends roommate"""
)


@lru_cache(maxsize=1)
def name_lists() -> tuple[frozenset[str], frozenset[str]]:
    """(first names, surnames) of ``NAME_LOCALES``, alphabetic spellings only."""
    first: set[str] = set()
    last: set[str] = set()
    for locale in NAME_LOCALES:
        try:
            provider: Any = import_module(f"faker.providers.person.{locale}").Provider
        except ImportError:
            continue
        for attribute in ("first_names", "first_names_male", "first_names_female"):
            first.update(n for n in getattr(provider, attribute, ()) if n.isalpha())
        for attribute in (
            "last_names",
            "last_names_male",
            "last_names_female",
            "male_last_names",
            "female_last_names",
            "unisex_last_names",
        ):
            last.update(n for n in getattr(provider, attribute, ()) if n.isalpha())
    from spacy.lang.en.stop_words import STOP_WORDS  # spaCy is loaded with the engine

    # "My" and "Will" are first names somewhere; "My Aero 2 headphones" names nobody.
    not_names = {word.capitalize() for word in NOT_NAMES | STOP_WORDS}
    return frozenset(first - not_names), frozenset(last - not_names)


@lru_cache(maxsize=1)
def widespread_first_names() -> frozenset[str]:
    """The first names of at least two of ``NAME_LOCALES`` ("Bob", "Rose"): given to
    people in more than one country, where a word one list holds ("Kit", "Forum") may be
    an oddity of that list."""
    seen: dict[str, int] = {}
    for locale in NAME_LOCALES:
        try:
            provider: Any = import_module(f"faker.providers.person.{locale}").Provider
        except ImportError:
            continue
        names: set[str] = set()
        for attribute in ("first_names", "first_names_male", "first_names_female"):
            names.update(getattr(provider, attribute, ()))
        for name in names:
            seen[name] = seen.get(name, 0) + 1
    first_names, _ = name_lists()
    return frozenset(name for name, count in seen.items() if count > 1) & first_names


# spaCy labels under which a known first name is a place or a thing, where a name is
# extended or read after a cue. Not its dates and times: without the parser's sentence
# boundaries the small pipeline stretches a time over the words after it ("[2:16 PM]
# Support: Hi Emily" is one TIME).
_NOT_PERSON_LABELS = frozenset({"GPE", "LOC", "FAC", "PRODUCT", "EVENT", "LANGUAGE"})
# Labels under which a lone first name, or a run of capitalised words not all names, is
# that thing ("German" a NORP, "Amazon Alexa" and "Boston Celtics" ORGs). Dates and
# times are read apart (``names_a_thing``); amounts not at all: the small pipeline
# stretches them over a name beside one ("Jessica - 95%" is one PERCENT).
THING_LABELS = _NOT_PERSON_LABELS | {"ORG", "NORP", "WORK_OF_ART", "LAW"}


def common_words(nlp_artifacts: NlpArtifacts | None) -> frozenset[str]:
    """The English lexicon of the pipeline's lemmatizer (its ``lemma_index`` table:
    WordNet's nouns, verbs, adjectives and adverbs), lower case; empty without one."""
    engine = getattr(nlp_artifacts, "nlp_engine", None)
    if engine is None:
        return frozenset()
    return _lexicon(engine.get_nlp(LANGUAGE))


@lru_cache(maxsize=2)
def _lexicon(nlp: Any) -> frozenset[str]:
    if "lemmatizer" not in nlp.pipe_names:
        return frozenset()
    lookups = getattr(nlp.get_pipe("lemmatizer"), "lookups", None)
    if lookups is None or not lookups.has_table("lemma_index"):
        return frozenset()
    table = lookups.get_table("lemma_index")
    return frozenset(word for key in table for word in table[key] if word.isalpha())


def lexicon() -> frozenset[str]:
    """``common_words`` of the process's redaction engine (loading it if need be)."""
    from governance.redaction.presidio import engine

    return _lexicon(engine().nlp)


def in_lexicon(token: Any, common: frozenset[str]) -> bool:
    """Whether a token is a word of the lexicon, as written, by its lemma, or as the
    plural of one (the tagger gives a proper noun no lemma: "Tips", "Builders")."""
    word = token.lower_
    return (
        word in common
        or token.lemma_.lower() in common
        or (word.endswith("s") and word[:-1] in common)
    )


def thing_word(token: Any, common: frozenset[str]) -> bool:
    """A capitalised common word that no name list holds ("Museum", "Party", "Tips")."""
    first_names, surnames = name_lists()
    word = token.text
    return (
        word.istitle()
        and word.isalpha()
        and word not in first_names
        and word not in surnames
        and in_lexicon(token, common)
    )


def _in_an_organisation(doc: Any, index: int) -> bool:
    """Whether the token at ``index`` follows, in a spaCy ORG entity, a capitalised word
    no name list has ("Amazon Alexa"). A name that opens the entity ("Ludwig van
    Beethoven") is a person the pipeline mislabelled; a thing word after it is
    ``names_a_thing``'s ("Green Party")."""
    first_names, surnames = name_lists()
    entity = next((e for e in doc.ents if e.start <= index < e.end), None)
    if entity is None:
        return False
    return any(
        t.is_title and t.is_alpha and t.text not in first_names and t.text not in surnames
        for t in doc[entity.start : index]
    )


def names_a_thing(doc: Any, index: int, common: frozenset[str]) -> bool:
    """Whether the capitalised word at ``index``, standing alone, names a thing rather
    than a person (the module docstring's cues)."""
    token = doc[index]
    text = doc.text
    if token.ent_type_ in ("DATE", "TIME"):
        # The small pipeline calls some names times ("call me Roland"): a date is a
        # word of the lexicon ("Winter", "Sep", "Monday").
        if token.text.lower() in common:
            return True
    elif token.ent_type_ == "ORG":
        # ... and lone names organisations ("Alice's email", "The address for Alice"):
        # an organisation is a name with other words ("Amazon Alexa").
        if _in_an_organisation(doc, index):
            return True
    elif token.ent_type_ in THING_LABELS:
        return True
    if token.idx >= 2 and text[token.idx - 1] == "-" and text[token.idx - 2].isalnum():
        return True  # "T-Rex"
    after = doc[index + 1] if index + 1 < len(doc) else None
    # "Sep 10", "Brooklyn Museum"
    return bool(
        after is not None and token.whitespace_ and (after.like_num or thing_word(after, common))
    )


def _extends_name(token: Any, common: frozenset[str]) -> bool:
    """Whether a capitalised word after a first name continues the name: a name from
    the lists, or a proper noun that is no common word ("Minh", "Tribbiani")."""
    first_names, surnames = name_lists()
    text = token.text
    return bool(
        token.is_title
        and text.isalpha()
        and text.lower() not in NOT_NAMES
        and token.ent_type_ not in _NOT_PERSON_LABELS
        and (
            text in surnames
            or text in first_names
            or (token.pos_ == "PROPN" and not in_lexicon(token, common))
        )
    )


def _names_a_thing_span(doc: Any, start: int, end: int) -> bool:
    """Whether a first name with the words after it names a thing: spaCy labels it an
    organisation, a work, a product or a place and not every word of it is a name
    ("Chase Sapphire", "Boston Celtics"), or a number follows it ("Dell Inspiron 15")."""
    first_names, surnames = name_lists()
    if any(doc[i].ent_type_ in THING_LABELS for i in range(start, end)) and not all(
        doc[i].text in surnames or doc[i].text in first_names for i in range(start + 1, end)
    ):
        return True
    return end < len(doc) and bool(doc[end - 1].whitespace_) and doc[end].like_num


class NameListRecognizer(_Recognizer):
    """Names the small pipeline misses, read from its tokens: a capitalised first name
    from the lists followed by capitalised surnames (certain), or standing alone where
    the tagger reads it as a proper noun (uncertain); neither where the words say it
    names a thing (``names_a_thing``). A first name that is also a word of the lexicon
    stands alone only when it is widespread ("Bob", "Rose"); the others ("Kit", "Forum",
    "Case") are left to the tagger's own label and to the cues
    (``PersonCueRecognizer``)."""

    ENTITY = "PERSON"

    def find(self, text: str, nlp_artifacts: NlpArtifacts | None) -> Spans:
        if nlp_artifacts is None or nlp_artifacts.tokens is None:
            return
        first_names, _ = name_lists()
        common = common_words(nlp_artifacts)
        widespread = widespread_first_names()
        doc = nlp_artifacts.tokens
        index = 0
        while index < len(doc):
            token = doc[index]
            if not (token.text in first_names and token.is_title) or (
                token.ent_type_ in _NOT_PERSON_LABELS
            ):
                index += 1
                continue
            end = index + 1
            while end < len(doc) and end - index < 3 and _extends_name(doc[end], common):
                end += 1
            if end > index + 1:
                if not _names_a_thing_span(doc, index, end):
                    yield token.idx, doc[end - 1].idx + len(doc[end - 1].text), 0.85
            elif (
                token.pos_ == "PROPN"
                and (token.text.lower() not in common or token.text in widespread)
                and not names_a_thing(doc, index, common)
            ):
                yield token.idx, token.idx + len(token.text), 0.6
            index = end


def _reads_as_name(nlp_artifacts: NlpArtifacts | None, start: int, *, proper_noun: bool) -> bool:
    """Whether the tagger does not read the word at ``start`` as a place or a date (and,
    with ``proper_noun``, reads it as a proper noun); True without the tagger's output."""
    if nlp_artifacts is None or nlp_artifacts.tokens is None:
        return True
    for token in nlp_artifacts.tokens:
        if token.idx == start:
            if proper_noun and token.pos_ != "PROPN":
                return False
            return token.ent_type_ not in _NOT_PERSON_LABELS
        if token.idx > start:
            break
    return True


# A capitalised word of a name: "Maria", "O'Brien", "Jean-Luc", "D’Angelo"; not "I'm".
_NAME_WORD = r"[A-Z](?:[a-z]+(?:['’-][A-Z]?[a-z]+)*|['’][A-Z][a-z]+)"
_NAME = rf"{_NAME_WORD}(?:[ ]{_NAME_WORD}){{0,2}}"
_INITIAL_NAME = rf"(?:[A-Z]\.[ ])?{_NAME}"


class PersonCueRecognizer(_Recognizer):
    """Names placed where a name goes: after a naming cue ("my name is", "Mr.", "Dr.",
    "signed", "said"), as the speaker of a chat line ("[10:15 AM] Sarah:", "Anna Smith
    (HR):"), after a greeting ("Hi John,") or under a sign-off ("Regards,\\n David Green").
    A title or an explicit "my name is" makes any capitalised words a name; a greeting,
    a speaker label or a sign-off needs the first word in the name lists."""

    ENTITY = "PERSON"
    STRONG = re.compile(
        rf"\b(?:(?i:my name is|name is|name's|name:|i am|i'm|this is|signed|signed by|"
        rf"called|pulled up for|account (?:of|for)|attn:?|attention:?)[ ]+"
        rf"|(?i:{HONORIFIC})\.?[ ]+)"
        rf"(?P<value>{_INITIAL_NAME})\b"
    )
    WEAK = re.compile(
        rf"(?:^|(?<=[\]\n>|]))[ \t]*(?P<value>{_NAME})(?=[ ]?(?:\([^)\n]{{1,40}}\))?:[ ])"
        rf"|\b(?i:hi|hello|hey|dear|thanks|thank you|cheers|bye|welcome|congrats|"
        rf"congratulations|morning|evening|ok|sure|said|asked|replied|told|with|and|by|"
        rf"contact|meet|ask|call|email|to:|cc:|from:)(?:,?[ ]+)(?P<greeted>{_NAME})\b"
        rf"|(?im:^[ \t]*(?:regards|best regards|kind regards|best|thanks|thank you|cheers|"
        rf"sincerely|yours|warmly|all the best|best wishes)[,!.]?[ \t]*\n+[ \t]*)"
        rf"(?P<signed>{_NAME})\b"
        rf"|(?P<subject>{_NAME})(?=[ ](?:said|says|asked|replied|wrote|commented|posted|"
        rf"shared|mentioned|added|called|texted|emailed|lives|lived|works|worked|moved|"
        rf"grew)\b)",
        re.MULTILINE,
    )
    # "Amaka's husband", "Nkechi's kids": whose relative it is.
    OWNER = re.compile(rf"\b(?P<value>{_NAME})(?=['’]s[ ](?i:{'|'.join(sorted(RELATIVES))})\b)")

    def find(self, text: str, nlp_artifacts: NlpArtifacts | None) -> Spans:
        first_names, surnames = name_lists()
        for match in self.STRONG.finditer(text):
            value = match.group("value")
            if value.split()[0].lower() not in NOT_NAMES:
                yield match.start("value"), match.end("value"), 0.85
        yield from self._owners(text, nlp_artifacts)
        for match in self.WEAK.finditer(text):
            group = next(g for g in ("value", "greeted", "signed", "subject") if match.group(g))
            words = match.group(group).split()
            if any(word.lower() in NOT_NAMES for word in words):
                continue  # "Bill To:", "Customer:"
            if not (words[0] in first_names or (len(words) > 1 and words[-1] in surnames)):
                continue
            stamped = group == "value" and text[: match.start(group)].rstrip(" \t").endswith("]")
            if len(words) == 1 and not stamped:
                # "Branch: 123 Main St" is a form's field; "Hi Paris" may be a place.
                proper = group == "value"
                if not _reads_as_name(nlp_artifacts, match.start(group), proper_noun=proper):
                    continue
            yield match.start(group), match.end(group), 0.85

    def _owners(self, text: str, nlp_artifacts: NlpArtifacts | None) -> Spans:
        """A name before a relative: a listed name, or a proper noun that is no word of
        the lexicon ("Google's friend suggestions" names a company's feature)."""
        first_names, surnames = name_lists()
        common = common_words(nlp_artifacts)
        for match in self.OWNER.finditer(text):
            words = match.group("value").split()
            if any(word.lower() in NOT_NAMES for word in words):
                continue
            listed = words[0] in first_names or words[-1] in surnames
            if listed or (
                len(words) == 1
                and words[0].lower() not in common
                and _reads_as_name(nlp_artifacts, match.start("value"), proper_noun=True)
            ):
                yield match.start("value"), match.end("value"), 0.85


# Words that speak to the listener: a question with one of them is asked of someone.
_SECOND_PERSON = wordset("you your yours yourself yourselves you're you’re ya u")
_SENTENCE_ENDS = frozenset({".", "!", "?", "?!", "!?", "...", "…"})
# Tags of the word before a name that make the name its complement ("made of Crystal",
# "the Crystal", "level is Crystal", "gold or Crystal"), not the one spoken to.
_COMPLEMENT_TAGS = frozenset(
    {"DET", "ADP", "ADJ", "AUX", "NUM", "CCONJ", "SCONJ", "PROPN", "SYM", "X", "PUNCT"}
)
_PLACE_LABELS = frozenset({"GPE", "LOC", "FAC"})
# A sound said over and over: "Hehehey", "Ahhh", "Hahaha"; no name.
_SAID_OVER = re.compile(r"(\w{1,3})\1\1", re.IGNORECASE)


def _clause_start(doc: Any, index: int) -> bool:
    """Whether the token at ``index`` opens a sentence, a line or a chat turn."""
    if index == 0:
        return True
    before = doc[index - 1]
    return before.text in _SENTENCE_ENDS or before.text in (":", "]") or "\n" in before.text


def _sentence(doc: Any, start: int, end: int) -> list[Any]:
    """The tokens of the sentence around ``start:end``, its end mark included."""
    first = start
    while first > 0 and not _clause_start(doc, first):
        first -= 1
    last = end
    while last < len(doc) and doc[last].text not in _SENTENCE_ENDS and "\n" not in doc[last].text:
        last += 1
    return list(doc[first : min(last + 1, len(doc))])


class VocativeRecognizer(_Recognizer):
    """A name said to the person spoken to, which the small pipeline often reads as a
    product or a thing ("What is your membership level Crystal?"):

    - at the end of a question or an exclamation, after a comma ("..., Crystal?"), or,
      in a sentence that says "you", after a word the name cannot complete (a noun, a
      pronoun, an adverb: "level Crystal?", "for me Ruby?"; not "is your level
      Crystal?", which asks what the level is, nor "of Crystal?", "the Crystal?", nor
      after a verb when the name is also a word: "Do you stock Crystal?");
    - at the start of a question, or of a sentence that says "you", before a comma
      ("Ifeoma, could you ...").

    The name is a first name of the lists (one that is also a word of the lexicon only
    when it is widespread, as ``NameListRecognizer`` has it). One the tagger calls a
    place is a person only set off by a comma in a sentence that says "you" ("Are you
    ready, Paris?"). Called out first, a proper noun no list and no lexicon holds is a
    name too, uncertain (the review band): nicknames and names of other countries."""

    ENTITY = "PERSON"

    def find(self, text: str, nlp_artifacts: NlpArtifacts | None) -> Spans:
        if nlp_artifacts is None or nlp_artifacts.tokens is None:
            return
        doc = nlp_artifacts.tokens
        common = common_words(nlp_artifacts)
        for index, token in enumerate(doc):
            span = None
            if token.text in ("?", "!", "?!", "!?") and index >= 2:
                span = self._said_last(doc, index, common)
            elif index + 2 < len(doc) and doc[index + 1].text == "," and _clause_start(doc, index):
                span = self._said_first(doc, index, common)
            if span is not None:
                yield span

    @staticmethod
    def _first_name(token: Any, common: frozenset[str], *, place: bool) -> bool:
        """A listed first name, if ``place`` even one the tagger calls a place."""
        first_names, _ = name_lists()
        return (
            token.is_title
            and token.text in first_names
            and (place or token.ent_type_ not in _PLACE_LABELS)
            and (token.lower_ not in common or token.text in widespread_first_names())
        )

    def _said_last(
        self, doc: Any, end: int, common: frozenset[str]
    ) -> tuple[int, int, float] | None:
        _, surnames = name_lists()
        name = doc[end - 1]
        if not name.is_title or name.whitespace_:
            return None
        start = end - 1
        if (
            start >= 2
            and name.text in surnames
            and doc[start - 1].is_title
            and doc[start - 1].is_alpha
            and doc[start - 1].whitespace_
        ):
            start -= 1  # "..., Crystal Nguyen?": the first name decides
        first = doc[start]
        before = doc[start - 1]
        sentence = _sentence(doc, start, end)
        addressed = any(t.lower_ in _SECOND_PERSON for t in sentence)
        if before.text == ",":
            listing = doc[start - 2] if start >= 2 else None
            if listing is not None and listing.is_title and listing.pos_ == "PROPN":
                return None  # "Anna, Crystal?": a list of names or things
            if not self._first_name(first, common, place=addressed):
                return None
        elif (
            not self._first_name(first, common, place=False)
            or not addressed
            or before.pos_ in _COMPLEMENT_TAGS
            or not before.whitespace_
            or (before.pos_ == "VERB" and first.lower_ in common)  # "Do you stock Crystal?"
            # "Is your level Crystal?" asks what the level is; not "Are you ready Crystal?"
            or (
                sentence[0].lemma_ == "be"
                and len(sentence) > 1
                and sentence[1].lower_ not in ("you", "u", "ya")
            )
        ):
            return None
        return first.idx, name.idx + len(name.text), 0.85

    def _said_first(
        self, doc: Any, index: int, common: frozenset[str]
    ) -> tuple[int, int, float] | None:
        name = doc[index]
        if not (name.is_title and name.is_alpha) or name.lower_ in NOT_NAMES:
            return None
        sentence = _sentence(doc, index, index + 2)
        addressed = any(t.lower_ in _SECOND_PERSON for t in sentence)
        if not (addressed or sentence[-1].text in ("?", "?!", "!?")):
            return None
        end = name.idx + len(name.text)
        if self._first_name(name, common, place=addressed):
            return name.idx, end, 0.85
        first_names, _ = name_lists()
        if (
            name.pos_ == "PROPN"
            and not _SAID_OVER.search(name.text)
            and name.ent_type_ not in _PLACE_LABELS
            and name.text not in first_names
            and not in_lexicon(name, common)
            and name.lower_ not in STOP_WORDS
        ):
            return name.idx, end, 0.6
        return None


def recognizers() -> list[_Recognizer]:
    """The recognizers of names, added to Presidio's predefined ones."""
    return [NameListRecognizer(), PersonCueRecognizer(), VocativeRecognizer()]
