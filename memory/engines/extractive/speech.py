"""Speech as a transcript keeps it, and what a note leaves out of it: fillers ("um",
"you know"), words said twice ("the the", "I-I-I've"), a word cut off and said whole
("th the white board"), a phrase said again in one breath, and a clause that trailed
off ("give me the...")."""

from __future__ import annotations

import re

from memory.engines.extractive.vocabulary import STOPWORDS, wordset

# What speech leaves in a transcript: "um", "uh", "mm-hmm", "y'know", a word said twice.
_DISFLUENCY_HINT = re.compile(r"\b(?:[uU][hm]|[hH]mm|[mM]m\b|[yY]'know)")
# Spelled out in both cases rather than IGNORECASE, which would make re try every position.
_DISFLUENCY = re.compile(
    r"\b(?:[uU][hH]-[hH][uU][hH]|[mM][mM]-[hH][mM][mM]|[uU]+[mMhH]+|[hH]?[mM][mM]+|[yY]'know)"
    r"\b[\s,.]*"
)
# A word said again at once, in either case, after a comma, a dash or nothing ("the the",
# "Or or", "that's, that's", "I - I felt", a spelt letter "T_ T_"), or before its own
# contraction ("we we'll"). "that that" and "had had" are grammar; "Bora Bora" (both
# capitalised) is a name; "1111 1111" is a number. A word is read whole (possessive "++"):
# a shorter part of it is followed by a letter, never by the space a stutter needs, and
# trying each one was most of the pattern's time.
_STUTTER = re.compile(
    r"\b(?!(?:had|that)\b(?!'))(?P<word>[^\W\d_]++(?:'\w++|_)?+)"
    r"(?P<again>(?:(?:,|\s+-)?\s+(?P=word)\b(?![\w'-]))+)"
    r"|\b(?P<short>[^\W\d_]++),?\s+(?P<long>(?P=short)'\w+)\b",
    re.IGNORECASE,
)


def _ascii_twin(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """The pattern with ASCII classes: on text that is all ASCII it matches what the
    pattern matches, and re tests ASCII classes faster than Unicode ones."""
    return re.compile(pattern.pattern, (pattern.flags & ~re.UNICODE) | re.ASCII)


_STUTTER_ASCII = _ascii_twin(_STUTTER)


def _one_of_them(match: re.Match[str]) -> str:
    if match.group("short"):
        short, long = match.group("short"), match.group("long")
        return long[:1].upper() + long[1:] if short[:1].isupper() else long
    word = match.group("word")
    again = match.group("again").lstrip(", -\t\n")
    if word[:1].isupper() and again[:1].isupper() and word != "I" and word[-1] != "_":
        return match.group(0)  # "Bora Bora"; a letter spelt twice ("T_ T_") is a stutter
    return word


def _filler_or_length(match: re.Match[str]) -> str:
    """ "um" goes; "5 mm" is a length and stays."""
    before = match.string[max(0, match.start() - 2) : match.start()]
    return match.group(0) if before[:1].isdigit() and before[1:] == " " else ""


# "You know, it's", "it's, I mean, the thing", "the thing, you know.": said to keep talking,
# set off by commas. "You know the Playstation control" asks something and stays.
_ASIDE = re.compile(r"(?:^|,)\s*(?:[yY]ou\s+know|I\s+mean|[yY]ou\s+see)\s*(?:,\s*|(?=[.;!?]|$))")
# "nice you know like", "you know it's": "you know" in speech before what goes on, with no
# comma to set it off. "You know the answer" asks something, and stays.
_UNMARKED_ASIDE = re.compile(
    r"\b[yY]ou\s+know\s+(?=(?:like|I|we|they|it's|it|there|that's|so|if|when|because|"
    r"'cause|cause|um|uh)\b)"
)
# "people are you know very much used to it", "for the you know actual interface": "you
# know" after a word no subject "you" follows is an aside too. "Do you know what", "let
# you know" and "you know it" are meant, and stay.
_ASIDE_AFTER_WORD = re.compile(
    r"\b(?P<before>is|was|are|were|be|been|a|an|the|of|very|really|just|quite|like|about|"
    r"to|with|for)\s+you\s+know\b(?!\s+(?:what|how|why|where|who|when|whether|if|that|it|"
    r"this|him|her|them|me)\b),?\s*"
)
# "My name is I'm the marketing expert": a sentence begun again.
_RESTART = re.compile(r"\b[Mm]y\s+name\s+is\s+(?=I'm\b|I\s+am\b)")
# "I and I think", "I th I think", "we sw we switched": "I" or "we" said again after a
# false start (a conjunction, or a fragment of a word without a vowel). "You and you
# alone" is said on purpose.
_FALSE_START = re.compile(
    r"\b(I|we)\s+(?:and|or|but|so|[^\W\d_aeiouyAEIOUY]{1,3})\s+(?=\1\b)", re.IGNORECASE
)


# "th the white board", "er ergonomics", "pr they press", "f the feature": a word cut off
# and said whole at once, or after one small word. A fragment is at most three letters
# and no word of its own ("a", "to", "car", "pay" start words too).
_CUT_OFF = re.compile(
    r"(?<![\w'’-])(?P<cut>[a-z]{1,3})\s+(?:(?:the|a|they|we|I|it|to)\s+)?(?=(?P=cut)[a-z])"
)  # lowercase only: "Wes Western" may be someone's name
_WHOLE_SHORT_WORDS = STOPWORDS | wordset(
    """car box bit pay use top end day way man men job run set try buy eat win fun red big
    old new few lot off own per ask bad yes yet ten two six one see say put let get got did
    can may sit hot cut far art air age ago add act web app tea pen key fix mix log sign
    go ok oh ah hi hey"""
)


def _cut_off_gone(match: re.Match[str]) -> str:
    if match.group("cut").lower() in _WHOLE_SHORT_WORDS:
        return match.group(0)
    return match.group(0)[len(match.group("cut")) :].lstrip()


def _aside_gone(match: re.Match[str]) -> str:
    return "" if match.start() == 0 or match.group(0).endswith(("know", "mean", "see")) else " "


def without_disfluencies(text: str) -> str:
    """ "Um, well this is our our project" -> "well this is our project"."""
    lower = text.lower()
    if ("um" in lower or "uh" in lower or "mm" in lower or "y'know" in lower) and (
        _DISFLUENCY_HINT.search(text) is not None
    ):
        text = _DISFLUENCY.sub(_filler_or_length, text).strip()
    if "you know" in lower or "i mean" in lower or "you see" in lower:
        if _ASIDE.search(text):
            text = _ASIDE.sub(_aside_gone, text).strip()
        if "you know" in lower:
            text = _UNMARKED_ASIDE.sub("", text)
            text = _ASIDE_AFTER_WORD.sub(r"\g<before> ", text)
    if "name is i" in lower:
        text = _RESTART.sub("", text)
    if lower.count("i ") >= 2 or lower.count("we ") >= 2:
        text = _FALSE_START.sub("", text)
    text = _CUT_OFF.sub(_cut_off_gone, text)
    return without_stutter(text)


# The words a stutter is looked for between: a word and the next, or its contraction.
_SPOKEN_WORD = re.compile(r"[^\W\d]+(?:'\w+)?")
_SPOKEN_WORD_ASCII = _ascii_twin(_SPOKEN_WORD)


def _may_stutter(text: str) -> bool:
    """Does a word come again at once? Reading the words costs less than the stutter
    pattern, which tries a back-reference at every word, and most texts have none."""
    lower = text.lower()
    words = (_SPOKEN_WORD_ASCII if lower.isascii() else _SPOKEN_WORD).findall(lower)
    pairs = zip(words, words[1:], strict=False)
    return any(a == b or b.startswith(a + "'") for a, b in pairs)


# A word begun again after its first letter: "I-I-I've been", "W-w-wait"; a letter said
# twice at least, or "I" once ("I-I think"), so that "t-test" stays a t-test.
_LETTER_STUTTER = re.compile(
    r"\b(?P<letter>[^\W\d_])(?:-(?P=letter))+-(?P=letter)|\b(?P<i>I)-(?=I\b|I')",
    re.IGNORECASE,
)


def _letter_said_once(match: re.Match[str]) -> str:
    if match.group("i"):
        return ""
    return match.group("letter")


def without_stutter(text: str) -> str:
    """ "the the idea", "we we'll go", "I-I-I've been" -> "the idea", "we'll go", "I've
    been"."""
    if "-" in text:
        text = _LETTER_STUTTER.sub(_letter_said_once, text)
    if not _may_stutter(text):
        return text
    return (_STUTTER_ASCII if text.isascii() else _STUTTER).sub(_one_of_them, text)


# "we could make it out of the", "I mean, and": speech that trailed off; the words it
# stopped on say nothing.
_TRAILING_OFF = re.compile(
    r"(?:[\s,;:-]+(?:and|or|but|nor|because|the|a|an|of|with|than|my|your|their|our))+"
    r"[\s,;:-]*$",
    re.IGNORECASE,
)
_DANGLING = wordset("and or but nor because the a an of with than my your their our")
_CONJUNCTIONS = wordset("and or but nor because")
_ELLIPSIS = re.compile(r"\s*(?:\.{2,}|…)[\s.…]*$")
# Where a sentence that trails off ("... supposed to...") stopped mid-phrase: on a word
# that needs more after it. A conjunction is the clause's end ("... open up to, and..."),
# not its middle.
_MID_PHRASE = _DANGLING | wordset(
    """to of the a an my your his her their our its this that these those some any no
    is was are were be been am i you he she we they it if so as at in on for from by
    into about like just sort kind kinda sorta gonna wanna really very more most not
    can could would should will might must do does did have has had get got"""
)
# "we need to", "it was going to": a transcript's speech stopped before the verb, with no
# mark that it did.
_STOPPED_BEFORE_A_VERB = re.compile(
    r"\b(?:need|needs|want|wants|going|gonna|have|has|got|supposed|trying|able|like|"
    r"likes|ought)\s+to[\s,;:-]*$",
    re.IGNORECASE,
)
_CLAUSE_BREAK = re.compile(r"\s*(?:[,;:]|\s-)\s+")


def without_trailing_off(text: str) -> str:
    """The sentence without the words it trailed off on: "felt all floopy, and..." ->
    "felt all floopy" (a clause was finished, the next never began); a clause stopped
    mid-phrase goes whole ("give me the phone, give me the..." -> "give me the phone",
    "so we'll be careful, we need to" -> "so we'll be careful"), and a sentence that is
    nothing else goes ("Was I not supposed to..." -> "")."""
    end = text.rstrip(" ,;:-")
    ellipsis = _ELLIPSIS.search(text) if end.endswith(("..", "…")) else None
    if ellipsis is not None:
        text = text[: ellipsis.start()]
    elif not end.lower().endswith(" to") or _STOPPED_BEFORE_A_VERB.search(end) is None:
        last = text.rstrip(" ,;:-").rsplit(None, 1)[-1:]
        return _TRAILING_OFF.sub("", text) if last and last[0].lower() in _DANGLING else text
    text = text.rstrip(" ,;:-")
    last = text.rsplit(None, 1)[-1:]
    word = last[0].lower().strip("\"'") if last else ""
    if word in _CONJUNCTIONS:
        return _TRAILING_OFF.sub("", text)
    if word not in _MID_PHRASE:
        return text
    breaks = list(_CLAUSE_BREAK.finditer(text))
    return text[: breaks[-1].start()].rstrip(" ,;:-") if breaks else ""


_PHRASE_BREAK = re.compile(r",\s+")
_PHRASE_WORD = re.compile(r"[\w']+")


def without_said_again(sentence: str) -> str:
    """A phrase said again in one breath is written once: "give me the phone Ross, give
    me the phone, give me the phone" -> "give me the phone Ross". A phrase goes when its
    words (two or more) are all in the phrase before it."""
    if sentence.count(", ") < 1:
        return sentence
    phrases = _PHRASE_BREAK.split(sentence)
    kept = [phrases[0]]
    before = set(_PHRASE_WORD.findall(phrases[0].lower()))
    for phrase in phrases[1:]:
        words = set(_PHRASE_WORD.findall(phrase.rstrip(".!?").lower()))
        if len(words) >= 2 and words <= before:
            continue
        kept.append(phrase)
        before = words
    if len(kept) == len(phrases):
        return sentence
    end = sentence[len(sentence.rstrip(".!?")) :]
    return ", ".join(kept).rstrip(".!?") + end
