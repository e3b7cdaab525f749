"""The errors the repository raises on purpose, one type per way a call can be refused.

Callers (the gRPC service, the CLI) map each to its own status or message, so each failure kind
keeps a type of its own instead of sharing a message-parsed one.
"""

from __future__ import annotations


class StorageError(Exception):
    """Base class of the errors the repository raises on purpose."""


class _NotFound(StorageError, KeyError):
    """A lookup by name or id found nothing. A KeyError, so that callers mapping KeyError to
    "not found" need no special case; printed plainly, not with KeyError's quotes."""

    def __str__(self) -> str:
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class UnknownBotError(_NotFound):
    """No bot has this name."""


class UnknownMatchError(_NotFound):
    """No match has this id."""


class UnknownChallengeError(_NotFound):
    """No challenge has this id."""


class UnknownOwnerError(_NotFound):
    """No owner account has this name."""


class UnknownVersionError(_NotFound):
    """The bot has no version with this number."""


class BotRetiredError(StorageError):
    """The bot is retired, and a retired bot takes no seat and no challenge."""


class BotOwnerError(StorageError):
    """The name is registered to another owner: a new version keeps the owner."""


class DuplicateMatchError(StorageError):
    """A match with this id was already started."""


class MatchStateError(StorageError):
    """The match is not in flight (already finished or voided), so it cannot end again."""


class InvalidInputError(StorageError, ValueError):
    """The arguments contradict the stored data or the game (wrong seats, bad rank, ...)."""


class NoLadderDatabaseError(StorageError):
    """The URL names no ladder database (a missing file, an empty schema): the commands that
    only read refuse it rather than create an empty one and report that all is well."""


class LeaseHeldError(StorageError):
    """Another ladder process serves this database: two would void each other's matches and
    both write ratings, so the second refuses to start. The message says who holds it."""


class LeaseLostError(StorageError):
    """The ladder lost its hold on the database (its lease connection died): it stops rather
    than risk a second ladder writing next to it."""


class OwnerExistsError(StorageError):
    """An owner account has this name already, or the name owns bots the operator registered
    (a signup must not take over someone else's standing)."""


class InviteError(StorageError):
    """The invite code is missing, unknown or used already (signup by invite)."""


class NotYourBotError(StorageError):
    """An owner acted on a bot that is not theirs (another owner's, or one the operator
    registered for no account)."""


class OwnerSuspendedError(StorageError):
    """The owner account is suspended: it can read, not change anything."""


class BotKindError(StorageError):
    """The call does not apply to this kind of bot (a token for a hosted bot, an upload for a
    remote one)."""


class VersionStateError(StorageError):
    """The version is not in the state the call needs (deciding one that is decided)."""


class LimitError(StorageError):
    """A configured limit refused the call; the subclasses say which."""


class TooManyBotsError(LimitError):
    """The owner has as many unretired bots as an owner may have."""


class TooManySubmissionsError(LimitError):
    """The owner submitted as many versions in the last hour as allowed."""


class UploadTooLargeError(LimitError):
    """The upload is larger than the ladder takes."""
