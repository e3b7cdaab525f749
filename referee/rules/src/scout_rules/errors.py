"""One error type per failure kind, each with a message a bot author can act on."""

from __future__ import annotations


class ScoutError(Exception):
    """Base of every error the rules engine raises."""


class MalformedAction(ScoutError, ValueError):
    """The action cannot even be read against this hand: a position out of range, a negative
    length, a wrong type. Nothing about the rules was consulted."""


class IllegalAction(ScoutError):
    """A well-formed action that the rules forbid in this position (the message says which rule)."""


class OutOfTurn(ScoutError):
    """The request does not fit the game's phase: a move during the rotation choice, a second
    rotation choice, a move after the match ended."""
