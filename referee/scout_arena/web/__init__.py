"""Web pages and a JSON API over a local tournament's output folder or over the ladder.

An app of its own, on top of the engine, the record and the ratings and of nothing else: the
ladder plugs in its database as a `WebSource` (``scout_ladder.web_source``), its referee's
matches in play as `LiveMatch` objects and its owner accounts as an `OwnerSource`;
``scout-arena web DIR`` a `TournamentSource`. The API is documented in docs/web-api.md.
"""

from .app import STATIC_DIR, EmbeddedServer, create_app, make_server
from .live import LiveMatch, live_entry, live_json
from .owner import (
    BadRequest,
    Caller,
    Conflict,
    Forbidden,
    NotFound,
    OwnerApiError,
    OwnerSource,
    TooLarge,
    TooMany,
    Unauthenticated,
    Unavailable,
)
from .replay import replay_frames
from .source import WebSource, iso_time, rounded
from .tournament_source import TournamentSource

__all__ = [
    "STATIC_DIR", "BadRequest", "Caller", "Conflict", "EmbeddedServer", "Forbidden", "LiveMatch",
    "NotFound", "OwnerApiError", "OwnerSource", "TooLarge", "TooMany", "TournamentSource",
    "Unauthenticated", "Unavailable", "WebSource", "create_app",
    "iso_time", "live_entry", "live_json", "make_server", "replay_frames", "rounded",
]
