"""Clauses: the sentences of a user, assistant or system message worth remembering, with
their priority, rewritten as notes.

A sentence is kept only when it carries something worth remembering (a fact about the
user, a preference, a decision, a plan, a commitment, a problem, a request, a new name or
a number); greetings, thanks, acknowledgements and chit-chat are dropped. Priorities are
assigned by rule."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from memory.engines.base import DEFAULT_FIDELITY, SourceMessage
from memory.engines.extractive.answers import (
    DETAIL,
    Detail,
    answer_note,
    prose_text,
    without_code,
)
from memory.engines.extractive.cues import (
    ACKNOWLEDGED_ADVICE,
    COMPLETION,
    CONCRETE_ACTION,
    EVENT,
    EXPLICIT_REQUEST,
    HABIT,
    IDENTITY,
    IMPERATIVE_VERBS,
    META_TALK,
    PLAN,
    PREFERENCE,
    PROBLEM,
    SELF_DESCRIPTION,
    SMALL_TALK_QUESTION,
    URGENT,
    is_negated,
)
from memory.engines.extractive.decisions import (
    REFUSAL_WORDS,
    SHORT_TURN_WORDS,
    answer_may_matter,
    classify_answer,
    promised_part,
    reason_last,
    short_answer_may_matter,
)
from memory.engines.extractive.details import AskedDetails, given_detail, is_bare_identifier
from memory.engines.extractive.relative_dates import absolute_dates, has_date
from memory.engines.extractive.sentences import (
    addressee,
    as_said_by,
    asks_something,
    clean_sentence,
    first_names,
    names_in,
    reported_yes_no,
    speaker_names,
    split_sentences,
    third_person,
)
from memory.engines.extractive.speech import (
    without_disfluencies,
    without_stutter,
    without_trailing_off,
)
from memory.engines.extractive.vocabulary import (
    COMPLETED,
    HIGH,
    LOW,
    MEDIUM,
    PRIORITY_STRENGTH,
    VAGUE_WORDS,
    Sentence,
    content_tokens,
    wordset,
)

MAX_CLAUSES_PER_MESSAGE = 12  # a pasted document must not become a hundred notes
TRIM_CLAUSES_FROM_WORDS = 14  # longer sentences lose their clauses that carry no signal
FILLER_WORDS = re.compile(
    r"\b(?:really|very|quite|actually|definitely|particularly|truly|totally|absolutely|"
    r"basically|literally|honestly|simply|certainly|just|super)\s+",
    re.IGNORECASE,
)
_SENTENCE_STARTERS = wordset(
    """the it it's this that that's there there's these those a an some my our we they he
    she what what's how when where why which who is are was were do does did can could would
    should will in on at for if as so but and today yesterday tomorrow sometimes recently
    lately now then here every each all many most no not maybe perhaps less more only about
    around roughly approximately nearly almost over under within we're we've we'll we'd
    they're they've they'll they'd it'll it'd let's there'll here's unless although though
    while since once after before until because whether otherwise also just well look
    listen okay ok yes yeah oh sorry thanks hey done has have had might must note except
    didn't doesn't don't isn't aren't wasn't weren't can't couldn't won't wouldn't
    shouldn't haven't hasn't ahh ohh"""
)
# "I'm Gary", "My name is Gary", "Call me Gary"; not "My name is I'm ...", said twice over.
# "This is Gary" as a call opens, alone or "from billing", "here", "speaking"; not "this is
# Gary's desk".
_INTRODUCTION = re.compile(
    r"(?:^I'm|^I am|\b[Mm]y name is|\b[Cc]all me)\s+(?!I\b|I')([A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)*)|"
    r"^[Tt]his is\s+([A-Z][\w-]+(?:\s+[A-Z][\w-]+)?)(?=\s*(?:[.!,]|$)|\s+(?:from|here|speaking)\b)"
)
_SPECIFIC_NUMBER = re.compile(r"[$€£¥]\s?\d|\b[A-Z]{2,}-?\d+|\d+(?:[.,:]\d+)?\s?(?:%|[a-zA-Z]+)?")
_CLAUSE_SPLIT = re.compile(
    r"(,\s+(?=(?:and|but|so|which|because|while|although|though|as)\b)|;\s+|\s+because\s+)"
)


_LOWERCASE_WORD = re.compile(r"(?<![\w'])[a-z][a-z']*\b")


def _lower_first(text: str, common: frozenset[str]) -> str:
    """Lowercase a sentence's first word after "User said", unless it is a name: a word
    that opens sentences, an adverb ("Unfortunately") that is nobody's first name, or a
    word the window writes in lowercase elsewhere (``common``): "said slight problem",
    not "said Slight problem", which reads as a name and which a redaction scan takes
    for one."""
    first = text.split(" ", 1)[0].rstrip(",;:")  # "Look, face it": the word is "Look"
    lower = first.lower()
    if lower in _SENTENCE_STARTERS:
        return text[:1].lower() + text[1:]
    adverb = lower.endswith("ly") and first.isalpha()
    written_lower = lower in common and first[1:].islower() and not lower.startswith("i'")
    if (adverb or written_lower) and lower != "i" and first not in first_names():
        return text[:1].lower() + text[1:]
    return text


@dataclass
class Clause:
    """One kept sentence, rewritten, with what the Observer decided about it."""

    text: str
    priority: str
    kind: str
    message: SourceMessage
    referenced_at: datetime | None
    tokens: frozenset[str] = frozenset()

    @property
    def is_request(self) -> bool:
        return self.kind == "request"


class WindowState:
    """What memory already holds (previous observations, notes made so far in this
    window), so that a name the user mentioned before is not news."""

    def __init__(self, previous: Sequence[str]) -> None:
        self._known: list[str] = [text.lower() for text in previous]
        self._joined: str | None = None
        self.asked = AskedDetails()  # what the last question for details asked
        self.asked_by: tuple[str, str] = ("", "")  # (role, speaker) of who asked it
        self.first_names: dict[str, str] = {}  # a speaker's full name -> the first name
        self.full_names: dict[str, str] = {}  # and back
        self._user_turn = ""  # the last user turn that gave no detail
        self._user_asked: bool | None = False  # whether it asked something, once worked out
        self.named: set[str] = set()  # full names memory already holds
        self.introduced: set[str] = set()  # agents memory already introduced with their role
        self.common_words: frozenset[str] = frozenset()  # words the window writes lowercase

    def meet(self, speakers: Sequence[str]) -> None:
        """The window's speakers: a full name whose first name is a first name nobody else
        of the window has can be shortened to it once memory holds the full name."""
        firsts: dict[str, set[str]] = {}
        for name in speakers:
            if " " in name:
                firsts.setdefault(name.split(" ", 1)[0], set()).add(name)
        self.first_names = {
            next(iter(names)): first
            for first, names in sorted(firsts.items())
            if len(names) == 1 and first in first_names() and first not in speakers
        }
        known = self.known_text()
        self.named = {name for name in self.first_names if name.lower() in known}
        self.full_names = {first: name for name, first in self.first_names.items()}
        self.introduced = {name for name in speakers if f"{name.lower()}, the agent," in known}

    def hear(self, contents: Iterable[str]) -> None:
        """The window's messages: the words they write in lowercase (``_lower_first``)."""
        self.common_words = frozenset(_LOWERCASE_WORD.findall("\n".join(contents)))

    def heard_user(self, text: str) -> None:
        """A user turn that gave no detail: ``user_asked`` reads it."""
        self._user_turn, self._user_asked = text, None

    @property
    def user_asked(self) -> bool:
        """Did the last user turn ask something? Read only where an assistant answers, so
        worked out there, once: among people talking, nobody reads it."""
        if self._user_asked is None:
            self._user_asked = asks_something(self._user_turn)
        return self._user_asked

    def remember(self, text: str) -> None:
        self._known.append(text.lower())
        self._joined = None

    def known_text(self) -> str:
        """Everything memory and this window hold so far, lower-cased, in one string."""
        if self._joined is None:
            self._joined = "\n".join(self._known)
        return self._joined

    def fresh_names(self, sentence: str) -> list[str]:
        names = names_in(sentence)
        if not names:
            return []
        known = self.known_text()
        return [n for n in names if n.lower() not in known]


def _introduces_someone(sentence: Sentence) -> bool:
    """A cheap test before the introduction pattern: most sentences name nobody."""
    words = sentence.words
    return (
        "name" in words
        or "call" in words
        or sentence.lower.startswith(("i'm ", "i am ", "this is "))
    )


FIRST_PERSON = wordset("i i'm i've i'll i'd me my mine we we're our us")
_ABOUT_THE_LISTENER = re.compile(r"^(?:you|you're|you've|you'll|you'd|your)\b")
_OPINION = re.compile(
    r"^(?:i\s+(?:think|believe|guess|suppose)(?!\s+(?:i|i'll|i'm|i'd|my|we)\b)|"
    r"(?:it|that|this|those|these)?\s*(?:all\s+)?(?:sounds?|seems?|looks?)\b|"
    r"i\s+(?:really\s+)?like\s+the\s+sound\s+of)\b"
)


_SECOND_PERSON = re.compile(r"\b(?:you're|you've|you'll|you'd|yours|yourself|your|you)\b", re.I)
_AS_FIRST = {
    "you're": "I'm", "you've": "I've", "you'll": "I'll", "you'd": "I'd", "yours": "mine",
    "yourself": "myself", "your": "my", "you": "I",
}  # fmt: skip


def _is_small_talk_statement(sentence: Sentence, to_person: bool) -> bool:
    """ "You are a smart companion", "I think that's a great way to relax", "That sounds
    difficult": remarks about the assistant or the advice, not about the user. Said to a
    named person, "you left your keys" is about that person."""
    if _ABOUT_THE_LISTENER.match(sentence.lower) and not to_person:
        # "You can watch "Home Cooking" on CCTV" passes on names worth keeping.
        return FIRST_PERSON.isdisjoint(sentence.words) and not names_in(sentence.text)
    if _OPINION.match(sentence.lower):
        return "my" not in sentence.words
    return False


def _is_request(sentence: Sentence) -> bool:
    if sentence.is_question:
        return not SMALL_TALK_QUESTION.found(sentence) or "recommend" in sentence.lower
    first_word = sentence.lower.split(None, 1)[0] if sentence.lower else ""
    return EXPLICIT_REQUEST.found(sentence) or first_word in IMPERATIVE_VERBS


def classify(
    sentence: Sentence,
    role: str,
    state: WindowState,
    *,
    short: bool = False,
    to_person: bool = False,
) -> tuple[str, str] | None:
    """(kind, priority) of a sentence worth keeping, or None to drop it. ``short``: the
    sentence is from a short assistant turn (``SHORT_TURN_WORDS``); ``to_person``: it is
    said to a named person, not to the assistant."""
    if role == "assistant":
        return classify_answer(sentence, short, asked=state.user_asked)
    if to_person and _ABOUT_THE_LISTENER.match(sentence.lower):
        # "You left your keys" to Monica says what "I left my keys" would say of Monica.
        sentence = Sentence.of(
            _SECOND_PERSON.sub(lambda m: _AS_FIRST[m.group(0).lower()], sentence.text)
        )
    if _introduces_someone(sentence) and _INTRODUCTION.search(sentence.text):
        return "introduction", MEDIUM
    if _is_small_talk_statement(sentence, to_person):
        return None
    if sentence.is_question:
        if _is_request(sentence):
            return "request", LOW
        # "Do you know that I like photography?" still tells something about the user.
        if FIRST_PERSON.isdisjoint(sentence.words) or not PREFERENCE.found(sentence):
            return None
        return "preference", MEDIUM
    completed = COMPLETION.found(sentence)
    negated = is_negated(sentence)
    if completed and not negated and not PLAN.found(sentence):
        return "completed", COMPLETED
    if PROBLEM.found(sentence) or URGENT.found(sentence) or (completed and negated):
        return "problem", HIGH
    if _is_request(sentence):
        return "request", LOW  # raised to high later if nothing in the window answers it
    if META_TALK.found(sentence):
        return None
    if PREFERENCE.found(sentence):
        return "preference", MEDIUM
    if IDENTITY.found(sentence) or HABIT.found(sentence):
        return "fact", MEDIUM
    if PLAN.found(sentence):
        # "I'll check those out": agreeing to advice, not a plan anyone needs to recall;
        # "I will fix it by Friday" is a promise with its day.
        promise = has_date(sentence) and CONCRETE_ACTION.found(sentence)
        agreed = ACKNOWLEDGED_ADVICE.found(sentence) and not promise
        return None if agreed else ("plan", MEDIUM)
    if EVENT.found(sentence):
        return "event", LOW
    if (sentence.has_digit and _SPECIFIC_NUMBER.search(sentence.text)) or state.fresh_names(
        sentence.text
    ):
        return "fact", LOW
    if "like" in sentence.words:
        # "it's like starting on the fifteenth date": said in passing, no preference;
        # kept low, as a question is, and left out of a long meeting's minutes.
        return "remark", LOW
    return None


def _trim_long(
    sentence: Sentence, role: str, state: WindowState, max_words: int, *, short: bool = False
) -> Sentence:
    """Keep only the clauses of a long sentence that carry a signal of their own, and no
    more whole clauses than fit in ``max_words``: a clause is never cut short. A reason
    ("because ...") stays with the clause it explains, joined as it was written."""
    if len(sentence.words) <= TRIM_CLAUSES_FROM_WORDS:
        return sentence
    pieces = _CLAUSE_SPLIT.split(sentence.text)
    parts = [(pieces[i - 1] if i else "", pieces[i].strip(" ,;")) for i in range(0, len(pieces), 2)]
    kept: list[tuple[str, str]] = []
    previous_kept = False
    for index, (separator, part) in enumerate(parts):
        if not part:
            previous_kept = False
            continue
        reason = short and separator.strip() == "because" and previous_kept
        keep = index == 0 or reason or classify(Sentence.of(part), role, state, short=short)
        if keep:
            joined = previous_kept and (reason or separator.startswith(","))
            kept.append((separator if joined else "; ", part))
        previous_kept = bool(keep)
    if not kept:
        return sentence
    chosen = whole_clauses([part for _, part in kept], max_words)
    text = chosen[0]
    for (separator, part), _ in zip(kept[1:], chosen[1:], strict=False):
        text += separator + part
    return Sentence.of(text)


def whole_clauses(clauses: list[str], max_words: int) -> list[str]:
    """The first clauses that fit in ``max_words`` (the first one always, whole)."""
    kept: list[str] = []
    words = 0
    for clause in clauses:
        size = len(clause.split())
        if kept and words + size > max_words:
            break
        kept.append(clause)
        words += size
    return kept


_REQUEST_FOR = re.compile(
    r"\b(?:any|some)\s+(?:good\s+|other\s+|more\s+)?([\w\s-]{1,40}?)\s*"
    r"(recommendations?|suggestions?|tips|advice|ideas)\b",
    re.IGNORECASE,
)
_ASK_TO = re.compile(r"^(?:can|could|would|will)\s+you\s+(?:please\s+)?(.+)$", re.IGNORECASE)
_ASK_FOR_ITEM = re.compile(
    r"^(?:(?:can|could|may)\s+(?:i|we)\s+(?:please\s+)?(?:get|have|order|grab|buy)|"
    r"i(?:'d|\s+would)\s+(?:like|love)(?:\s+to\s+(?:get|have|order|grab|buy)|(?!\s+to\b))|"
    r"i\s+(?:need|want)(?!\s+to\b)|(?:do|does)\s+you\s+(?:have|know|sell)\s+(?:any|some))"
    r"\s+(.+)$",
    re.IGNORECASE,
)
_TELL_ME = re.compile(
    r"(?:tell|show)\s+me\s+(?=(?:what|which|who|where|when|why|how|if|whether)\b)"
)
_PLEASE = re.compile(r"\bplease\b,?\s*", re.IGNORECASE)
# A request split off after a comma keeps the word that joined it ("..., so can you set a
# reminder for that?"); what is asked starts after it.
_JOINING_WORD = re.compile(r"^(?:so|and|but|then|also)\b,?\s+", re.IGNORECASE)
# "I need it before Friday" asks for nothing new: the writer needs it.
_PRONOUN_OBJECT = re.compile(r"(?:it|this|that|them|these|those)\b", re.IGNORECASE)


def _rewrite_request(text: str, role: str, common: frozenset[str], keep_you: bool) -> str:
    speaker, listener = speaker_names(role)
    body = _JOINING_WORD.sub("", _PLEASE.sub("", text.rstrip(" ?.!")).strip(" ,"))
    wanted = _REQUEST_FOR.search(body)
    if wanted:
        topic = " ".join(f"{wanted.group(1)} {wanted.group(2)}".split())
        return f"{speaker} asked for {third_person(topic, role, keep_you=keep_you)}"
    item = _ASK_FOR_ITEM.match(body)
    if item and not _PRONOUN_OBJECT.match(item.group(1)):
        verb = "asked for" if body.lower().startswith(("do ", "does ")) else "requested"
        return f"{speaker} {verb} {third_person(item.group(1), role, keep_you=keep_you)}"
    ask = _ASK_TO.match(body)
    if ask:
        told = _TELL_ME.match(ask.group(1))
        if told:  # "can you tell me what's in a Cold Brew" asks what's in a Cold Brew
            asked_what = third_person(ask.group(1)[told.end() :], role, keep_you=keep_you)
            return f"{speaker} asked {asked_what}"
        asked = "them" if keep_you else listener
        return f"{speaker} asked {asked} to {third_person(ask.group(1), role, keep_you=keep_you)}"
    rewritten = third_person(body, role, keep_you=keep_you)
    if rewritten.startswith(speaker):
        return rewritten
    first_word = body.lower().split(None, 1)[0] if body else ""
    if first_word in IMPERATIVE_VERBS:  # a verb, whatever the window writes: "asked to get"
        return f"{speaker} asked to {rewritten[:1].lower()}{rewritten[1:]}"
    if text.rstrip().endswith("?"):
        reported = reported_yes_no(rewritten)
        return f"{speaker} asked {reported or _lower_first(rewritten, common)}"
    return f"{speaker} requested {_lower_first(rewritten, common)}"


def _rewrite_statement(text: str, role: str, common: frozenset[str], keep_you: bool) -> str:
    speaker, _ = speaker_names(role)
    rewritten = third_person(text.rstrip(" .!,;:-"), role, keep_you=keep_you)
    if rewritten.startswith(speaker):
        return rewritten
    return f"{speaker} said {_lower_first(rewritten, common)}"


def rewrite(text: str, kind: str, role: str, state: WindowState, *, keep_you: bool = False) -> str:
    spoken = FILLER_WORDS.sub("", text)
    if spoken != text:
        text = without_stutter(spoken)  # "we just we'll" -> "we'll"
    introduction = _INTRODUCTION.search(text) if kind == "introduction" else None
    if kind == "introduction" and introduction:
        name = introduction.group(1) or introduction.group(2)
        return f"{speaker_names(role)[0]}'s name is {name}"
    if kind == "request":
        return _rewrite_request(text, role, state.common_words, keep_you)
    if kind == "commitment":
        return _rewrite_statement(promised_part(text), role, state.common_words, keep_you)
    if kind == "refusal":
        return _rewrite_statement(reason_last(text), role, state.common_words, keep_you)
    return _rewrite_statement(text, role, state.common_words, keep_you)


def _is_vague(text: str, kind: str) -> bool:
    tokens = content_tokens(text) - VAGUE_WORDS
    if kind == "request":
        tokens -= {"requested"}
    if kind == "refusal":
        tokens -= REFUSAL_WORDS
    return not tokens


# "Or is a soft case enough?", "Especially for beginners?": the rest of the question
# before it, which the answer note or the question itself already carries.
_QUESTION_FRAGMENT = re.compile(r"^(?:or|especially|and|also|like|maybe|perhaps)\b", re.IGNORECASE)


def _split_question(text: str) -> list[str]:
    """ "I'm struggling with Chinese, can you help?" holds a fact and a question; each is
    judged on its own."""
    cut = text.rfind(", ")
    if not text.endswith("?") or cut < 0 or len(text[:cut].split()) < 3:
        return [text]
    tail = text[cut + 2 :]
    return [text[:cut] + ".", tail[:1].upper() + tail[1:]]


@dataclass(frozen=True)
class Turn:
    """A message with what its neighbours say about it: who it was said to (a name, when
    the message before it named its speaker) and whether it is a short support answer."""

    message: SourceMessage
    listener: str = ""
    short: bool = False
    # Said among several people with nobody named: "you" is "they", not a guessed name.
    keep_you: bool = False


# "For the party I need a main course": what a phrase before the need says goes after it,
# so that the need is read as one ("I need a main course for the party").
_FRONTED_NEED = re.compile(
    r"^(?P<lead>(?:for|at|on|in|by|before|after|with|about)\s+[^,.;:!?]{2,40}?),?\s+"
    r"(?P<need>(?:i|we)(?:'d|\s+would)?\s+(?:need|want|like|love)\b.*?)(?P<end>[.!?]*)$",
    re.IGNORECASE,
)
# "The user is planning a dinner party": a system message that says something of the user.
_ABOUT_THE_USER = re.compile(
    r"^(?:the\s+)?user\s+(?=(?:is|was|has|had|will|wants|needs|"
    r"likes|prefers|plans|lives|works|asked|said)\b)",
    re.IGNORECASE,
)


def _need_first(text: str) -> str:
    fronted = _FRONTED_NEED.match(text)
    if fronted is None:
        return text
    lead = fronted.group("lead")
    return f"{fronted.group('need')} {lead[:1].lower()}{lead[1:]}{fronted.group('end')}"


def _clause(text: str, turn: Turn, state: WindowState, detail: Detail) -> Clause | None:
    message = turn.message
    if message.role == "assistant" and SELF_DESCRIPTION.search(text.lower()):
        return None  # "As an AI, I can't go for walks": about the assistant, not the user
    if message.role == "system":
        return _system_clause(text, turn, state)
    if message.role == "user":
        text = _need_first(text)
    text = without_trailing_off(text)
    if not text:
        return None  # nothing but words that trailed off
    sentence = _trim_long(
        Sentence.of(text),
        message.role,
        state,
        detail.max_sentence_words,
        short=turn.short,
    )
    verdict = classify(
        sentence,
        message.role,
        state,
        short=turn.short,
        to_person=bool(turn.listener) or turn.keep_you,
    )
    if verdict is None:
        return None
    kind, priority = verdict
    dated_text, referenced_at = absolute_dates(sentence, message)
    rewritten = rewrite(dated_text, kind, message.role, state, keep_you=turn.keep_you)
    if _is_vague(rewritten, kind) or (kind == "introduction" and _known_speaker(rewritten, turn)):
        return None
    return _said(rewritten, turn, state, kind=kind, priority=priority, referenced_at=referenced_at)


def _system_clause(text: str, turn: Turn, state: WindowState) -> Clause | None:
    """What a system message says of the user ("The user is planning a dinner party"),
    as a fact about them; its instructions to the assistant are not memory."""
    about = _ABOUT_THE_USER.match(text)
    if about is None:
        return None
    fact = "User " + text[about.end() :].rstrip(" .!;:")
    return _said(fact, turn, state, kind="fact", priority=MEDIUM)


def _known_speaker(introduction: str, turn: Turn) -> bool:
    """ "I'm Maria" from Maria: the note would say that Maria's name is Maria."""
    name = introduction.rsplit(" is ", 1)[-1].lower().split()
    return bool(turn.message.speaker) and set(name) <= set(turn.message.speaker.lower().split())


def _said(
    text: str,
    turn: Turn,
    state: WindowState,
    *,
    kind: str,
    priority: str,
    referenced_at: datetime | None = None,
) -> Clause:
    """A rewritten clause with the participants' names, remembered."""
    message = turn.message
    named = as_said_by(text, message.role, message.speaker, turn.listener, said=message.content)
    if named != text and _named_twice(named, message.speaker, turn.listener):
        # "and marketing, I'm gonna ..." from Marketing: "marketing Marketing is gonna".
        named = without_stutter(named)
    text = _with_role(_short_names(named, state), turn, state)
    state.remember(text)
    return Clause(
        text=text,
        priority=priority,
        kind=kind,
        message=message,
        referenced_at=referenced_at,
        tokens=content_tokens(text),
    )


def _named_twice(text: str, *names: str) -> bool:
    """Does a word of these names come twice in the text? Only then can putting the names
    in have made a word come again at once."""
    lower = text.lower()
    return any(lower.count(word) > 1 for name in names for word in name.lower().split())


def _short_names(text: str, state: WindowState) -> str:
    """ "Monica Geller said Monica's mother ...": a speaker's full name once in memory,
    the first name after it."""
    for name, first in state.first_names.items():
        if name not in text:
            continue
        if name in state.named:
            text = text.replace(name, first)
        else:
            head, found, tail = text.partition(name)
            text = head + found + tail.replace(name, first)
            state.named.add(name)
    return text


def _with_role(text: str, turn: Turn, state: WindowState) -> str:
    """ "Tom, the agent, will call Maria back": between two named people, an agent's name
    says which side they are on the first time memory meets it."""
    name = turn.message.speaker
    if turn.message.role != "assistant" or not (name and turn.listener):
        return text
    if not text.startswith(f"{name} "):
        return text
    if name in state.introduced:
        return text
    state.introduced.add(name)
    return f"{name}, the agent, {text[len(name) + 1 :]}"


def message_clauses(
    message: SourceMessage,
    state: WindowState,
    detail: Detail = DETAIL[DEFAULT_FIDELITY],
    *,
    listener: str = "",
    keep_you: bool = False,
) -> list[Clause]:
    """The sentences of one conversational message worth keeping, rewritten; for an
    assistant message, also what its answer named (answers.py). ``listener``: the name of
    who the message answers, when the message before it named its speaker."""
    short = message.role == "assistant" and len(message.content.split()) <= SHORT_TURN_WORDS
    turn = Turn(message, listener, short, keep_you=keep_you and message.role == "user")
    replied = _reply_clauses(turn, state)
    if message.role == "user" and replied is None:
        state.heard_user(message.content)  # a detail given asks nothing new
    state_asks(message, state)
    if replied is not None:
        return replied
    direction = stage_direction(message.content)
    if direction is not None:
        return _setting_clauses(direction, turn, state)
    clauses: list[Clause] = []
    text = message.content
    if message.role == "assistant":
        # List items are the answer note's; here only the prose, without markup.
        may_matter = short_answer_may_matter(text) if short else answer_may_matter(text)
        text = prose_text(text) if may_matter else ""
    else:
        if "```" in text or "{" in text or ";" in text:
            text = without_code(text)  # pasted code is not something said
        text = without_disfluencies(text)  # speech is transcribed as people's turns
    said: set[str] = set()  # sentences kept as clauses, which the answer note skips
    if text:
        for raw in split_sentences(text):
            cleaned = clean_sentence(raw)
            if cleaned is None:
                continue
            spoken_to = _spoken_to(raw, turn, state)
            for part in _split_question(cleaned):
                if part.endswith("?") and _QUESTION_FRAGMENT.match(part):
                    continue
                clause = _clause(part, spoken_to, state, detail)
                if clause is not None:
                    clauses.append(clause)
                    said.add(raw)
        clauses = _cap_clauses(clauses)
    if message.role == "assistant":
        answer = answer_note(
            message.content, state.known_text(), detail, said=said, speaker=message.speaker
        )
        if answer is not None:
            clauses.append(_said(answer, turn, state, kind="answer", priority=LOW))
    return clauses


# A transcript's words that nobody says: "[Scene: Central Perk, the gang is there.]",
# "(The waitress brings their coffee.)", "[laughter]".
_STAGE_DIRECTION = re.compile(r"^\s*(?:\[(?P<square>[^\[\]]*)\]|\((?P<round>[^()]*)\))\s*$")
_SCENE = re.compile(r"^(?:scene|setting|location)\s*:\s*(?P<place>.+)$", re.IGNORECASE | re.DOTALL)
SCENE_WORDS = 20  # of a scene heading a note keeps, in whole clauses
ACTION_WORDS = 30  # of what a direction says happens, in whole sentences (the first always)
ACTION_MIN_WORDS = 2  # "(Music starts)", "[laughter]": no event


def stage_direction(content: str) -> str | None:
    """The inside of a message that is all one bracketed direction, or None."""
    match = _STAGE_DIRECTION.match(content)
    if match is None:
        return None
    return (match.group("square") or match.group("round") or "").strip()


def _setting_clauses(direction: str, turn: Turn, state: WindowState) -> list[Clause]:
    """A scene heading becomes a note of where what follows happens ("Scene: Central
    Perk, the gang is there"); what a direction says happens ("Carol suddenly screams in
    pain and grabs Chandler by the shirt", the rest of a heading) is an event, as it is
    written: no one said it. A direction of a word or two ("[laughter]", "(Music
    starts)") leaves no note."""
    scene = _SCENE.match(direction)
    sentences = split_sentences(" ".join((scene.group("place") if scene else direction).split()))
    notes: list[Clause] = []
    if scene is not None and sentences:
        # Where, and who is there: the heading's first sentence, in as many whole clauses
        # as fit in SCENE_WORDS (the first always), never cut inside one; a clause that
        # trails off goes ("Ross and Rachel are about to...").
        first = without_trailing_off(sentences.pop(0))
        clauses = [c.strip() for c in first.rstrip(" .;:…").split(", ") if c.strip()]
        if clauses:
            place = ", ".join(whole_clauses(clauses, SCENE_WORDS))
            notes.append(_said(f"Scene: {place}", turn, state, kind="setting", priority=MEDIUM))
    happened = [s for s in (without_trailing_off(s).rstrip(" .;:") for s in sentences) if s]
    if sum(len(s.split()) for s in happened) > ACTION_MIN_WORDS:
        action = "; ".join(whole_clauses(happened, ACTION_WORDS))
        notes.append(
            _said(action[:1].upper() + action[1:], turn, state, kind="event", priority=LOW)
        )
    return notes


def _spoken_to(raw: str, turn: Turn, state: WindowState) -> Turn:
    """The turn, said to whom the sentence names ("Monica, would you calm down?") when it
    names someone: a speaker of the window by their full name."""
    if turn.message.role != "user" or "," not in raw:
        return turn
    name = addressee(raw)
    if name is None:
        return turn
    return replace(turn, listener=state.full_names.get(name, name), keep_you=False)


def _reply_clauses(turn: Turn, state: WindowState) -> list[Clause] | None:
    """A reply that gives details ("Crystal Minh" to "may I have your name?") as the note
    of what it gives ("User's name is Crystal Minh"), or none for a login name or a bare
    identifier nobody asked about; None when the message is to be read sentence by
    sentence."""
    message = turn.message
    if message.role != "user":
        return None  # the customer gives details; the agent's answers are read as such
    # An agent asks a customer for details; among colleagues a short reply is talk.
    asked = state.asked if state.asked_by[0] == "assistant" else None
    given = given_detail(message.content, asked)
    if given is not None:
        if given.value is None:
            return []  # a login name is not a fact about anyone
        speaker = speaker_names(message.role)[0]
        text = f"{speaker}'s {given.detail} is {given.value}"
        return [_said(text, turn, state, kind="detail", priority=MEDIUM)]
    if is_bare_identifier(message.content):
        return []  # an id without what it identifies
    return None


# A question for details closes a message: the end of a long one is enough to read.
ASKING_TAIL_CHARACTERS = 400


def state_asks(message: SourceMessage, state: WindowState) -> None:
    """Remember the details this message asks for, for the replies after it."""
    if message.role != "assistant":
        return  # only an agent's questions for details are paired with replies
    tail = message.content[-ASKING_TAIL_CHARACTERS:]
    if "?" not in tail and "need" not in tail:
        return  # "may I have your name?", "I'd just need your phone number"
    before = state.asked.pending
    state.asked.ask(tail)
    if state.asked.pending is not before:
        state.asked_by = (message.role, message.speaker)


def _cap_clauses(clauses: list[Clause]) -> list[Clause]:
    if len(clauses) <= MAX_CLAUSES_PER_MESSAGE:
        return clauses
    ranked = sorted(range(len(clauses)), key=lambda i: (-PRIORITY_STRENGTH[clauses[i].priority], i))
    keep = sorted(ranked[:MAX_CLAUSES_PER_MESSAGE])
    return [clauses[i] for i in keep]
