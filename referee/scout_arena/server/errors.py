"""Why a match cannot be created as asked: one type per reason.

Callers catch `MatchRequestError` or the one reason they handle; the gRPC service maps each
type to its status code, so nothing below the service knows of gRPC.
"""

from __future__ import annotations


class MatchRequestError(ValueError):
    """A match that cannot be created as asked; the message says what to change."""


class RefereeClosing(MatchRequestError):
    """The referee is shutting down and takes no new match."""


class InvalidTable(MatchRequestError):
    """The seats asked for do not make a table: 2 to 5 bots, each at most once."""


class UnknownBot(MatchRequestError):
    """A seat names a bot the referee has no token for."""


class BotNotConnected(MatchRequestError):
    """A seat names a registered bot that has no live stream (and may not be seated absent)."""


class BotAtCapacity(MatchRequestError):
    """A seat names a bot already playing as many matches as its Hello said it accepts."""


class InvalidTimeControl(MatchRequestError):
    """The decision time or the bank is outside what the referee allows."""


__all__ = ["BotAtCapacity", "BotNotConnected", "InvalidTable", "InvalidTimeControl",
           "MatchRequestError", "RefereeClosing", "UnknownBot"]
