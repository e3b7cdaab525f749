"""The gRPC referee: many matches at once, clocks, strikes, records.

Apps use `RefereeFacade` (and `MatchInPlay`, the `MatchRequestError` kinds); the
referee's own command line assembles `Referee` and `RefereeServer` itself.

The names are imported when first used, not with the package: a submodule such as ``flags``
or ``eventloop`` then comes without gRPC and the whole referee, so that the command line's
``--help`` answers at once.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .calls import bearer_token
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

#: Each public name and the submodule that defines it.
_WHERE = {
    "bearer_token": "calls", "tokens_equal": "connections",
    "BotAtCapacity": "errors", "BotNotConnected": "errors", "IdempotencyKeyReused": "errors",
    "InvalidBotName": "errors", "InvalidIdempotencyKey": "errors", "InvalidTable": "errors",
    "InvalidTimeControl": "errors", "MatchRequestError": "errors", "RefereeClosing": "errors",
    "UnknownBot": "errors", "MatchInPlay": "facade", "RefereeFacade": "facade",
    "RefereeServer": "lifecycle", "serve_forever": "lifecycle", "TlsConfig": "listener",
    "list_limit": "matches_service",
    "Referee": "referee", "DEFAULT_PASS_BUDGET_MS": "turns", "NO_PASS_BUDGET_MS": "turns",
}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = ["DEFAULT_PASS_BUDGET_MS", "NO_PASS_BUDGET_MS",
           "BotAtCapacity", "BotNotConnected", "IdempotencyKeyReused", "InvalidBotName",
           "InvalidIdempotencyKey", "InvalidTable", "InvalidTimeControl",
           "MatchInPlay", "MatchRequestError", "Referee", "RefereeClosing", "RefereeFacade",
           "RefereeServer", "TlsConfig", "UnknownBot", "bearer_token",
           "list_limit", "serve_forever", "tokens_equal"]
