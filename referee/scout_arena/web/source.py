"""What the pages read, whoever stores the matches: the one protocol the app depends on.

The app knows nothing of where matches live; a tournament's output folder
(:class:`~scout_arena.web.tournament_source.TournamentSource`) and the ladder's database
(``scout_ladder.web_source.LadderSource``) both hand it JSON-ready values of the shapes in
docs/web-api.md, formatted by the helpers below so that both round and date alike.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from ..record import JSON


class WebSource(Protocol):
    """What the pages read. Every method returns plain JSON-ready data. A source may also have
    ``crosstable() -> JSON`` (a tournament's head-to-head table, /api/crosstable)."""

    kind: str
    """``"ladder"`` or ``"tournament"``."""

    def leaderboard(self) -> list[JSON]: ...

    def bot_profile(self, name: str) -> JSON | None: ...

    def list_matches(self, bot: str | None, table_size: int | None, limit: int) -> list[JSON]: ...

    def get_record(self, match_id: str) -> JSON | None:
        """The stored record as JSON, unchanged: the browser gets it as is, and the replay
        checks it field by field rather than trusting a parsed copy."""
        ...


def iso_time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def rounded(value: float) -> float:
    """Ratings to 3 decimals, as the API promises."""
    return round(value, 3)
