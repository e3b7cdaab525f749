"""The time control a match gets when nobody chooses one: the referee, its command line, the
ladder, tournaments, SPRT runs and in-process matches all start from these two values."""

from __future__ import annotations

DEFAULT_DECISION_MS = 1000
"""Milliseconds a bot has for each decision before its bank is drawn on."""

DEFAULT_TIME_BANK_MS = 10_000
"""Milliseconds of a bot's per-match bank, spent when a decision overruns."""
