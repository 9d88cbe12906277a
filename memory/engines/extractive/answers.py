"""Answers: what an assistant message told the user, as one note.

Later questions ask what the assistant said: the fourth brand of a list, the deli it
named, how many minutes it said to wait. Most of an answer is advice nobody asks about
again; what they ask about is its names, numbers and the items of its lists. A list
becomes its items' heads ("Duolingo; Rosetta Stone; Memrise"), each with the numbers its
description gives; prose gives the names and numbers it mentions that memory does not
hold yet. How much of that is kept is the workspace's fidelity (``Detail``)."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from memory.engines.base import DEFAULT_FIDELITY
from memory.engines.dates import MONTH_PATTERN
from memory.engines.extractive.cues import RECOMMENDATION
from memory.engines.extractive.sentences import (
    NOT_NAMES,
    QUOTED,
    names_in,
    split_sentences,
    third_person,
)
from memory.engines.extractive.vocabulary import STOPWORDS, Sentence, wordset


@dataclass(frozen=True)
class Detail:
    """What one fidelity level keeps of an assistant answer."""

    list_items: int  # item heads kept per list, 0: lists are not kept
    item_numbers: bool  # "Tomato (10 minutes)": the numbers of an item's description
    item_gist_words: int  # words of an item's description kept beside its head, 0: none
    prose_mentions: int  # names and numbers of the prose kept per message, 0: none
    max_sentence_words: int  # longer sentences of any speaker keep only whole clauses


DETAIL = {
    "compact": Detail(
        list_items=4, item_numbers=False, item_gist_words=0, prose_mentions=0,
        max_sentence_words=16,
    ),
    "balanced": Detail(
        list_items=8, item_numbers=True, item_gist_words=0, prose_mentions=6,
        max_sentence_words=24,
    ),
    "detailed": Detail(
        list_items=12, item_numbers=True, item_gist_words=12, prose_mentions=12,
        max_sentence_words=40,
    ),
}  # fmt: skip


def detail_for(fidelity: str) -> Detail:
    return DETAIL.get(fidelity, DETAIL[DEFAULT_FIDELITY])


# "1. Veja - French sneakers", "- **Memrise**: mnemonics", "• Tea bags: 10-15 minutes".
_LIST_ITEM = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*•])\s+(?P<body>\S.*)$")
_BOLD = re.compile(r"\*\*(?P<bold>[^*]{1,80})\*\*")
# A head ends at " - ", " – ", ": " or the first sentence end, whichever comes first.
_HEAD_END = re.compile(r"\s+[-–—]\s+|:\s+|:$|(?<=[a-z0-9)])\.(?:\s|$)")
MAX_HEAD_WORDS = 7
# A number with what it counts: "38 subjects", "5 business days", "$250", "20%", "1:10".
_NOT_COUNTED = (STOPWORDS - {"s", "t"}) | wordset(
    "within per daily weekly each after before until since during ago than less like"
)
_COUNTED = rf"(?!(?:{'|'.join(sorted(_NOT_COUNTED, key=len, reverse=True))})\b)[a-z]{{2,}}"
_QUANTITY = re.compile(
    rf"(?<![\w.])(?:[$€£]\s?)?\d[\d,.:/-]*(?:\s?%|\s+{_COUNTED}(?:\s+{_COUNTED})?)?"
)
# A month (capitalised: "you may 2" is no date) and its day, with its year if said.
_MONTH_DAY = re.compile(
    rf"\b(?=[A-Z])(?i:{MONTH_PATTERN})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b"
)
_MARKUP = re.compile(r"[*_`#]+")
_WORD_BOUNDARY = re.compile(r"\s+")


def _plain(text: str) -> str:
    return _WORD_BOUNDARY.sub(" ", _MARKUP.sub("", text)).strip(" ,;:-–—")


def quantities(text: str) -> list[str]:
    """Numbers with the word they count, in order, each once."""
    found = (m.group(0).rstrip(".,:/- ") for m in _QUANTITY.finditer(text))
    return list(dict.fromkeys(q for q in found if any(c.isdigit() for c in q)))


@dataclass(frozen=True)
class Item:
    head: str
    description: str


def _item(body: str) -> Item | None:
    bold = _BOLD.match(body.strip())
    if bold:
        head = _plain(bold.group("bold"))
        description = _plain(body.strip()[bold.end() :])
    else:
        text = _plain(body)
        end = _HEAD_END.search(text)
        if end is None:
            head, description = text, ""
        else:
            head, description = text[: end.start()], text[end.end() :]
    if head.count("(") > head.count(")"):
        head = head[: head.rindex("(")]  # "Streamers (e.g. Clouser)" ended at "e.g."
    head = head.rstrip(" .:")
    if head.endswith("?"):
        return None  # "What's your budget?": a question to the user, not an item
    if not head or len(head.split()) > MAX_HEAD_WORDS:
        return None  # a sentence, not a head: the prose rules read it
    return Item(head=head, description=description.strip())


def _gist(description: str, words: int) -> str:
    """The description's first clause when it is short enough to keep whole."""
    first = re.split(r"[.;!?]\s|,\s+(?:and|but|which|while)\s", description, maxsplit=1)[0]
    first = first.strip(" ,.;")
    return first if 0 < len(first.split()) <= words else ""


def _render_item(item: Item, detail: Detail) -> str:
    extras: list[str] = []
    if detail.item_gist_words:
        gist = _gist(item.description, detail.item_gist_words)
        if gist.lower().startswith(item.head.lower() + " "):
            gist = gist[len(item.head) + 1 :]  # "Duolingo (offers ...)", not "(Duolingo offers"
        if gist:
            extras.append(third_person(gist, "assistant"))
    if detail.item_numbers and not extras:
        extras.extend(q for q in quantities(item.description) if q not in item.head)
    return f"{item.head} ({', '.join(extras)})" if extras else item.head


def _is_known(text: str, known: str, speaker: str = "") -> bool:
    """Whether memory (``known``, lower-cased) holds ``text``, or it is a part of the
    speaker's own name (lower-cased): "Lee here from billing" mentions nobody new."""
    lowered = text.lower()
    return lowered in known or (bool(speaker) and lowered in speaker)


_CODE_CHARACTERS = re.compile(r"[=(){}\[\]<>;]|\w\.\w+\(")


_CODE_LINE = re.compile(
    r"[{};]\s*$|^\s*[}\])]|:=|==|=>|->|"
    r"^\s*(?:def|class|import|from|return|const|let|var|function|public|private)\s.*[:{(;=]"
)


def _looks_like_code(line: str) -> bool:
    return len(_CODE_CHARACTERS.findall(line)) >= 3 or _CODE_LINE.search(line) is not None


def list_items(content: str) -> tuple[list[Item], list[str]]:
    """(the items of the message's lists, the lines that are not list items)."""
    items: list[Item] = []
    prose: list[str] = []
    in_code = False
    for line in content.splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code or _looks_like_code(line):
            continue  # names in code are identifiers, not what anyone will ask about
        match = _LIST_ITEM.match(line)
        item = _item(match.group("body")) if match else None
        if item is None:
            prose.append(line)
        else:
            items.append(item)
    return items, prose


# Capitalised words that head a section rather than name something.
_SECTION_WORDS = wordset(
    """Overview Introduction Conclusion Summary Step Steps Example Examples Note Tip Tips
    Benefits Methodology Option Options Ingredients Instructions Call Use Add Make Keep"""
)


def _is_name(name: str) -> bool:
    """ "Roscioli", "Music and Medicine", "Nu, pogodi!"; not "there", "MR" or "Overview"."""
    words = name.split()
    if len(words) > 6 or name[-1:] in ".!?,":
        return False  # a quoted sentence ("I love you too, kitten."), not a title
    if not name[:1].isupper() or name in NOT_NAMES or words[0] in _SECTION_WORDS:
        return False
    return len(name) > 2 and not (len(words) == 1 and name.isupper() and len(name) <= 2)


def without_code(content: str) -> str:
    """The message without its fenced code blocks and lines that read as code."""
    kept: list[str] = []
    in_code = False
    for line in content.splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
        elif not in_code and not _looks_like_code(line):
            kept.append(line)
    return "\n".join(kept)


def prose_text(content: str) -> str:
    """The message without its list items and code, markup removed."""
    _, prose = list_items(content)
    return "\n".join(_MARKUP.sub("", line) for line in prose)


def _mentions(
    sentences: list[str], known: str, limit: int, speaker: str = ""
) -> tuple[list[str], bool]:
    """(names and counted numbers of the sentences that memory does not hold yet, whether
    a sentence naming them recommends)."""
    found: list[str] = []
    recommends = False
    for sentence in sentences:
        if sentence.rstrip().endswith("?"):
            continue  # "Have you tried Duolingo?" offers; the answer will say
        plain = _plain(sentence)
        quoted = {a or b for a, b in QUOTED.findall(plain)}
        before = len(found)
        # A day named with its month is one mention ("March 1"), not a name and a number;
        # blanked out, so that every mention keeps its place in the sentence.
        days = [(m.start(), m.group(0).replace(",", "")) for m in _MONTH_DAY.finditer(plain)]
        plain = _MONTH_DAY.sub(lambda m: " " * len(m.group(0)), plain)
        named = []
        for name in names_in(plain):
            name = name.strip(" ,;:'\"")
            if _is_name(name):
                named.append((plain.find(name), f'"{name}"' if name in quoted else name))
        counted = [(plain.find(q), q) for q in quantities(plain)]
        in_order = sorted(days + named + counted, key=lambda pair: pair[0])
        found.extend(m for _, m in in_order if not _is_known(m.strip('"'), known, speaker))
        if len(found) > before and RECOMMENDATION.found(Sentence.of(plain)):
            recommends = True
    return list(dict.fromkeys(found))[:limit], recommends


def answer_note(
    content: str,
    known: str,
    detail: Detail,
    *,
    said: Collection[str] = (),
    speaker: str = "",
) -> str | None:
    """ "Assistant listed Duolingo; Memrise; mentioned Pizzarium, 38 subjects", or None
    when the message names nothing new. ``known`` is memory's text, lower-cased; ``said``
    are the message's sentences already kept as notes of their own; ``speaker`` the name
    of who wrote it, which is no news either."""
    speaker = speaker.lower()
    items, _ = list_items(content)
    parts: list[str] = []
    if detail.list_items and items:
        unknown = {i.head.lower(): i for i in items if not _is_known(i.head, known, speaker)}
        fresh = list(unknown.values())[: detail.list_items]
        if fresh:
            parts.append("listed " + "; ".join(_render_item(i, detail) for i in fresh))
    if detail.prose_mentions:
        heads = {i.head.lower() for i in items}
        sentences = [x for x in split_sentences(prose_text(content)) if x not in said]
        mentions, recommends = _mentions(sentences, known, detail.prose_mentions * 2, speaker)
        mentions = [m for m in mentions if m.lower() not in heads][: detail.prose_mentions]
        if mentions:
            verb = "recommended" if recommends else "mentioned"
            parts.append(f"{verb} " + ", ".join(mentions))
    if not parts:
        return None
    return "Assistant " + "; ".join(parts)
