"""The ladder database as a source of the web pages (`scout_arena.web`).

The pages are an app of their own; this adapter is the ladder's side of the seam, turning the
repository's frozen dataclasses into the JSON shapes of docs/web-api.md. Its reads are
synchronous: the app runs them in a worker thread, never on the ladder's event loop.
"""

from __future__ import annotations

import json

from scout_arena.record import JSON
from scout_arena.web import iso_time, rounded

from .repository import MatchSummary, Repository


class LadderSource:
    """The ladder database, through its repository."""

    kind = "ladder"

    def __init__(self, repository: Repository) -> None:
        self.repo = repository

    def leaderboard(self) -> list[JSON]:
        return [
            {"rank": row.rank, "bot": row.bot, "owner": row.owner, "mu": rounded(row.mu),
             "sigma": rounded(row.sigma), "conservative": rounded(row.conservative),
             "games": row.games, "recent_ranks": list(row.recent_ranks),
             "recent_table_sizes": list(row.recent_table_sizes),
             "on_probation": row.on_probation}
            for row in self.repo.leaderboard()
        ]

    @staticmethod
    def _match(m: MatchSummary) -> JSON:
        return {
            "match_id": m.match_id, "status": m.status, "table_size": m.table_size,
            "rated": m.rated, "created_at": iso_time(m.created_at),
            "finished_at": iso_time(m.finished_at), "void_reason": m.void_reason,
            "seats": [{"seat": s.seat, "bot": s.bot, "score": s.score, "rank": s.rank,
                       "forfeited": s.forfeited, "timeouts": s.timeouts,
                       "illegal_actions": s.illegal_actions} for s in m.seats],
        }

    def bot_profile(self, name: str) -> JSON | None:
        profile = self.repo.bot_profile(name)
        if profile is None:
            return None
        bot, rating = profile.bot, profile.rating
        return {
            "bot": bot.name, "owner": bot.owner, "version": bot.version, "retired": bot.retired,
            "probation_reason": bot.probation_reason, "kind": bot.kind,
            "paused_reason": bot.paused_reason, "suspended_reason": bot.suspended_reason,
            "rating": None if rating is None else {
                "mu": rounded(rating.mu), "sigma": rounded(rating.sigma),
                "conservative": rounded(rating.conservative), "games": rating.games},
            "leaderboard_rank": profile.leaderboard_rank,
            "history": [{"match_id": p.match_id, "mu": rounded(p.mu), "sigma": rounded(p.sigma),
                         "at": iso_time(p.created_at)} for p in profile.history],
            "by_table_size": [{"table_size": r.table_size, "matches": r.matches, "wins": r.wins,
                               "mean_rank": rounded(r.mean_rank),
                               "mean_score": rounded(r.mean_score)}
                              for r in profile.by_table_size],
            "matches_finished": profile.matches_finished,
            "timeouts": profile.timeouts,
            "forfeits": profile.forfeits,
            "illegal_actions": profile.illegal_actions,
            "recent_matches": [self._match(m) for m in profile.recent_matches],
        }

    def list_matches(self, bot: str | None, table_size: int | None, limit: int) -> list[JSON]:
        return [self._match(m) for m in self.repo.list_matches(bot, table_size, limit)]

    def get_record(self, match_id: str) -> JSON | None:
        text = self.repo.get_record(match_id)
        if text is None:
            return None
        record: JSON = json.loads(text)
        return record
