"""Recognizer results made into detections: none inside a pseudonym already in the text,
and overlapping ones merged into one span that covers them all, acting as the most
certain of them (``governance.redaction.presidio``'s module docstring, "Scores and the
review band")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from governance.redaction.labels import LABEL
from governance.redaction.presidio import (
    CUSTOM_PREFIX,
    Detection,
    PolicySpec,
    _recognizer_name,
)


def outside_labels(text: str, results: list[Any]) -> list[Any]:
    """The results that touch no pseudonym already in ``text``: a label is a value
    replaced, never part of one. (The tagger read "<LOCATION_3> Bay" as a place and the
    span's bounds kept "> Bay": replaced, it left "<LOCATION_3<LOCATION_9>".)"""
    if "<" not in text:
        return results
    labels = [(m.start(), m.end()) for m in LABEL.finditer(text)]
    return [r for r in results if not any(r.start < end and start < r.end for start, end in labels)]


def merged(results: Sequence[Any], spec: PolicySpec) -> list[Detection]:
    """Resolve overlapping recognizer results into non-overlapping detections."""
    candidates = []
    for result in results:
        operator = spec.operator_for(result.entity_type)
        status = spec.status_for(result.score, operator)
        if status is not None and result.end > result.start:
            candidates.append((result, operator, status))
    candidates.sort(key=lambda c: (c[0].start, -c[0].end))
    groups: list[list[tuple[Any, str, str]]] = []
    group_end = -1
    for candidate in candidates:
        if groups and candidate[0].start < group_end:
            groups[-1].append(candidate)
            group_end = max(group_end, candidate[0].end)
        else:
            groups.append([candidate])
            group_end = candidate[0].end
    detections = []
    for group in groups:
        # The span that acts is the most certain one, preferring one that removes the
        # value: a "keep" type must not shield an overlapping type the policy redacts.
        # On a tie the workspace's own recognizer wins: it names what the span is there.
        result, operator, status = max(
            group,
            key=lambda c: (
                c[1] != "keep",
                c[0].score,
                _recognizer_name(c[0]).startswith(CUSTOM_PREFIX),
                c[0].end - c[0].start,
                c[0].entity_type,
            ),
        )
        detections.append(
            Detection(
                entity_type=result.entity_type,
                start=min(c[0].start for c in group),
                end=max(c[0].end for c in group),
                score=float(result.score),
                recognizer=_recognizer_name(result)[:100],
                operator=operator,
                status=status,
            )
        )
    return detections
