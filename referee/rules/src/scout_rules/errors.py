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


class InvalidPosition(ScoutError, ValueError):
    """A position given to `State.from_position` (or an information set) that no play of the
    game can reach; the subclass says which part is wrong, the message what exactly."""


class BadShape(InvalidPosition):
    """A count or index out of range: the player count, the round, a seat, a per-seat tuple of
    the wrong length, a negative or impossible counter."""


class CardsDontAddUp(InvalidPosition):
    """A card that is not in this player count's deck, a card in two places, or a round whose
    cards are not all there (hands, captured piles and the active set hold every card dealt)."""


class InconsistentTable(InvalidPosition):
    """The parts are each fine but disagree: an active set that is no group, an owner without
    an active set, a seat to move in the rotation phase, a round that should have ended."""
