"""Sentences: a message split into sentences, greetings, thanks and discourse markers
dropped ("Well, hi Anna, I moved" becomes "I moved"), the names a sentence mentions, and
"I" and "you" rewritten in the third person ("I prefer email" becomes "User prefers
email")."""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import import_module

from memory.engines.extractive.pseudonyms import is_person_placeholder, is_placeholder
from memory.engines.extractive.speech import without_said_again
from memory.engines.extractive.vocabulary import ADVERBS, VAGUE_WORDS, content_tokens, wordset

IRREGULAR_THIRD_PERSON = {
    "am": "is", "are": "is", "have": "has", "do": "does", "go": "goes", "were": "was",
    "don't": "doesn't", "haven't": "hasn't", "aren't": "isn't", "weren't": "wasn't",
    "dunno": "doesn't know", "wanna": "wants to", "gotta": "has to",
}  # fmt: skip
# Words after a subject that must not take a third-person "s": modals, past forms, and
# words that are not verbs at all.
UNINFLECTED = wordset(
    """was is has had did will would can could should might must may shall went made saw got
    came took gave told said left kept began wrote heard knew thought felt found bought paid
    met ran ate sat spent read won lost drove flew swam sang brought caught taught sought
    won't can't couldn't wouldn't shouldn't didn't wasn't isn't hasn't doesn't agreed
    understood stood meant built sent held sold slept became chose drew forgot fell grew hid
    led rode rose shook shot spoke stole threw wore woke broke"""
)
# Words that follow "I" in speech without being its verb ("I and I think we've ...").
NOT_VERBS = wordset(
    "and or but so then the a an to of in on at for with from as if that upon about into by"
)
AUXILIARIES = wordset("can could may might shall should will would do did does am was have had")
NOT_NAMES = wordset(
    """I I'm I've I'll I'd AI OK Okay Hi Hello Hey Yes No The A An It This That My Your We
    You He She They What Which Who How When Where Why Do Does Did Can Could Would Should
    Will Is Are Was Were Thanks Thank Please Sorry Oh Well So But And Or If Then Also Sure
    Great Good Nice Dear Mr Mrs Ms Dr There Here Its Our Their His Her Let Ill Im Ive Id
    Youll Youre Dont Cant Wont Didnt Doesnt Isnt Thats Lets"""
)
_GREETING = re.compile(
    r"^(?:hi|hello|hey|greetings|howdy|good\s+(?:morning|afternoon|evening|night|day)|"
    r"bye|goodbye|good-bye|see\s+you|see\s+ya|talk\s+(?:to\s+you\s+)?(?:later|soon|tomorrow)|"
    r"nice\s+to\s+(?:meet|see|chat|talk)|sweet\s+dreams|take\s+care|cheers|welcome\s+back|"
    r"have\s+a\s+(?:nice|good|great|lovely|pleasant)|you'?re\s+welcome|my\s+pleasure|"
    r"no\s+problem|no\s+worries|good\s+luck|let's\s+(?:chat|talk)|it's\s+getting\s+late|"
    r"(?:talk|chat|see\s+you)\s+(?:again\s+)?(?:next\s+time|later|soon|tomorrow))\b",
    re.IGNORECASE,
)
# "Hi Jason," / "Hello there!" / "Hi, AI companion." - a greeting and who it greets. Only
# the greeting words ignore case: a vocative name must be capitalised.
_GREETING_PREFIX = re.compile(
    r"^(?i:hi|hello|hey|dear|greetings|good\s+(?:morning|afternoon|evening))\b"
    r"(?:[\s,]+(?i:my\s+)?(?i:dear\s+)?(?:(?i:friend|there|everyone|all|buddy)|"
    r"(?!I\b|I')[A-Z][\w']*)(?:\s+[A-Za-z][\w']*)?(?=\s*[,!.:]))?\s*[,!.:-]*\s*"
)
_THANKS = re.compile(
    r"\b(?:thank(?:s|\s+you)(?:\s+(?:so|very)\s+much)?(?:\s+for\s+[^,.;!?]*)?|"
    r"(?:i\s+)?appreciate\s+(?:it|that|your\s+[^,.;!?]*))",
    re.IGNORECASE,
)
_DISCOURSE_PREFIX = re.compile(
    # Phrases before the single words they start with: "no problem" before "no".
    r"^(?:(?:(?:oh\s+)?my\s+(?:god|gosh|goodness)|oh\s+(?:god|gosh|boy|man|dear)|"
    r"no\s+problem|by\s+the\s+way|speaking\s+of\s+which|all\s+right|in\s+addition|"
    r"well|so|oh|ah|aha|haha+|hehe|hmm+|um+|yes|yeah|yep|no|nope|ok(?:ay)?|sure|actually|"
    r"anyway|honestly|alright|great|cool|wow|indeed|also|and|but|then|besides|however|"
    r"additionally|firstly|secondly|finally)\b[\s,!.:;-]*)+",
    re.IGNORECASE,
)
_TRAILING_VOCATIVE = re.compile(
    r",\s*(?:my\s+)?(?:dear\s+)?(?:friend|buddy|pal)\s*(?=[.!?]*$)", re.I
)
# "Ben, can you ...", "Tom, please ...": the name of who is spoken to, before a question
# or a request.
_LEADING_VOCATIVE = re.compile(
    r"^(?P<name>[A-Z][a-z]+)(?:\s[A-Z][a-z]+)?,\s+(?=(?i:can|could|would|will|please|do|did|"
    r"are|is|what|how|why|when|where|you|you're|let|thanks|thank)\b)"
)
# "Calm down, Monica.", "Hi Ross, ...": who else a sentence names as spoken to.
_TRAILING_NAME = re.compile(r",\s*(?P<name>[A-Z][a-z]+)\s*(?=[.!?]*$)")
_GREETED = re.compile(r"^(?i:hi|hello|hey|dear|thanks|thank\s+you)[\s,]+(?P<name>[A-Z][a-z]+)\b")
_FIRST_CLAUSE_END = re.compile(r",\s|;|\s+(?:and|but|so)\s|[.!?]")
_LEADING_TIME = re.compile(
    r"^(?P<time>today|yesterday|tonight|this\s+(?:morning|afternoon|evening|week)|"
    r"last\s+(?:night|week|weekend)|recently|lately|these\s+days|earlier\s+today)\s*,?\s+"
    r"(?=(?:i|we|my)\b)",
    re.IGNORECASE,
)
QUOTED = re.compile(r"\"([^\"]{2,80})\"|“([^”]{2,80})”")
_CAPITALISED_RUN = re.compile(r"\b[A-Z][\w'&-]*(?:\s+(?:of\s+|the\s+|de\s+)?[A-Z][\w'&-]*)*")
# A sentence ends at ". ", "! ", "? ", or a line break; not after a title ("Dr. Johnson").
_SENTENCE_SPLIT = re.compile(
    r"(?<=[.!?…])(?<!\bDr\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bMrs\.)(?<!\bSt\.)(?<!\bJr\.)"
    r"(?<!\bSr\.)(?<!\bProf\.)(?<!\bvs\.)[\"'”’)\]]*\s+|\n+"
)
_AFTER_QUOTE_SPLIT = re.compile(r"(?<=[\"”])\s+(?=[A-Z])")  # 'a movie, "Up" Have you seen it?'
_SEGMENT = re.compile(r"[A-Za-z']+|[^A-Za-z']+")


def has_substance(text: str) -> bool:
    """At least one word that is neither a stopword, a pronoun nor vague."""
    return any(t not in VAGUE_WORDS for t in content_tokens(text))


def _third_person_s(verb: str) -> str:
    lower = verb.lower()
    if is_placeholder(verb):
        return verb  # a pseudonym after a subject ("I <PERSON_3>, ...") is no verb
    if lower in IRREGULAR_THIRD_PERSON:
        return IRREGULAR_THIRD_PERSON[lower]
    past = lower.endswith("ed") and not lower.endswith("eed")  # "need" is not a past form
    if lower.endswith("ss") and lower not in UNINFLECTED and lower.isalpha():
        return verb + "es"  # "guess", "miss", "discuss"
    if lower in UNINFLECTED or past or lower.endswith(("s", "n't")) or not lower.isalpha():
        return verb
    if lower in NOT_VERBS or not any(vowel in lower for vowel in "aeiouy"):
        return verb  # "I and I think", "I th- I think": speech, no verb to agree
    if lower.endswith(("sh", "ch", "x", "z", "o")):
        return verb + "es"
    if lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def speaker_names(role: str) -> tuple[str, str]:
    """(who speaks, who is spoken to) for a message of this role."""
    if role == "assistant":
        return "Assistant", "User"
    if role == "system":
        return "System", "Assistant"
    return "User", "Assistant"


# "Jo: I moved to Oslo" - who speaks, when a message starts with a name and a colon. Words
# that label a part of a message ("Note:", "Update:", "Q:") are not names.
_NAME_PREFIX = re.compile(r"^\s*([A-Z][\w.'-]{0,30}(?:\s[A-Z][\w.'-]{0,30})?):[ \t]+(?=\S)")
_ANY_NAME_PREFIX = re.compile(r"^\s*[A-Z][\w.'-]{0,30}(?:\s[A-Z][\w.'-]{0,30})?:[ \t]", re.M)
LABELS = wordset(
    """Note Notes Update Question Answer Subject Summary Edit PS Re Fwd Q A Title Example
    Examples Step Steps Warning Important Reminder Context Task Problem Issue Solution
    Response Reply Output Input Error Hint Tip Goal Result Results Source Sources Date Time
    Location Address Email Phone Name Price Total Status Order Ticket Ref Reference User
    Assistant System Customer Agent Human AI Bot Me You Translation Prompt Instructions
    Background Request Feedback Comment Comments Conclusion Introduction Overview Details
    Description Option Options Pros Cons Part Chapter Section Day Week Scene Act Verse
    Chorus Ingredients Method Rule Rules Case Story Text Code Query Example Hello Hi Dear
    Thanks Yes No OK Okay Well So"""
)


# Faker's first-name lists (offline, in the package) of these locales, ASCII spellings.
FIRST_NAME_LOCALES = wordset(
    "en en_US en_GB en_IN en_NZ en_IE es_ES es_MX fr_FR de_DE it_IT pt_BR nl_NL pl_PL sv_SE "
    "tr_TR id_ID"
)


@lru_cache(maxsize=1)
def first_names() -> frozenset[str]:
    names: set[str] = set()
    for locale in sorted(FIRST_NAME_LOCALES):
        provider = import_module(f"faker.providers.person.{locale}").Provider
        for attribute in ("first_names", "first_names_male", "first_names_female"):
            names.update(n for n in getattr(provider, attribute, ()) if n.isascii() and n.isalpha())
    return frozenset(names)


def _is_first_name(word: str) -> bool:
    return word in first_names() or is_person_placeholder(word)


def _trailing_name(sentence: str) -> re.Match[str] | None:
    """ "Calm down, Joey.": a short sentence that ends with a name is said to it; a long
    one ends with an apposition ("... and raise his son, Christopher.")."""
    if sentence.count(" ") >= VOCATIVE_SENTENCE_WORDS:
        return None
    match = _TRAILING_NAME.search(sentence)
    return match if match and _is_first_name(match.group("name")) else None


VOCATIVE_SENTENCE_WORDS = 8


def addressee(raw: str) -> str | None:
    """The first name a sentence is said to ("Monica, would you calm down?", "Hi Ross,
    ...", "Calm down, Joey."), or None."""
    text = raw.strip()
    opened = _DISCOURSE_PREFIX.sub("", text) if _opens_with_filler(text) else text
    for match in (_LEADING_VOCATIVE.match(opened), _GREETED.match(text), _trailing_name(text)):
        if match is not None and _is_first_name(match.group("name")):
            return match.group("name")
    return None


def named_speaker(content: str) -> tuple[str, str] | None:
    """(name, the rest) of "Jo: I moved to Oslo"; None when the message does not open
    with one speaker's name: a label ("Note:", "Remember:"; a name must start with a known
    first name), or a pasted dialogue of several speakers."""
    match = _NAME_PREFIX.match(content)
    if match is None:
        return None
    name = match.group(1)
    if name.split()[0] not in first_names() and not is_person_placeholder(name):
        return None
    if any(word in LABELS or word in NOT_NAMES for word in name.split()):
        return None
    prefixes = {m.group(0).split(":")[0].strip() for m in _ANY_NAME_PREFIX.finditer(content)}
    if len(prefixes) > 1:
        return None  # "Ann: ... Bob: ...": a transcript pasted in, not Ann speaking
    return name, content[match.end() :]


def speaker_of(role: str, speaker: str = "") -> str:
    """Who a note says spoke: the participant's name when known, else the role's."""
    return speaker or speaker_names(role)[0]


def as_said_by(text: str, role: str, speaker: str, listener: str = "", *, said: str = "") -> str:
    """A note written with the roles' names ("User asked Assistant to ...") with the
    participants' names instead ("Maria asked Tom to ..."): the speaker's when the message
    names its speaker, the listener's when the message before it named its own. A role's
    word the message itself (``said``) capitalises in a name ("the User Interface
    Developer") is that name, not the role."""
    if role not in ("user", "assistant") or not (speaker or listener):
        return text
    said_by, said_to = speaker_names(role)
    names = {said_by: speaker or said_by, said_to: listener or said_to}
    own = set(_ROLE_IN_A_NAME.findall(said)) if "User " in said or "Assistant " in said else ()

    def name_of(match: re.Match[str]) -> str:
        name = names[match.group(0)]
        rest = name[len(match.group(0)) :]
        if rest[:1] == " " and text[match.end() :].lower().startswith(rest.lower()):
            return match.group(0)  # "user interface" said by User Interface: their words
        written = _ROLE_IN_A_NAME.match(text, match.start()) if own else None
        if written is not None and written.group(0) in own:
            return match.group(0)  # "the User Interface Developer" as the message wrote it
        return name

    return _ROLE_NAMES.sub(name_of, text)


_ROLE_NAMES = re.compile(r"\b(?:User|Assistant)\b")
_ROLE_IN_A_NAME = re.compile(r"\b(?:User|Assistant) [A-Z][\w-]*")


# Contractions come first so that "I'm" is not read as "I" + "'m".
# Matched against the lowercased sentence (same length, same spans): IGNORECASE is slow.
_PERSON = re.compile(
    r"\b(?:i'm|i am|i've|i have|i'd|i'll|i was|i|my|mine|me|myself|"
    r"you're|you are|you've|you have|you'll|you'd|you were|your|yours|yourself|"
    r"you\s+(?:guys|folks)|you)\b"
)
CLAUSE_OPENERS = wordset("and but so that if when because as")
# An auxiliary before its subject ("do I", "are you", "don't I") agrees with the name
# that takes the pronoun's place: "does User", "is Assistant", "doesn't User".
_AGREEING = {
    "am": "is", "are": "is", "do": "does", "have": "has", "were": "was",
    "don't": "doesn't", "aren't": "isn't", "haven't": "hasn't", "weren't": "wasn't",
}  # fmt: skip
_QUESTION_OPENERS = wordset(
    "why what how where when who whom which whose and but so or then long much many often far"
)
# Auxiliaries that put the subject after them, as AUXILIARIES and their negations do.
_INVERTING = (
    AUXILIARIES
    | frozenset(_AGREEING)
    | wordset(
        "is did does can't couldn't won't wouldn't shouldn't didn't doesn't isn't wasn't "
        "hasn't hadn't"
    )
)
# "you guys", "you folks": said to everyone listening, not to one person.
PLURAL_YOU = wordset("guys folks")


def third_person(text: str, role: str, *, keep_you: bool = False) -> str:
    """Name the parties instead of "I" and "you": "I love my dog" becomes "User loves
    User's dog" in a user message. A verb after a rewritten subject agrees with it.
    ``keep_you``: nobody in particular is spoken to (one of several people talking, or
    anyone at all: "if you go to Debenham's"): "you" is "they" ("if they go to
    Debenham's"), never a guessed name, and never a "you" an agent reading its memory
    would take for itself."""
    speaker, listener = speaker_names(role)
    quoted = [m.span() for m in QUOTED.finditer(text)]
    pieces: list[str] = []
    position = 0
    conjugate_next = False
    lower = text.lower()
    if len(lower) != len(text):
        lower = text  # a character whose lowercase is longer: match the text as it is
    for match in _PERSON.finditer(lower):
        if any(start <= match.start() < end for start, end in quoted):
            continue  # a title is quoted as it is: "You Shook Me All Night Long"
        if _in_a_name(text, match):
            continue  # "the Western Digital My Passport"
        before = text[position : match.start()]
        pieces.append(_conjugate_first_verb(before) if conjugate_next else before)
        word = text[match.start() : match.end()]
        if word[:1] in "Yy" and word.split()[-1].lower() in PLURAL_YOU:
            replacement, conjugate_next = word.lower(), False  # "you guys": everyone listening
        elif keep_you and word[:1] in "Yy":
            after = text[match.end() : match.end() + 40]
            replacement, conjugate_next = _unnamed_you(word, before, after), False
        else:
            after = text[match.end() : match.end() + 40]
            replacement, conjugate_next = _replace_person(word, speaker, listener, before, after)
            if word.split()[0].lower() in ("i", "you"):  # "do I have": "I have" matched
                pieces[-1] = _agreeing(pieces[-1])
        pieces.append(replacement)
        position = match.end()
    rest = text[position:]
    pieces.append(_conjugate_first_verb(rest) if conjugate_next else rest)
    return "".join(pieces)


_CAPITALISED_NEXT = re.compile(r"\s+[A-Z0-9]")
_SENTENCE_OPENS = re.compile(r"(?:^|[.!?:;\n\"“(\[*-])\s*$")


def _in_a_name(text: str, match: re.Match[str]) -> bool:
    """Whether a capitalised "My" or "Your" inside a sentence is a word of a name with a
    capitalised word after it ("the Western Digital My Passport", "a My Little Pony
    set"), which no one says of themselves."""
    word = text[match.start() : match.end()]
    if word not in ("My", "Your") or not _CAPITALISED_NEXT.match(text, match.end()):
        return False
    return not _SENTENCE_OPENS.search(text, max(0, match.start() - 40), match.start())


# "You" said to nobody named, as "they": the verb after it keeps its form ("you have",
# "they have").
_UNNAMED_YOU = {
    "you're": "they're", "you are": "they are", "you've": "they've", "you have": "they have",
    "you'll": "they'll", "you'd": "they'd", "you were": "they were", "your": "their",
    "yours": "theirs", "yourself": "themselves",
}  # fmt: skip


# After a clause opener or an auxiliary (or first), "you" is a subject: "if you can't",
# "do you think". After a preposition, or before a preposition, a particle, a
# determiner, a quantifier or an adverb of time, place or degree (or nothing), it is an
# object: "for you", "plug you in", "send you the file", "I like you both", "call you
# tomorrow", "thank you".
_BEFORE_AN_OBJECT = wordset("for with to at about from of on by into onto upon without than")
_AFTER_AN_OBJECT = wordset(
    "the a an this that these those my our his her its their some any what how why when "
    "where which who whether in out up down off on back over through around away to for at "
    "with from about by both all two three too either again now here there so very much "
    "more enough completely today tonight tomorrow later soon something anything everything "
    "nothing better best"
)


def _place(context: str) -> tuple[str, bool, bool]:
    """Where a pronoun stands, read from the words before it: (the word just before, after
    an auxiliary ("can I get", "do you have", "don't I get": the verb keeps its form),
    opening a clause (first, or after a mark or a clause opener: "if you", ", you"))."""
    tail = context.rstrip()
    previous_word = tail.rsplit(None, 1)[-1].lower().replace("’", "'") if tail else ""
    opens_clause = not tail or tail[-1] in ",;:.!?" or previous_word in CLAUSE_OPENERS
    return previous_word, previous_word in _INVERTING, opens_clause


def _agreeing(before: str) -> str:
    """``before`` with its last word, an auxiliary that opens a question before "I" or
    "you", in the form a named subject takes ("Do I need" -> "Does User need", "why am I"
    -> "why is User"); not a verb with its object ("to have you over")."""
    head, space, last = before.rstrip().rpartition(" ")
    agreed = _AGREEING.get(last.lower().replace("’", "'"))
    opener = head.rsplit(None, 1)[-1].lower() if head.strip() else ""
    opens_a_question = not opener or opener[-1] in ',;:.!?"(' or opener in _QUESTION_OPENERS
    if agreed is None or not opens_a_question:
        return before
    if last[:1].isupper():
        agreed = agreed.capitalize()
    return head + space + agreed + before[len(before.rstrip()) :]


def _marked_object(previous_word: str, after: str) -> bool:
    """Whether the words around "you" make it an object: a preposition before it, or
    nothing, a mark or a word of ``_AFTER_AN_OBJECT`` after it ("for you", "thank you.",
    "send you the file", "call you tomorrow")."""
    following = after.split(None, 1)
    next_word = following[0].lower() if following else ""
    return (
        previous_word in _BEFORE_AN_OBJECT
        or not next_word
        or next_word[:1] in ",;:.!?"
        or next_word.strip(",;:.!?") in _AFTER_AN_OBJECT
    )


def _unnamed_you(word: str, before: str, after: str) -> str:
    """ "you" with nobody named: "they" as a subject ("if you can't" -> "if they can't"),
    "them" as an object ("send you the file" -> "send them the file"); as said before a
    "they" ("you they're beautiful", a false start)."""
    lower = word.lower().replace("’", "'")
    if after.lstrip().lower().startswith(("they", "them")):
        return word
    if lower in _UNNAMED_YOU:
        they = _UNNAMED_YOU[lower]
    else:
        previous_word, inverted, opens_clause = _place(before)
        is_object = not (opens_clause or inverted) and _marked_object(previous_word, after)
        they = "them" if is_object else "they"
    return they.capitalize() if word[:1] == "Y" else they


# Verbs whose object is a clause: "you" after them is that clause's subject ("this means
# you keep access", "I think you need a new one"), where after any other verb it is the
# object ("I'll let you know", "we can offer you store credit"). A wrong "they" only
# reads oddly; a wrong subject has the next word agree with it ("offer User stores
# credit"), so a named "you" takes the verb only where it surely is the subject.
_CLAUSE_TAKING = wordset(
    "means mean meant think thought know knew hope guess believe bet suppose feel felt said "
    "say says seems seem like"
)


def _replace_person(
    word: str, speaker: str, listener: str, context: str, after: str = ""
) -> tuple[str, bool]:
    lower = word.lower().replace("’", "'")
    first = {
        "i'm": f"{speaker} is", "i am": f"{speaker} is", "i've": f"{speaker} has",
        "i have": f"{speaker} has", "i'd": f"{speaker} would", "i'll": f"{speaker} will",
        "i was": f"{speaker} was", "my": f"{speaker}'s", "mine": f"{speaker}'s",
        "me": speaker, "myself": speaker,
    }  # fmt: skip
    second = {
        "you're": f"{listener} is", "you are": f"{listener} is", "you've": f"{listener} has",
        "you have": f"{listener} has", "you'll": f"{listener} will", "you'd": f"{listener} would",
        "you were": f"{listener} was", "your": f"{listener}'s", "yours": f"{listener}'s",
        "yourself": listener,
    }  # fmt: skip
    previous_word, inverted, opens_clause = _place(context)
    if inverted and " " in lower:
        name = speaker if lower.startswith("i") else listener
        return f"{name} {word.split()[1]}", False
    if lower in first:
        return first[lower], False
    if lower in second:
        return second[lower], False
    if lower == "i":
        return speaker, not inverted
    # "you" only governs the verb when it is the subject: not in "I'll send you".
    subject = opens_clause or (
        previous_word in _CLAUSE_TAKING and not _marked_object(previous_word, after)
    )
    return listener, subject and not inverted


def _conjugate_first_verb(segment: str) -> str:
    parts = _SEGMENT.findall(segment)
    for index, part in enumerate(parts):
        if not part[0].isalpha():
            if part.strip():
                return segment  # punctuation before any verb: nothing to conjugate
            continue
        if part.lower() in ADVERBS:
            continue
        parts[index] = _third_person_s(part)
        return "".join(parts)
    return segment


# A yes/no question, rewritten ("can User return the jacket"): an auxiliary, then its
# subject, a name, a label or a pronoun; "do", "did" and a subject with a determiner
# ("is the shop open") are left as asked.
_YES_NO = re.compile(
    r"^(?P<aux>(?i:can|could|will|would|should|may|might|is|was|are|were|has|have|does))\s+"
    r"(?P<subject><[A-Z_]+_\d+>|[A-Z][\w-]*|it|that|this|there|they|he|she|we)\s+"
    r"(?P<rest>[a-z].*)$"
)


def reported_yes_no(question: str) -> str | None:
    """A yes/no question as reported speech: "can User return the jacket" -> "whether
    User can return the jacket", "does User need a receipt" -> "whether User needs a
    receipt"; None for any other question."""
    asked = _YES_NO.match(question)
    if asked is None:
        return None
    aux, subject, rest = asked.group("aux").lower(), asked.group("subject"), asked.group("rest")
    if aux == "does":
        return f"whether {subject} {_conjugate_first_verb(rest)}"
    return f"whether {subject} {aux} {rest}"


# Where a sentence may end before the text does: a mark with more after it, a line break.
_SENTENCE_MARK = re.compile(r"[.!?…\n]")


def split_sentences(text: str) -> list[str]:
    body = text.rstrip()
    quoted = '" ' in body or "” " in body  # 'a movie, "Up" Have you seen it?'
    if not quoted and _SENTENCE_MARK.search(body, 0, len(body) - 1) is None:
        return [body.strip()] if body.strip() else []  # one sentence: most turns of talk
    parts = _SENTENCE_SPLIT.split(text)
    if quoted:
        parts = [piece for part in parts for piece in _AFTER_QUOTE_SPLIT.split(part)]
    return [s.strip() for s in parts if s and s.strip()]


_OPENERS = wordset(
    """well so oh my ah aha hehe yes yeah yep no nope ok okay sure actually anyway by speaking
    honestly alright all great cool wow indeed also and but then besides however in
    additionally firstly secondly finally hi hello hey dear greetings good"""
)


def _opens_with_filler(sentence: str) -> bool:
    words = sentence.lstrip("\"'“ ").split(None, 1)
    head = words[0].lower().strip(",.!:;-") if words else ""
    return head in _OPENERS or head.startswith(("haha", "hmm", "um"))


def clean_sentence(raw: str) -> str | None:
    """The sentence without greetings, vocatives and discourse markers ("Well, hi Anna,
    I moved" -> "I moved"), or None when nothing but pleasantries is left. Speech fillers
    are the message's to drop (``without_disfluencies``), once for all its sentences."""
    sentence = raw.strip().replace("’", "'")
    while _opens_with_filler(sentence):
        shorter = _GREETING_PREFIX.sub("", _DISCOURSE_PREFIX.sub("", sentence)).strip()
        if shorter == sentence:
            break
        sentence = shorter
    if not sentence or _GREETING.match(sentence):
        return None
    lower = sentence.lower()
    if ("thank" in lower or "appreciate" in lower) and _THANKS.search(sentence):
        sentence = _THANKS.sub("", sentence).strip(" ,;.!")
        if not has_substance(sentence):
            return None
    if "," in sentence:  # who is spoken to is set off by a comma
        sentence = _TRAILING_VOCATIVE.sub("", sentence)
        trailing = _trailing_name(sentence)
        if trailing:
            sentence = sentence[: trailing.start()] + sentence[trailing.end() :]
        vocative = _LEADING_VOCATIVE.match(sentence)
        if vocative and _is_first_name(vocative.group("name")):
            sentence = sentence[vocative.end() :]  # "Ben, can you fix it?" asks Ben
    time = _LEADING_TIME.match(sentence)
    if time:
        # "Today I went to the park, and ..." reads better as "I went to the park today,
        # and ..."; the time stays in the first clause, the one it dates.
        body = sentence[time.end() :]
        boundary = _FIRST_CLAUSE_END.search(body)
        cut = boundary.start() if boundary else len(body.rstrip(" .!"))
        sentence = f"{body[:cut]} {time.group('time').lower()}{body[cut:]}"
    if _NO_SUBJECT.match(sentence):
        sentence = "I " + sentence  # "just wanted to check my refund": the writer wants
    if _UNMARKED_QUESTION.match(sentence) and len(sentence.split()) <= UNMARKED_QUESTION_WORDS:
        sentence = sentence.rstrip(" .") + "?"  # "how long till it is refunded"
    sentence = without_said_again(sentence)
    first = sentence.split(None, 1)[0] if sentence else ""
    word = first.strip(',.;:!?"').replace("'", "")
    if not (word.isalpha() and word.islower()):
        return sentence  # "cminh730@email.com", "iPhone", a pseudonym: as written
    return sentence[:1].upper() + sentence[1:]


# "just wanted to check on my refund", "need to change my address": the writer is the
# subject a chat message leaves out.
_NO_SUBJECT = re.compile(
    r"^(?:just\s+)?(?:want(?:ed)?|need(?:ed)?|would\s+like|trying|hoping|looking)\s+to\s", re.I
)
# "how long till it is refunded", "can you check my order": questions without their mark.
_UNMARKED_QUESTION = re.compile(
    r"^(?:how\s+(?:much|many|long|soon|often|far|do|does|did|can|could|is|are|was|will)|"
    r"(?:when|where|why|what|which|who)\s+(?:will|is|are|was|were|can|could|do|does|did|should|"
    r"would|has|have|hasn't|haven't|isn't|aren't)|(?:can|could|would|will)\s+(?:you|i|we)|"
    r"(?:is|are)\s+(?:it|there|my|your|the|this|that)|(?:do|does|did)\s+(?:you|i|it|my))\b"
    r"[^.!?]*\.?$",
    re.IGNORECASE,
)
UNMARKED_QUESTION_WORDS = 15


def asks_something(text: str) -> bool:
    """Does a message ask a question or for something ("how long till it is refunded",
    "let me know")?"""
    if "?" in text:
        return True
    opening = text.strip()
    return bool(_UNMARKED_QUESTION.match(opening) or _ASKING.search(opening))


_ASKING = re.compile(
    r"\b(?:please|can\s+you|could\s+you|let\s+me\s+know|tell\s+me|(?:i\s+)?(?:just\s+)?"
    r"(?:want|wanted|need|needed|would\s+like)\s+to\s+(?:know|check|see|ask)|"
    r"(?:i|we)(?:'d|\s+would)?\s+(?:need|want|like)\s+(?:an?|some|two|three|four|five)\s)\b",
    re.IGNORECASE,
)


def names_in(sentence: str) -> list[str]:
    """Quoted titles and runs of capitalised words that do not merely open a sentence."""
    if sentence[1:].islower() and '"' not in sentence and "“" not in sentence:
        return []  # no capital after the first letter, no quote: most sentences
    quoted_spans = [m.span() for m in QUOTED.finditer(sentence)]
    names = [a or b for a, b in QUOTED.findall(sentence)]
    for match in _CAPITALISED_RUN.finditer(sentence):
        if any(start <= match.start() < end for start, end in quoted_spans):
            continue
        words = match.group(0).split()
        if match.start() == 0 or sentence[: match.start()].rstrip()[-1:] in ".!?":
            words = words[1:]  # capitalised because it opens the sentence, not a name
        words = [w for w in words if w not in NOT_NAMES]
        if words:
            names.append(" ".join(words))
    return names
