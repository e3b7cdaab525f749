"""The gRPC referee: many matches at once, clocks, strikes, records."""

from .core import MatchRunner, MatchStatus, Referee, TimeControl
from .service import RefereeServer, TlsConfig, serve_forever

__all__ = ["MatchRunner", "MatchStatus", "Referee", "RefereeServer", "TimeControl", "TlsConfig",
           "serve_forever"]
