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


class InvalidBotName(MatchRequestError):
    """A seat names a bot with a name no bot can have (control characters)."""


class InvalidIdempotencyKey(MatchRequestError):
    """A CreateMatch idempotency key that is too long or has control characters."""


class IdempotencyKeyReused(MatchRequestError):
    """A CreateMatch idempotency key already taken by a different request."""


ECHO_LIMIT = 100
"""At most this many characters of a caller's value come back in an error message: a status
message travels in a trailer, and a long one would not even fit in the caller's limit."""


def has_control_characters(text: str) -> bool:
    """Whether ``text`` has a C0 or C1 control character or DEL (Unicode category Cc)."""
    return any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in text)


__all__ = ["ECHO_LIMIT", "BotAtCapacity", "BotNotConnected", "IdempotencyKeyReused",
           "InvalidBotName", "InvalidIdempotencyKey", "InvalidTable", "InvalidTimeControl",
           "MatchRequestError", "RefereeClosing", "UnknownBot", "has_control_characters"]
