"""Formatting for the dashboard's templates."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils import timezone

from memory.wire import relative_date

register = template.Library()


@register.filter
def relative(value: datetime | None) -> str:
    """'3 days ago', computed at render time against today (never stored)."""
    return relative_date(value, today=timezone.now().date()) or ""


@register.filter
def thousands(value: int | float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,}" if isinstance(value, int) else f"{value:,.0f}"


@register.filter
def ratio(value: float | None) -> str:
    """A compression ratio as '5.2×', or a dash when there is nothing to compare."""
    return f"{value:.1f}×" if value else "–"


@register.filter
def percent(value: float | None) -> str:
    """A share (0..1) as '67%', or a dash when there is nothing to divide."""
    return "–" if value is None else f"{value * 100:.0f}%"


@register.filter
def seconds(value: float | None) -> str:
    """A duration in seconds as '7 s', '1.2 s' or '3 min 5 s'."""
    if value is None:
        return "–"
    if value < 10:
        return f"{value:.1f} s".replace(".0 s", " s")
    if value < 60:
        return f"{value:.0f} s"
    minutes, rest = divmod(round(value), 60)
    return f"{minutes} min {rest} s" if minutes < 60 else f"{value / 3600:.1f} h"


@register.filter
def seconds_since(value: datetime | None) -> int | None:
    return int((timezone.now() - value).total_seconds()) if value else None


@register.filter
def seconds_until(value: datetime | None) -> int | None:
    """Whole seconds from now to ``value``, 0 once it has passed."""
    return max(int((value - timezone.now()).total_seconds()), 0) if value else None


@register.filter
def truncate_at_word(value: str | None, length: int) -> str:
    """``value`` cut to at most ``length`` characters at the end of a word, with an
    ellipsis; a single word longer than that is cut where it must be."""
    text = " ".join((value or "").split())
    if len(text) <= length:
        return text
    cut = text[: length - 1]
    if text[length - 1] != " " and " " in cut:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:.-–") + "…"


@register.filter
def get_count(counts: dict[str, int] | None, key: str) -> int:
    """``counts[key]``, 0 when absent (template lookups cannot take a variable key)."""
    return (counts or {}).get(key, 0)


@register.filter
def duration(seconds: float | None) -> str:
    """A wait in seconds as people say it: '40 s', '12 min', '3 h 5 min', '2 days 4 h'."""
    if seconds is None:
        return "–"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if minutes < 60:
        return f"{minutes} min"
    if hours < 24:
        return f"{hours} h {minutes % 60} min" if minutes % 60 else f"{hours} h"
    days_said = f"{days} day{'s' if days != 1 else ''}"
    return f"{days_said} {hours % 24} h" if hours % 24 else days_said
