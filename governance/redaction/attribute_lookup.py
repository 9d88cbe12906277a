"""The pipeline's attribute ruler, matched by lookup instead of by spaCy's ``Matcher``.

Why. The attribute ruler sets each token's coarse part of speech, morphology and a few
lemmas from its fine-grained tag and its word (179 rules in ``en_core_web_sm``). spaCy's
``Matcher`` tries every rule at every token: 0.72 s of the 5.4 s the engine's pipeline
spent on 1,000 contextual texts (0.25 s of 2.1 s on short ones), more than the tagger
(``bench/redaction_throughput.py``). The rules are short and fixed, and a token of a rule
holds or not by the token's tag, dependency label, space flag and lower-case form, so:

- a rule whose first token names words (``LOWER``) is tried only where one of them is;
- a token of a rule that names no word holds or not by (tag, dependency, space), found
  once and then looked up;
- the few others (a word matched by a pattern) are tried everywhere, as spaCy does.

The matches are the ``Matcher``'s, once each, in the order the ruler applies them
(``tests/governance/test_redaction_engine.py`` compares them token by token), so every
part of speech, lemma and morphology, and so every detection, is the same. ``install``
leaves the ruler as it is when a rule uses anything else (an operator, another
attribute). Nothing is kept per word read: the outcomes are kept per (tag, dependency,
space), a few thousand at most.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

# The token attributes and operators the lookup understands; a rule with any other
# leaves the ruler as spaCy made it.
_ATTRIBUTES = frozenset({"TAG", "DEP", "IS_SPACE", "LOWER"})
_OPERATORS = frozenset({"IN", "NOT_IN", "REGEX"})


class _Check:
    """A test of one attribute's value, as a string: equal to a value, in or not in a
    list, or matching a regular expression (a class, not a closure: the pipeline stays
    picklable for spaCy's worker processes)."""

    def __init__(self, value: Any) -> None:
        self.operator = "=="
        self.argument: Any = value
        if isinstance(value, dict) and len(value) == 1 and set(value) <= _OPERATORS:
            [(self.operator, argument)] = value.items()
            if self.operator == "REGEX" and isinstance(argument, str):
                self.argument = re.compile(argument)
            elif isinstance(argument, list) and all(isinstance(item, str) for item in argument):
                self.argument = frozenset(argument)
            else:
                raise ValueError(f"an attribute ruler predicate not looked up: {value!r}")
        elif not isinstance(value, str):
            raise ValueError(f"an attribute ruler predicate not looked up: {value!r}")

    def __call__(self, found: str) -> bool:
        if self.operator == "==":
            return bool(found == self.argument)
        if self.operator == "IN":
            return found in self.argument
        if self.operator == "NOT_IN":
            return found not in self.argument
        return bool(self.argument.search(found))


class _TokenPattern:
    """One token of a rule's pattern, compiled to checks on the token's tag, dependency,
    space flag (as "1" or "0") and lower-case form. ``words``: the hashes of the words it
    names, when it names them (``LOWER`` as a word or ``IN`` a list)."""

    def __init__(self, pattern: dict[str, Any], strings: Any) -> None:
        self.checks: dict[str, _Check] = {}
        self.words: frozenset[int] | None = None
        for attribute, value in pattern.items():
            if attribute not in _ATTRIBUTES:
                raise ValueError(f"an attribute ruler pattern key not looked up: {attribute}")
            self.checks[attribute] = _Check(
                ("1" if value else "0") if isinstance(value, bool) else value
            )
        words = pattern.get("LOWER")
        if isinstance(words, str):
            self.words = frozenset({strings.add(words)})
        elif isinstance(words, dict) and list(words) == ["IN"]:
            self.words = frozenset(strings.add(word) for word in words["IN"])
        self.reads_word = "LOWER" in self.checks

    def holds(self, values: dict[str, str]) -> bool:
        return all(check(values[attribute]) for attribute, check in self.checks.items())


class AttributeLookup:
    """``match`` and ``set_annotations`` for one ``AttributeRuler`` (see the module's
    docstring): the same matches as the ruler's own ``match``, in the same order."""

    def __init__(self, ruler: Any) -> None:
        self.ruler = ruler
        self.strings = ruler.vocab.strings
        self.columns = ["TAG", "DEP", "IS_SPACE", "LOWER"]
        # (rule number, match id, token patterns) of every pattern of every rule.
        self.patterns: list[tuple[int, int, tuple[_TokenPattern, ...]]] = []
        for rule_id, rule in enumerate(ruler.patterns):
            key = self.strings.add(str(rule_id))
            for pattern in rule["patterns"]:
                if not pattern:
                    raise ValueError("an empty attribute ruler pattern")
                tokens = tuple(_TokenPattern(token, self.strings) for token in pattern)
                self.patterns.append((rule_id, key, tokens))
        # Patterns by the words one of their tokens names (the anchor: its offset in the
        # pattern); single tokens that name no word, by what they hold for; the rest
        # (a word matched by a pattern, with no word named beside it) are tried everywhere.
        self.by_word: dict[int, list[tuple[int, int, tuple[_TokenPattern, ...], int]]] = {}
        self.by_shape: list[tuple[int, int, _TokenPattern]] = []
        self.everywhere: list[tuple[int, int, tuple[_TokenPattern, ...], int]] = []
        for rule_id, key, tokens in self.patterns:
            anchor = next((i for i, token in enumerate(tokens) if token.words is not None), None)
            if anchor is not None:
                for word in tokens[anchor].words or ():
                    self.by_word.setdefault(word, []).append((rule_id, key, tokens, anchor))
            elif len(tokens) == 1 and not tokens[0].reads_word:
                self.by_shape.append((rule_id, key, tokens[0]))
            else:
                self.everywhere.append((rule_id, key, tokens, 0))
        # What holds for a token by its (tag, dep, space): the single-token patterns that
        # name no word, and each token pattern of the others that reads no word.
        self.shapes: dict[tuple[int, int, int], tuple[tuple[int, int], ...]] = {}
        self.outcomes: dict[tuple[_TokenPattern, int, int, int], bool] = {}

    def _holds(self, token: _TokenPattern, row: tuple[int, int, int, int]) -> bool:
        tag, dep, space, lower = row
        if token.words is not None and lower not in token.words:
            return False
        if not token.reads_word:
            key = (token, tag, dep, space)
            outcome = self.outcomes.get(key)
            if outcome is None:
                outcome = self.outcomes[key] = token.holds(self._values(row))
            return outcome
        return token.holds(self._values(row))

    def _values(self, row: tuple[int, int, int, int]) -> dict[str, str]:
        tag, dep, space, lower = row
        return {
            "TAG": self.strings[tag],
            "DEP": self.strings[dep],
            "IS_SPACE": "1" if space else "0",
            "LOWER": self.strings[lower],
        }

    def _by_shape(self, row: tuple[int, int, int, int]) -> tuple[tuple[int, int], ...]:
        shape = (row[0], row[1], row[2])
        found = self.shapes.get(shape)
        if found is None:
            values = self._values(row)
            found = tuple((rule_id, key) for rule_id, key, t in self.by_shape if t.holds(values))
            self.shapes[shape] = found
        return found

    def match(self, doc: Any) -> list[tuple[int, int, int, int]]:
        """(rule number, match id, start, end) of every match, once each, sorted as the
        ruler sorts them: a later rule overrides an earlier one."""
        rows = [tuple(row) for row in doc.to_array(self.columns).tolist()] if len(doc) else []
        found: set[tuple[int, int, int, int]] = set()
        for at, row in enumerate(rows):
            found.update((rule_id, key, at, at + 1) for rule_id, key in self._by_shape(row))
            for rule_id, key, tokens, anchor in (*self.by_word.get(row[3], ()), *self.everywhere):
                first, end = at - anchor, at - anchor + len(tokens)
                if (
                    first >= 0
                    and end <= len(rows)
                    and all(
                        self._holds(token, rows[first + offset])
                        for offset, token in enumerate(tokens)
                    )
                ):
                    found.add((rule_id, key, first, end))
        return sorted(found)

    def set_annotations(self, doc: Any, matches: Sequence[tuple[int, int, int, int]]) -> None:
        """The ruler's own ``set_annotations`` without a ``Span`` per match: the token
        at the rule's index in the matched span gets the rule's attributes."""
        from spacy.tokens._retokenize import set_token_attrs

        for rule_id, key, start, end in matches:
            index = self.ruler.indices[rule_id]
            target = start + index if index >= 0 else end + index
            if not start <= target < end:
                self.ruler.set_annotations(doc, [(rule_id, key, start, end)])  # its error
                continue
            set_token_attrs(doc[target], self.ruler.attrs[rule_id])


def install(nlp: Any) -> bool:
    """Let the pipeline's attribute ruler match by lookup; False (and the ruler left as
    it is) when it has no attribute ruler or a rule the lookup does not understand."""
    if "attribute_ruler" not in nlp.pipe_names:
        return False
    ruler = nlp.get_pipe("attribute_ruler")
    try:
        lookup = AttributeLookup(ruler)
    except ValueError:
        return False
    ruler.match = lookup.match
    ruler.set_annotations = lookup.set_annotations
    return True
