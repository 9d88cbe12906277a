"""Tool output folded into one line per call with the salient values of its output: ids,
names, amounts, dates and status of a JSON payload, or counts, error lines and key: value
lines of plain text."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory.engines.base import SourceMessage
from memory.engines.dates import find_dates
from memory.engines.extractive.cues import COMPLETION, is_negated
from memory.engines.extractive.relative_dates import has_date
from memory.engines.extractive.vocabulary import (
    COMPLETED,
    HIGH,
    LOW,
    MEDIUM,
    Sentence,
    content_tokens,
    shorten,
    wordset,
)

MAX_TOOL_ITEMS = 12
MAX_LIST_ITEMS = 8
MAX_JSON_LEAVES = 20_000  # enough for any useful summary; bounds time on huge payloads
MAX_TEXT_LINES = 50_000
SHORT_TOOL_TEXT_WORDS = 40  # plain-text tool output up to this long is kept as it is
_ID_KEY = re.compile(r"(?:^|_)(?:id|uuid|number|no|ref|reference|code|sku|tracking\w*)$|Id$", re.I)
_NAME_KEY = re.compile(
    r"(?:^|_)(?:name|title|label|description|type|category|option|item|product|plan|"
    r"method|carrier|city|country|email|phone|notes?|comments?|instructions)$",
    re.IGNORECASE,
)
_AMOUNT_KEY = re.compile(
    r"(?:^|_)(?:price|amount|total|cost|fee|balance|quantity|qty|count|size|currency|"
    r"discount|tax|refund|credit|points|rating|score)$",
    re.IGNORECASE,
)
_DATE_KEY = re.compile(
    r"(?:^|_)(?:date|time|at|on|eta|due|deadline|created|updated|expires|expiry|start|end)$",
    re.IGNORECASE,
)
_STATUS_KEY = re.compile(
    r"^(?:status|state|success|ok|result|outcome|error|errors|message|reason)$", re.I
)
_PAIR_LABEL_KEYS = ("attribute_name", "name", "label", "key", "field", "title")
_PAIR_VALUE_KEYS = ("option", "options", "value", "values", "selected", "choice")
_DONE_STATUS = re.compile(
    r"^(?:delivered|completed?|done|closed|resolved|refunded|paid|cancell?ed|"
    r"succeeded|success|approved|fulfilled|finished|confirmed)$",
    re.IGNORECASE,
)
_FAILED_STATUS = re.compile(r"^(?:fail\w*|error|declined|rejected|denied|timeout|timed.out)$", re.I)
_FINISHING_TOOL = re.compile(
    r"(?:finish|complete|submit|confirm|place|cancel|refund|pay|send|book|close|checkout)", re.I
)
_ERROR_LINE = re.compile(
    r"\b(?:error|exception|fail\w*|fatal|traceback|denied|timeout|refused)\b", re.I
)
_KEY_VALUE_LINE = re.compile(r"^\s*([A-Za-z][\w .-]{0,30}?)\s*[:=]\s*(\S.{0,60})$")
_DIGITS = re.compile(r"\d+")


@dataclass
class ToolFold:
    """One tool call as one line, with the values it shows and every value it saw."""

    text: str
    priority: str
    shown: frozenset[str]
    options: frozenset[str]
    all_values: frozenset[str]
    primary_id: str | None
    referenced_at: datetime | None

    @property
    def tokens(self) -> frozenset[str]:
        return content_tokens(self.text)

    @property
    def visible_values(self) -> frozenset[str]:
        return self.all_values | self.shown


@dataclass
class _JsonScan:
    items: list[str] = field(default_factory=list)
    shown: set[str] = field(default_factory=set)
    options: set[str] = field(default_factory=set)
    all_values: set[str] = field(default_factory=set)
    ids: list[str] = field(default_factory=list)
    dates: list[str] = field(default_factory=list)
    status: list[str] = field(default_factory=list)
    failed: bool = False
    succeeded: bool = False
    leaves: int = 0

    def add(self, item: str, *values: str) -> None:
        if len(self.items) >= MAX_TOOL_ITEMS or item in self.items:
            return
        self.items.append(item)
        self.shown.update(comparable(v) for v in values if v)


def _scalar_text(value: Any) -> str:
    return " ".join(str(value).split())


def comparable(value: str) -> str:
    """ "Sugar-Free Vanilla" and "sugar free vanilla" are the same value."""
    return " ".join(value.lower().replace("-", " ").replace("_", " ").split())


def _humanise_key(key: str) -> str:
    key = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", key)
    key = re.sub(r"(?:^|_)(?:id|uuid|number|no)$", "", key, flags=re.IGNORECASE) or key
    return key.replace("_", " ").replace("-", " ").strip().lower()


def _collect_values(node: Any, scan: _JsonScan) -> None:
    """Every scalar of the payload, so that a later line can show it covers this one."""
    stack = [node]
    while stack and scan.leaves < MAX_JSON_LEAVES:
        current = stack.pop()
        if isinstance(current, dict):
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)
        elif current is not None and not isinstance(current, bool):
            scan.leaves += 1
            scan.all_values.add(comparable(_scalar_text(current)))


TOGGLE_ON = wordset("add added yes true on selected included")
TOGGLE_OFF = wordset("no none false off remove removed excluded")
_SLUG_SUFFIX = re.compile(r"[-_]\d+$")


def _pair_label(node: dict[str, Any]) -> tuple[str, bool] | None:
    """The name of a {name: ..., option: ...} pair, or failing that its slug id
    ("sugar-free-vanilla-568" -> "sugar free vanilla"), and whether it is a slug."""
    for key in _PAIR_LABEL_KEYS:
        if isinstance(node.get(key), str):
            return _scalar_text(node[key]), False
    for key, value in node.items():
        if _ID_KEY.search(key) and isinstance(value, str) and "-" in value:
            return comparable(_SLUG_SUFFIX.sub("", value)), True
    return None


def _scan_pair(node: dict[str, Any], scan: _JsonScan) -> bool:
    """{"attribute_name": "Milk", "options": [...]} reads best as "Milk: Oat Milk, ...";
    an add-on switched on reads best as its name alone."""
    value_key = next((k for k in _PAIR_VALUE_KEYS if k in node), None)
    labelled = _pair_label(node) if value_key else None
    if labelled is None or value_key is None:
        return False
    label, from_slug = labelled
    raw = node[value_key]
    values = [_scalar_text(v) for v in (raw if isinstance(raw, list) else [raw])]
    values = [v for v in values if v]
    if not values:
        return False
    toggles = {comparable(v) for v in values}
    if toggles <= TOGGLE_ON | TOGGLE_OFF:
        if isinstance(raw, list):  # an add-on on offer
            scan.add(label, label)
            scan.options.update({comparable(label)})
        elif toggles <= TOGGLE_ON:  # an add-on chosen
            scan.add(label, label)
        return True
    if isinstance(raw, list):
        shown = values[:MAX_LIST_ITEMS]
        more = f" +{len(values) - len(shown)} more" if len(values) > len(shown) else ""
        scan.add(f"{label}: {', '.join(shown)}{more}", *shown)
        scan.options.update(comparable(v) for v in shown)
    elif from_slug:
        scan.add(values[0], values[0])  # "milk options: Oat Milk" says no more than "Oat Milk"
    else:
        scan.add(f"{label}: {values[0]}", values[0])
    return True


def _scan_scalar(key: str, value: Any, depth: int, scan: _JsonScan) -> None:
    if isinstance(value, bool):
        if key.lower() in ("success", "ok"):
            scan.succeeded = scan.succeeded or value
            scan.failed = scan.failed or not value
            scan.status.append("success" if value else "failed")
        return
    text = _scalar_text(value) if value is not None else ""
    if not text:
        return
    if _STATUS_KEY.match(key):
        if key.lower() in ("error", "errors"):
            scan.failed = True
            scan.add(f"error {shorten(text, 12)}", text)
            return
        scan.failed = scan.failed or bool(_FAILED_STATUS.match(text))
        scan.succeeded = scan.succeeded or bool(_DONE_STATUS.match(text))
        scan.status.append(text)
        scan.add(f"{key.lower()} {shorten(text, 12)}", text)
    elif _ID_KEY.search(key):
        if depth <= 1 and len(scan.ids) < 3:
            scan.ids.append(text)
            scan.add(f"{_humanise_key(key)} {text}", text)
    elif _DATE_KEY.search(key):
        scan.dates.append(text)
        scan.add(f"{_humanise_key(key)} {text}", text)
    elif _AMOUNT_KEY.search(key):
        scan.add(f"{_humanise_key(key)} {text}", text)
    elif _NAME_KEY.search(key):
        scan.add(shorten(text, 12), text)
    elif depth == 0 and len(text) <= 40:
        scan.add(f"{_humanise_key(key)} {text}", text)


def _scan_json(node: Any, scan: _JsonScan, depth: int = 0, key: str = "") -> None:
    if scan.leaves >= MAX_JSON_LEAVES or len(scan.items) >= MAX_TOOL_ITEMS:
        return
    if isinstance(node, list):
        _scan_list(node, scan, depth, key)
        return
    if not isinstance(node, dict):
        scan.add(shorten(_scalar_text(node), 12), _scalar_text(node))
        return
    if _scan_pair(node, scan):
        return
    has_name = any(_NAME_KEY.search(k) for k in node)
    for key, value in node.items():
        if isinstance(value, dict | list):
            continue
        if has_name and depth > 1 and _ID_KEY.search(key):
            continue  # a nested item's internal id next to its name is noise
        _scan_scalar(key, value, depth, scan)
    for key, value in node.items():
        if isinstance(value, dict | list):
            _scan_json(value, scan, depth + 1, key)


def _scan_list(node: list[Any], scan: _JsonScan, depth: int, key: str) -> None:
    scalars = [v for v in node if not isinstance(v, dict | list)]
    if scalars:
        shown = [_scalar_text(v) for v in scalars[:MAX_LIST_ITEMS]]
        more = f" +{len(scalars) - len(shown)} more" if len(scalars) > len(shown) else ""
        scan.add(", ".join(shown) + more, *shown)
    records = [v for v in node if isinstance(v, dict)]
    if len(records) > MAX_LIST_ITEMS:
        _scan_many_records(records, scan, key)
        return
    for child in node[:MAX_LIST_ITEMS]:
        if isinstance(child, dict | list):
            _scan_json(child, scan, depth + 1)


def _scan_many_records(records: list[dict[str, Any]], scan: _JsonScan, key: str) -> None:
    """A long list of records: how many, the first one in full, how their states spread."""
    scan.add(f"{len(records)} {_humanise_key(key) or 'records'}")
    _scan_json(records[0], scan, depth=1)  # shown like a top-level object, id included
    sample = records[:MAX_JSON_LEAVES]
    for field_name, value in records[0].items():
        if not (_STATUS_KEY.match(field_name) and isinstance(value, str)):
            continue
        spread = Counter(str(r.get(field_name)) for r in sample)
        if len(spread) > 1:
            counts = ", ".join(f"{state} {count}" for state, count in spread.most_common(3))
            scan.add(f"{field_name}: {counts}")


def _json_fold(tool: str, payload: Any, message: SourceMessage) -> ToolFold:
    scan = _JsonScan()
    _scan_json(payload, scan)
    _collect_values(payload, scan)
    if scan.failed:
        priority = HIGH
    elif scan.succeeded and (_FINISHING_TOOL.search(tool) or scan.status != ["success"]):
        priority = COMPLETED
    elif scan.ids:
        priority = MEDIUM
    else:
        priority = LOW
    items = scan.items or ["no data"]
    if scan.status == ["success"] or scan.status == ["failed"]:
        items = [*items, scan.status[0]] if scan.items else [scan.status[0]]
    referenced_at = None
    for raw_date in scan.dates:
        mentions = find_dates(raw_date, anchor=message.created_at)
        if mentions:
            referenced_at = mentions[0].value
            break
    return ToolFold(
        text=f"Tool {tool}: {', '.join(items)}",
        priority=priority,
        shown=frozenset(scan.shown),
        options=frozenset(scan.options),
        all_values=frozenset(scan.all_values),
        primary_id=scan.ids[0] if scan.ids else None,
        referenced_at=referenced_at,
    )


_TRAILING_ELLIPSIS = re.compile(r"\s*(?:\.{3,}|…)\s*$")


def _short_text_fold(tool: str, content: str, message: SourceMessage) -> ToolFold:
    """A short plain-text result is its own summary."""
    text = "; ".join(line.strip() for line in content.splitlines() if line.strip()) or "no output"
    text = _TRAILING_ELLIPSIS.sub("", text)  # "Searching the FAQ pages ...": nothing was cut
    sentence = Sentence.of(text)
    if _ERROR_LINE.search(text):
        priority = HIGH
    elif COMPLETION.found(sentence) and not is_negated(sentence):
        priority = COMPLETED
    else:
        priority = LOW
    mentions = find_dates(text, anchor=message.created_at) if has_date(sentence) else []
    values = frozenset([comparable(text)])
    return ToolFold(
        text=f"Tool {tool}: {text}",
        priority=priority,
        shown=values,
        options=frozenset(),
        all_values=values,
        primary_id=None,
        referenced_at=mentions[0].value if mentions else None,
    )


def _text_fold(tool: str, content: str) -> ToolFold:
    """Plain-text output (logs, listings): counts, error lines, salient key: value lines."""
    lines = [line.strip() for line in content.splitlines()[:MAX_TEXT_LINES] if line.strip()]
    repeats: Counter[str] = Counter()
    first_example: dict[str, str] = {}
    for line in lines:
        pattern = _DIGITS.sub("#", line)
        repeats[pattern] += 1
        first_example.setdefault(pattern, line)
    errors: list[str] = []
    pairs: list[str] = []
    for pattern, example in first_example.items():
        if _ERROR_LINE.search(example):
            if len(errors) < 2:
                count = f" (x{repeats[pattern]})" if repeats[pattern] > 1 else ""
                errors.append(f"{shorten(example, 15)}{count}")
        elif len(pairs) < 6 and (pair := _KEY_VALUE_LINE.match(example)):
            key, value = pair.group(1).strip(), pair.group(2).strip()
            if _is_salient_key(key):
                pairs.append(f"{key.lower()} {value}")
    summary = [f"{len(lines)} lines ({len(repeats)} distinct)", shorten(lines[0], 15), *pairs]
    if errors:
        summary.append("errors: " + "; ".join(errors))
    values = frozenset(s.lower() for s in pairs)
    return ToolFold(
        text=f"Tool {tool}: " + ", ".join(summary),
        priority=HIGH if errors else LOW,
        shown=values,
        options=frozenset(),
        all_values=values,
        primary_id=None,
        referenced_at=None,
    )


def _is_salient_key(key: str) -> bool:
    patterns = (_ID_KEY, _STATUS_KEY, _AMOUNT_KEY, _DATE_KEY, _NAME_KEY)
    return any(p.search(key.strip()) for p in patterns)


def fold_tool_output(message: SourceMessage) -> ToolFold:
    tool = message.tool_name or "call"
    content = message.content.strip()
    if content[:1] in ("{", "["):
        try:
            payload = json.loads(content)
        except ValueError:
            payload = None
        if payload is not None:
            return _json_fold(tool, payload, message)
    if len(content.split()) <= SHORT_TOOL_TEXT_WORDS:
        return _short_text_fold(tool, content, message)
    return _text_fold(tool, content)
