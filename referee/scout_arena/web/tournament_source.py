"""A local tournament's output folder (``scout-arena tournament --out DIR``) as a web source.

The folder holds ``summary.json`` (written when the tournament ends) and ``records/*.json``
(one per match, as it finishes). Ratings are the tournament's own `RatingBook` over the finished
records, in the summary's (schedule) order; a tournament still running has no summary yet, so
its records are rated in file-name order and its board is provisional until the summary lands.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ..ratings import RatingBook, conservative
from ..record import JSON, MatchOutcome, MatchRecord, RecordError, load_record, read_record_json
from .source import rounded
from .tournament_stats import bot_stats, head_to_head

RECENT_FORM_LENGTH = 5
STANDING_FIELDS = ("win_rate", "mean_score", "mean_score_ci95", "mean_rank", "timeouts",
                   "illegal_actions", "forfeits")
"""What the terminal's standings show beyond the rating, passed on as they are."""


@dataclass(frozen=True, slots=True)
class _Finished:
    path: Path
    record: MatchRecord
    outcome: MatchOutcome


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """The folder as last read, with every bot's rating after each of its matches."""

    summary: JSON = field(default_factory=dict)
    finished: tuple[_Finished, ...] = ()
    book: RatingBook = field(default_factory=RatingBook)
    history: dict[str, list[JSON]] = field(default_factory=dict)


def _finished_at(record: MatchRecord) -> str | None:
    ended = record.ended_at
    if ended is None or not math.isfinite(ended):
        return None
    return datetime.fromtimestamp(ended, UTC).isoformat()


def _rate(finished: tuple[_Finished, ...]) -> tuple[RatingBook, dict[str, list[JSON]]]:
    book = RatingBook()
    history: dict[str, list[JSON]] = {}
    for match in finished:
        outcome = match.outcome
        after = book.rate(outcome.players, outcome.ranks)
        for name, rating in zip(outcome.players, after, strict=True):
            history.setdefault(name, []).append(
                {"match_id": outcome.match_id, "mu": rounded(rating.mu),
                 "sigma": rounded(rating.sigma), "at": _finished_at(match.record)})
    return book, history


class TournamentSource:
    """A local tournament's output directory. Re-read whenever summary.json or the set of
    records changes, so a tournament still running shows up as it goes."""

    kind = "tournament"

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        if not (self.dir / "summary.json").is_file() and not (self.dir / "records").is_dir():
            raise FileNotFoundError(f"{self.dir} has neither summary.json nor records/")
        self._lock = threading.Lock()
        self._stamp: tuple[int | None, tuple[tuple[str, int], ...]] | None = None
        self._snapshot = _Snapshot()

    def _load(self) -> _Snapshot:
        summary_path = self.dir / "summary.json"
        files = sorted((self.dir / "records").glob("*.json"))
        stamp = (summary_path.stat().st_mtime_ns if summary_path.exists() else None,
                 tuple((f.name, f.stat().st_mtime_ns) for f in files))
        with self._lock:
            if stamp != self._stamp:
                summary: JSON = (json.loads(summary_path.read_text(encoding="utf-8"))
                                 if summary_path.exists() else {})
                by_name: dict[str, _Finished] = {}
                for f in files:
                    try:
                        record = load_record(f)
                    except RecordError:
                        continue  # half written, or not a record this build reads
                    if record.outcome is not None:
                        by_name[f"records/{f.name}"] = _Finished(f, record, record.outcome)
                ordered = [by_name.pop(p) for p in summary.get("records", []) if p in by_name]
                ordered += [by_name[k] for k in sorted(by_name)]
                finished = tuple(ordered)
                book, history = _rate(finished)
                self._snapshot = _Snapshot(summary, finished, book, history)
                self._stamp = stamp
            return self._snapshot

    @staticmethod
    def _bot_names(snapshot: _Snapshot) -> list[str]:
        names = [b["name"] for b in snapshot.summary.get("config", {}).get("bots", [])]
        for match in snapshot.finished:
            names += [n for n in match.outcome.players if n not in names]
        return names

    def leaderboard(self) -> list[JSON]:
        """The standings as the terminal shows them: summary.json's once the tournament has
        ended, else computed from the records so far (provisional)."""
        snapshot = self._load()
        standings = snapshot.summary.get("standings")
        if standings is None:
            stats = bot_stats([m.outcome for m in snapshot.finished])
            commands = self._commands(snapshot)
            standings = []
            for name in snapshot.history:
                rating = snapshot.book.get(name)
                mu, sigma = rounded(rating.mu), rounded(rating.sigma)
                standings.append({"bot": name, "command": commands.get(name), "mu": mu,
                                  "sigma": sigma, "mu_minus_3sigma": conservative(mu, sigma),
                                  "matches": snapshot.book.games[name], **stats[name]})
            standings.sort(key=lambda s: -s["mu_minus_3sigma"])
        form: dict[str, list[tuple[int, int]]] = {}
        for match in reversed(snapshot.finished):
            for seat, name in enumerate(match.outcome.players):
                ranks = form.setdefault(name, [])
                if len(ranks) < RECENT_FORM_LENGTH:
                    ranks.append((match.outcome.ranks[seat], match.outcome.num_players))
        return [
            {"rank": i, "bot": s["bot"], "owner": None, "command": s.get("command"),
             "mu": s["mu"], "sigma": s["sigma"], "conservative": s["mu_minus_3sigma"],
             "games": s["matches"],
             "recent_ranks": [rank for rank, _ in form.get(s["bot"], [])],
             "recent_table_sizes": [size for _, size in form.get(s["bot"], [])],
             "on_probation": False,
             **{key: s.get(key) for key in STANDING_FIELDS}}
            for i, s in enumerate(standings, start=1)
        ]

    def crosstable(self) -> JSON:
        """The terminal's head-to-head table: bots in standings order, each row's share of
        its encounters with each column finished ahead."""
        snapshot = self._load()
        names = [row["bot"] for row in self.leaderboard()]
        shares = snapshot.summary.get("head_to_head")
        if shares is None:
            shares = head_to_head([m.outcome for m in snapshot.finished], names)
        return {"bots": names,
                "shares": {a: {b: shares.get(a, {}).get(b) for b in names if b != a}
                           for a in names}}

    @staticmethod
    def _commands(snapshot: _Snapshot) -> dict[str, str]:
        return {b["name"]: b.get("command") for b in snapshot.summary.get("config", {})
                .get("bots", []) if "name" in b}

    @staticmethod
    def _match(match: _Finished) -> JSON:
        outcome = match.outcome
        return {
            "match_id": outcome.match_id, "status": "finished",
            "table_size": outcome.num_players, "rated": True,
            "created_at": None, "finished_at": _finished_at(match.record), "void_reason": None,
            "seats": [{"seat": seat, "bot": name, "score": outcome.totals[seat],
                       "rank": outcome.ranks[seat], "forfeited": seat in outcome.forfeits,
                       "timeouts": outcome.seats[seat].timeouts,
                       "illegal_actions": outcome.seats[seat].illegal_actions}
                      for seat, name in enumerate(outcome.players)],
        }

    def bot_profile(self, name: str) -> JSON | None:
        snapshot = self._load()
        if name not in self._bot_names(snapshot):
            return None
        board = {row["bot"]: row for row in self.leaderboard()}
        mine = [self._match(m) for m in snapshot.finished if name in m.outcome.players]
        seats = [next(s for s in m["seats"] if s["bot"] == name) for m in mine]
        sizes: dict[int, list[JSON]] = {}
        for m, s in zip(mine, seats, strict=True):
            sizes.setdefault(m["table_size"], []).append(s)
        row = board.get(name)
        return {
            "bot": name, "owner": None, "command": self._commands(snapshot).get(name),
            "version": None, "retired": False,
            "probation_reason": None,
            "rating": None if row is None else {
                "mu": row["mu"], "sigma": row["sigma"], "conservative": row["conservative"],
                "games": row["games"]},
            "leaderboard_rank": None if row is None else row["rank"],
            "history": snapshot.history.get(name, []),
            "by_table_size": [
                {"table_size": size, "matches": len(ss),
                 "wins": sum(1 for s in ss if s["rank"] == 1),
                 "mean_rank": rounded(sum(s["rank"] for s in ss) / len(ss)),
                 "mean_score": rounded(sum(s["score"] for s in ss) / len(ss))}
                for size, ss in sorted(sizes.items())],
            "matches_finished": len(mine),
            "timeouts": sum(s["timeouts"] for s in seats),
            "forfeits": sum(1 for s in seats if s["forfeited"]),
            "illegal_actions": sum(s["illegal_actions"] for s in seats),
            "recent_matches": list(reversed(mine))[:10],
        }

    def list_matches(self, bot: str | None, table_size: int | None, limit: int) -> list[JSON]:
        out = []
        for match in reversed(self._load().finished):
            if table_size is not None and match.outcome.num_players != table_size:
                continue
            if bot is not None and bot not in match.outcome.players:
                continue
            out.append(self._match(match))
            if len(out) >= limit:
                break
        return out

    def get_record(self, match_id: str) -> JSON | None:
        match = next((m for m in self._load().finished if m.outcome.match_id == match_id), None)
        if match is None:
            return None
        try:
            return read_record_json(match.path)
        except RecordError:
            return None  # removed since the folder was read
