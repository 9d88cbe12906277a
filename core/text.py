"""What counts as text a reader can see."""

from __future__ import annotations

import unicodedata


def is_blank(text: str) -> bool:
    """True when ``text`` shows nothing: only whitespace and invisible format characters
    (Unicode category Cf: the zero-width space and joiners, the byte-order mark, the soft
    hyphen, direction marks), which ``str.strip()`` keeps. A message of U+200B alone is
    as empty to its reader, and to the Observer, as one of spaces."""
    # strip() first, in C: an ordinary text ends the scan at its first character.
    return all(unicodedata.category(char) == "Cf" or char.isspace() for char in text.strip())
