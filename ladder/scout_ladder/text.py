"""Cutting text the ladder repeats (an error's message, a status detail) to a readable length."""

from __future__ import annotations

BRIEF_LIMIT = 200
"""Longest error text the ladder writes into a log line or a voided match's reason."""


def clip(text: str, limit: int) -> str:
    """``text``, cut to ``limit`` characters with "..." added when it was longer."""
    return text if len(text) <= limit else text[:limit] + "..."


def brief(exc: BaseException, limit: int = BRIEF_LIMIT) -> str:
    """The first line of an error's message (its type's name when it has none), clipped."""
    lines = str(exc).strip().splitlines()
    return clip(lines[0] if lines else type(exc).__name__, limit)
