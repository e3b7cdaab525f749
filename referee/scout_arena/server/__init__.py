"""The gRPC referee: many matches at once, clocks, strikes, records.

Apps use `RefereeFacade` (and `MatchInPlay`, `TimeControl`, the `MatchRequestError` kinds); the
referee's own command line assembles `Referee` and `RefereeServer` itself.
"""

from .calls import bearer_token
from .clock import TimeControl
from .connections import tokens_equal
from .errors import (
    BotAtCapacity,
    BotNotConnected,
    IdempotencyKeyReused,
    InvalidBotName,
    InvalidIdempotencyKey,
    InvalidTable,
    InvalidTimeControl,
    MatchRequestError,
    RefereeClosing,
    UnknownBot,
)
from .facade import MatchInPlay, RefereeFacade
from .lifecycle import RefereeServer, serve_forever
from .listener import TlsConfig
from .matches_service import list_limit
from .referee import Referee
from .turns import DEFAULT_PASS_BUDGET_MS, NO_PASS_BUDGET_MS

__all__ = ["DEFAULT_PASS_BUDGET_MS", "NO_PASS_BUDGET_MS",
           "BotAtCapacity", "BotNotConnected", "IdempotencyKeyReused", "InvalidBotName",
           "InvalidIdempotencyKey", "InvalidTable", "InvalidTimeControl",
           "MatchInPlay", "MatchRequestError", "Referee", "RefereeClosing", "RefereeFacade",
           "RefereeServer", "TimeControl", "TlsConfig", "UnknownBot", "bearer_token",
           "list_limit", "serve_forever", "tokens_equal"]
