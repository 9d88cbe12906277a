"""Cues: the word gates and patterns that say what a sentence is (a preference, a plan,
an event, a problem, a request, a promise, a finished task) before it is kept or dropped."""

from __future__ import annotations

import re
from dataclasses import dataclass

from memory.engines.extractive.vocabulary import Sentence, wordset


@dataclass(frozen=True)
class Cue:
    """A pattern over the lowercase sentence, tried only when one of its gate words is
    present: a set test costs far less than scanning with a large alternation, and most
    sentences fail it. Without a pattern, the gate alone decides."""

    gate: frozenset[str]
    pattern: re.Pattern[str] | None = None

    def found(self, sentence: Sentence) -> bool:
        if self.gate.isdisjoint(sentence.words):
            return False
        return self.pattern is None or self.pattern.search(sentence.lower) is not None


def _cue(gate: str, pattern: str | None = None) -> Cue:
    return Cue(wordset(gate), re.compile(pattern) if pattern else None)


# Questions about the assistant itself ("Do you like music?", "Have you seen it?"), as
# opposed to requests addressed to it ("Do you know any good hiking trails?").
SMALL_TALK_QUESTION = _cue(
    "you your",
    r"\b(?:how\s+are\s+you|how\s+have\s+you\s+been|what\s+about\s+you|and\s+you|"
    r"how\s+(?:was|is)\s+your|what\s+do\s+you\s+(?:think|usually|like)|don't\s+you\s+think|"
    r"what(?:'s|\s+is)\s+your\s+favou?rite|(?:are|were)\s+you|"
    r"(?:do|does|did)\s+you\s+(?:like|enjoy|love|prefer|think|feel|usually|ever|remember|"
    r"know\s+that|have\s+(?:any\s+)?(?:hobbies|feelings|friends|a\s+favou?rite))|"
    r"(?:have|had)\s+you\s+(?:ever|heard|seen|been|tried|read|watched)|"
    r"can\s+you\s+(?:taste|eat|feel|go|come|dream|travel))\b",
)
EXPLICIT_REQUEST = _cue(
    "please can could would will may i i'd help remind let",
    r"^(?:please\b|(?:can|could|would|will)\s+(?:you|i|we)\b|may\s+i\b|"
    r"i(?:'d|\s+would)\s+like\b|i\s+(?:need|want)\s+(?!to\b)|help\s+me\b|remind\s+me\b|"
    r"let\s+me\s+(?:know|have|get)\b)|\bplease\s*[.!]?$",
)
IMPERATIVE_VERBS = wordset(
    "give send book order cancel check find show tell add remove change make get reset update "
    "schedule call email refund replace fix explain remind list"
)
PREFERENCE = _cue(
    "like love enjoy prefer hate dislike adore stand likes loves enjoys prefers favorite "
    "favourite preferred rather into fan fond allergic vegetarian vegan",
    r"\b(?:(?:i|we)\s+(?:\w+\s+){0,2}?(?:like|love|enjoy|prefer|hate|dislike|adore|"
    r"can'?t\s+stand)|(?:likes|loves?|enjoys?|prefers?|favou?rite|preferred|rather)\b|"
    # "like" with someone who likes: not the "like" of speech ("we'll have like a meeting")
    r"(?:you|they|he|she|people|would|'d|don't|do|does|doesn't|didn't)\s+like\b|"
    r"i'?m\s+(?:really\s+)?(?:into|a\s+fan\s+of|fond\s+of|allergic\s+to|vegetarian|vegan))",
)
IDENTITY = _cue(
    "name called call live work study grew teach am i'm years my",
    r"\b(?:my\s+name\s+is|i'?m\s+called|call\s+me|i\s+(?:live|work|study|grew\s+up|teach)|"
    r"i\s+am\s+(?:a|an)\b|i'?m\s+(?:a|an)\b|i'?m\s+\d+|years\s+old|my\s+(?:job|work|wife|"
    r"husband|partner|son|daughter|kids?|children|mom|mother|dad|father|parents|family|"
    r"friends?|boss|team|company|address|email|phone|birthday|age|dog|cat|pet|teacher|"
    r"school|university|major|account|order|card|plan|subscription))\b",
)
HABIT = _cue(
    "usually often always normally regularly sometimes never mainly mostly",
    r"\bi\s+(?:usually|often|always|normally|regularly|sometimes|never|mainly|mostly)\b",
)
# Something ahead: what one will do, and what one waits for or has booked ("I'm still
# waiting for my refund", "I have a flight on Friday"). "have a ..." is the speaker's
# own only: a meeting's "we have a meeting" is mostly the meeting itself.
_BOOKED = (
    "flight appointment meeting interview exam trip reservation booking surgery wedding "
    "party class call test deadline"
)
PLAN = _cue(
    "i'll we'll will going plan planning intend decided chose want wanted would i'd hope need "
    "registered signed booked enrolled waiting " + _BOOKED,
    r"\b(?:i|we)(?:'ll|\s+will|\s+am\s+going\s+to|'m\s+going\s+to|\s+plan|\s+am\s+planning|"
    r"'m\s+planning|\s+intend|\s+decided|\s+have\s+decided|'ve\s+decided|\s+chose|"
    r"(?:\s+just)?\s+want(?:ed)?\s+to|\s+would\s+like\s+to|'d\s+like\s+to|\s+hope\s+to|\s+need\s+to|"
    r"(?:\s+just)?\s+(?:registered|signed\s+up|booked|enrolled)|"
    r"(?:'m|\s+am|'re|\s+are)\s+(?:still\s+|also\s+|just\s+)?waiting\s+(?:for|on))\b|"
    r"\bi\s+have\s+(?:a|an)\s+(?:\w+\s+)?(?:" + _BOOKED.replace(" ", "|") + r")\b",
)
# "I've been waiting for two weeks" is an event as "I have been waiting" is. Only "'ve
# been": a meeting's "we've got" is mostly a state ("we've got twelve buttons"), and
# noting every "'ve got", "'ve had" cost QMSum its 5x (4.8x, docs/benchmarks.md).
EVENT = _cue(
    "went visited made bought saw met tried learned learnt started joined watched cooked ran "
    "climbed played finished moved traveled travelled had took attended read wrote won lost "
    "received ordered paid called sent found been passed got",
    r"\b(?:i|we)\s+(?:\w+\s+)?(?:went|visited|made|bought|saw|met|tried|learned|"
    r"learnt|started|joined|watched|cooked|ran|climbed|played|finished|moved|traveled|"
    r"travelled|had|took|attended|read|wrote|won|lost|received|ordered|paid|called|sent|found|"
    r"passed|got|have\s+been)\b|\b(?:i|we)'ve\s+(?:\w+\s+)?been\b",
)
PROBLEM = _cue(
    "problem problems issue issues error errors bug bugs broken fail failed fails failing "
    "failure crash crashed crashes crashing working work twice can't cannot unable wrong "
    "missing lost late delay delayed overcharged complain complained complaint complaints "
    "frustrated frustrating frustration angry upset stress stressed stressful anxious anxiety "
    "worried lonely sick ill pain hurt injured injury depressed depression overwhelmed "
    "confused struggle struggling struggled scared afraid nervous declined refused denied "
    "down low blue sad tired exhausted bored unhappy agitated well unwell difficulty "
    "difficulties difficult arrived arrive received receive delivered refunded shipped show "
    "shown keeps",
    r"\b(?:(?<!no\s)problems?|issues?|errors?|bugs?|broken|fail(?:ed|s|ing|ure)?|crash\w*|"
    r"not\s+working|doesn'?t\s+work|won'?t\s+work|can'?t|cannot|unable|wrong|missing|"
    r"lost|(?<!getting\s)late|delay(?:ed)?|overcharged|charged\s+twice|complain\w*|frustrat\w*|angry|"
    r"upset|stress(?:ed|ful)?|anxious|anxiety|worried|lonely|sick|ill|pain|hurt|injur\w*|"
    r"depress\w*|overwhelmed|confused|struggl\w*|scared|afraid|nervous|declined|refused|"
    r"denied|sad|exhausted|unhappy|agitated|unwell|difficult(?:y|ies)?|"
    r"not\s+feeling\s+(?:very\s+|so\s+|too\s+)?well|(?:feel|feeling|felt|am|i'm)\s+(?:a\s+bit\s+|so\s+|"
    r"really\s+|very\s+|quite\s+|a\s+little\s+)?(?:down|low|blue|tired|bored)|"
    # What never came ("it still hasn't arrived", "I didn't receive the code") and what
    # goes wrong again and again ("the app keeps logging me out").
    r"(?:hasn't|has\s+not|haven't|have\s+not|didn't|did\s+not|never)\s+(?:yet\s+)?(?:arrived?|"
    r"received?|been\s+(?:delivered|refunded|shipped|received)|shown\s+up|show\s+up)|"
    r"keeps\s+(?:logging|crashing|freezing|failing|dropping|disconnecting|restarting|"
    r"charging|timing\s+out|signing)|"
    # A service that is down ("my internet has been down since"), not a price that went down.
    r"(?:is|are|was|were|has\s+been|have\s+been|went|keeps\s+going)\s+(?:completely\s+|totally\s+)?"
    r"down(?!\s+(?:to|by|from|the|a|with|for|\d)\b))\b",
)
URGENT = _cue(
    "urgent urgently asap immediately right must deadline due later critical emergency",
    r"\b(?:urgent\w*|asap|immediately|right\s+away|(?:i|we)\s+must|must\s+(?!be\b)|deadline|"
    r"due|no\s+later\s+than|critical|emergency)\b",
)
COMMITMENT = _cue(
    "i'll we'll will shall promise guarantee going you'll",
    r"\b(?:(?:i|we)(?:'ll|\s+will|\s+shall|\s+promise|\s+guarantee|\s+am\s+going\s+to|"
    r"'m\s+going\s+to)|will\s+be\s+(?:sent|issued|refunded|delivered|processed|shipped|"
    r"credited|fixed|resolved)|you(?:'ll|\s+will)\s+(?:receive|get|see))\b",
)
# A promise worth holding the agent to names a concrete action (or a date or an amount).
CONCRETE_ACTION = _cue(
    "send sends sending refund refunds refunded refunding email emailing emailed call calling "
    "ship shipping shipped deliver delivering delivered delivery fix fixing fixed process "
    "processing processed book booking booked schedule scheduled scheduling cancel cancelling "
    "canceling cancelled canceled cancellation credit credited crediting reset escalate "
    "escalating escalated follow update updating updated remind reminder transfer "
    "transferring transferred issue issuing issued arrange arranging contact contacting "
    "replace replacing replacement investigate investigating resolve resolving resolved "
    "waive upgrade upgrading reimburse reimbursement notify notifying receive"
)
COMPLETION = _cue(
    "done complete completed finished resolved fixed solved issued refunded delivered shipped "
    "paid processed cancelled canceled closed sorted submitted confirmed approved"
)
RECOMMENDATION = _cue(
    "recommend recommends recommended recommendation recommendations suggest suggests "
    "suggested suggestion suggestions try consider check choice choices worth might",
    r"\b(?:recommend\w*|suggest\w*|try|consider|check\s+out|good\s+choices?|worth|"
    r"might\s+(?:want|like|enjoy))\b",
)
# What a short support answer decides, beside its promises: a refusal and its reason, a
# state, a duration, an amount. Read in short turns only: in a long answer "we can't" and
# "two weeks" are advice.
REFUSAL = _cue(
    "cannot can't unable able won't couldn't could unfortunately afraid eligible possible "
    "allowed permitted covered refundable don't do",
    r"\b(?:(?:we|i)\s+(?:really\s+)?(?:cannot|can't|can\s+not|couldn't|could\s+not|"
    r"(?:am|are|'m|'re)\s+(?:not\s+able|unable)|won't\s+be\s+able|will\s+not\s+be\s+able)"
    r"(?!\s+(?:be|help\s+but|say|wait|thank|imagine|stress|recommend|emphasi[sz]e)\b)|"
    r"(?:we|i)\s+(?:don't|do\s+not)\s+(?:offer|accept|allow|ship|refund|provide|support|sell|"
    r"deliver|cover|issue|take|exchange|match)\b|"
    r"unfortunately|not\s+(?:eligible|possible|allowed|permitted|covered|refundable)|"
    r"i'm\s+afraid\s+(?:we|i|that|it|this|there|the|not))\b",
)
# An AI describing itself ("as an AI, I can't go for a walk") decides nothing.
SELF_DESCRIPTION = re.compile(
    r"\b(?:as\s+an?\s+(?:ai|artificial|virtual|intelligent|language\s+model|digital|chatbot|"
    r"bot)|physical\s+(?:body|form|presence))\b"
)
# A later event someone else carries out: "a courier will call you", "it should arrive".
FUTURE = re.compile(
    r"\b(?:will|'ll|won't|is\s+going\s+to|are\s+going\s+to|should\s+(?:arrive|reach|be|get))\b"
)
# The agent's own finished action: "I have escalated it", "we've refunded the fee".
DONE_BY_SPEAKER = re.compile(
    r"\b(?:i|we)(?:'ve|\s+have|\s+just|\s+already)*\s+(?:just\s+|already\s+)?"
    r"(?:\w*[^\We]ed|sent|made|put|set|gave|given|let|told|spoke|wrote|left|got|taken|took)\b"
)
STATE = re.compile(
    r"\b(?:in\s+progress|pending|on\s+(?:its|the|their)\s+way|in\s+transit|out\s+for\s+"
    r"delivery|being\s+(?:processed|shipped|prepared|reviewed|handled)|on\s+hold|under\s+"
    r"review|(?:out\s+of|back\s+in)\s+stock|expired|approved|eligible)\b"
)
# What a rule grants or withholds, said in a support answer whether or not it was asked:
# "a broken zip is covered by the warranty", "discounts only apply to members".
POLICY = re.compile(
    r"\b(?:covered\s+(?:by|under)|under\s+(?:the\s+|our\s+|your\s+)?warranty|"
    r"qualif(?:y|ies)\s+for|appl(?:y|ies)\s+(?:only\s+)?to|non-?refundable|free\s+of\s+charge|"
    r"at\s+no\s+(?:extra\s+|additional\s+)?(?:cost|charge)|renews?\s+on|"
    r"no\s+(?:further|more|extra)\s+charges?|keep\s+access)\b"
)
# What the agent found wrong, and what to do until it is fixed: "that's a known bug in
# 4.2.1", "the carrier lost it"; "until then, turning off battery optimisation stops it".
DIAGNOSIS = re.compile(
    r"\b(?:known\s+(?:bug|issue|problem|fault)|outage|(?:was|were|got|been|has\s+been)\s+"
    r"(?:lost|damaged|misrouted|returned\s+to\s+sender)|lost\s+(?:it|them|the\s+\w+)|"
    r"defective|faulty|back-?ordered|recalled|discontinued)\b"
)
WORKAROUND = re.compile(
    r"\b(?:until\s+then|in\s+the\s+meantime|meanwhile|for\s+now|as\s+a\s+workaround)\b"
)
# A duration, an amount or a share someone can hold the speaker to: "3-5 business days",
# "a week", "$20", "15%"; not "a few days", nor minutes, over before anyone reads them.
DECISIVE_QUANTITY = re.compile(
    r"[$€£¥]\s?\d|\b\d[\d,.]*\s?(?:%|percent\b|dollars?\b|euros?\b|pounds?\b)|"
    r"\b(?:(?:\d+(?:\s?[-–]\s?\d+)?|two|three|four|five|six|seven|eight|nine|ten|eleven|"
    r"twelve|fourteen|fifteen|twenty|thirty|forty|sixty|ninety)\s+(?:business\s+|working\s+|"
    r"calendar\s+)?(?:hours?|days?|nights?|weeks?|months?|years?)|"
    r"an?\s+(?:business\s+)?(?:day|week|fortnight|month|year))\b",
    re.IGNORECASE,
)
# "is being processed", "in progress": not finished, whatever verb it uses.
UNFINISHED = re.compile(r"\b(?:being|in\s+progress|pending|not\s+yet)\b")


NEGATION_WORDS = wordset(
    "not never yet don't doesn't didn't isn't wasn't aren't weren't can't couldn't won't "
    "wouldn't shouldn't haven't hasn't hadn't"
)
ACKNOWLEDGED_ADVICE = _cue(
    "these those them it that this your you",
    r"\b(?:i|we)(?:'ll|\s+will|\s+am\s+going\s+to|'m\s+going\s+to)\s+(?:\w+\s+){0,5}?"
    r"(?:these|those|them|it|that|your|you|this(?!\s+(?:morning|afternoon|evening|week|"
    r"weekend|month|year|summer|winter|spring|autumn|fall)))\b|"
    r"\byou\s+(?:recommended|suggested|mentioned|said)\b",
)
# "I want to talk to you about ...": an announcement of a topic, not a fact.
META_TALK = _cue(
    "talk chat share ask discuss",
    r"\b(?:want(?:ed)?\s+to|would\s+like\s+to|'d\s+like\s+to|let's|here\s+to|back\s+to)\s+"
    r"(?:talk|chat|share|ask|discuss)\b",
)


def is_negated(sentence: Sentence) -> bool:
    return not NEGATION_WORDS.isdisjoint(sentence.words) or "no longer" in sentence.lower


# Money, a deadline or a promise in a finished note ("User's refund of $129 will arrive by
# Feb 17"): what an agent must not lose among background notes, whatever else it says.
_MONEY = re.compile(
    r"[$€£¥]\s?\d|\b\d[\d,.]*\s?(?:dollars?|euros?|pounds?|usd|eur|gbp)\b", re.IGNORECASE
)
_DEADLINE = re.compile(
    r"\b(?:deadline|due|no\s+later\s+than|expir\w*|within\s+\d+\s+(?:business\s+)?days?|"
    r"(?:by|before|until)\s+(?:(?:mon|tues|wednes|thurs|fri|satur|sun)day|tomorrow|"
    r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d))\b",
    re.IGNORECASE,
)
_PROMISE = re.compile(r"\b(?:will|promised?|guarantee[ds]?|committed)\b", re.IGNORECASE)


def never_background(text: str) -> bool:
    return bool(_MONEY.search(text) or _DEADLINE.search(text) or _PROMISE.search(text))
