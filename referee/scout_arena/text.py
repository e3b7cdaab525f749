"""Cutting text that a message repeats (a caller's value, an error's message) to a readable
length: a 10,000-character name must not come back in full, and over gRPC a long status message
would not even fit in the trailer."""

from __future__ import annotations

ECHO_LIMIT = 40
"""How many characters of a refused value an error message repeats by default."""

BRIEF_LIMIT = 200
"""Longest error text written into a log line or a voided match's reason by default."""


def clip(text: str, limit: int) -> str:
    """``text``, cut to ``limit`` characters with "..." added when it was longer."""
    return text if len(text) <= limit else text[:limit] + "..."


def echo(value: object, limit: int = ECHO_LIMIT) -> str:
    """``repr(value)``, cut to about ``limit`` characters with the full length said."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value)} characters)"
    text = repr(value)
    return text if len(text) <= limit + 2 else f"{text[:limit]}... ({len(text)} characters)"


def brief(exc: BaseException, limit: int = BRIEF_LIMIT) -> str:
    """The first line of an error's message (its type's name when it has none), clipped."""
    lines = str(exc).strip().splitlines()
    return clip(lines[0] if lines else type(exc).__name__, limit)
