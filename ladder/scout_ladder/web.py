"""Web pages and a JSON API over the ladder or over a local tournament's output directory.

The API reads through :class:`WebSource`, which has two implementations: :class:`LadderSource`
(the ladder's :class:`~scout_ladder.repository.Repository`) and :class:`TournamentSource` (a
``scout-arena tournament --out DIR``: ``summary.json`` and ``records/*.json``). Replays are
computed here, on the server, by re-running the record through the engine (see
:func:`replay_frames`); the front end (``static/``: one HTML page, one script, one style sheet,
no build step) only draws them. The API is documented in docs/web-api.md.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import uvicorn
from scout_arena.engine import Card, Hand, State, deal_match
from scout_arena.engine.state import RoundEnd
from scout_arena.record import (
    JSON,
    RecordError,
    action_from_json,
    describe_action,
    replay,
)
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).resolve().parent / "static"
RECENT_FORM_LENGTH = 5
_REPLAY_CACHE_SIZE = 64


# --- sources --------------------------------------------------------------------------------


class WebSource(Protocol):
    """What the pages read. Every method returns plain JSON-ready data."""

    kind: str
    """``"ladder"`` or ``"tournament"``."""

    def leaderboard(self) -> list[JSON]: ...

    def bot_profile(self, name: str) -> JSON | None: ...

    def list_matches(self, bot: str | None, table_size: int | None, limit: int) -> list[JSON]: ...

    def get_record(self, match_id: str) -> JSON | None: ...


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _round(value: float) -> float:
    return round(value, 3)


class LadderSource:
    """The ladder database, through its repository."""

    kind = "ladder"

    def __init__(self, repository: Any) -> None:
        self.repo = repository

    def leaderboard(self) -> list[JSON]:
        return [
            {"rank": row.rank, "bot": row.bot, "owner": row.owner, "mu": _round(row.mu),
             "sigma": _round(row.sigma), "conservative": _round(row.conservative),
             "games": row.games, "recent_ranks": list(row.recent_ranks),
             "on_probation": row.on_probation}
            for row in self.repo.leaderboard()
        ]

    @staticmethod
    def _match(m: Any) -> JSON:
        return {
            "match_id": m.match_id, "status": m.status, "table_size": m.table_size,
            "rated": m.rated, "created_at": _iso(m.created_at),
            "finished_at": _iso(m.finished_at), "void_reason": m.void_reason,
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
            "probation_reason": bot.probation_reason,
            "rating": None if rating is None else {
                "mu": _round(rating.mu), "sigma": _round(rating.sigma),
                "conservative": _round(rating.conservative), "games": rating.games},
            "leaderboard_rank": profile.leaderboard_rank,
            "history": [{"match_id": p.match_id, "mu": _round(p.mu), "sigma": _round(p.sigma),
                         "at": _iso(p.created_at)} for p in profile.history],
            "by_table_size": [{"table_size": r.table_size, "matches": r.matches, "wins": r.wins,
                               "mean_rank": _round(r.mean_rank),
                               "mean_score": _round(r.mean_score)}
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


class TournamentSource:
    """A local tournament's output directory. Re-read whenever summary.json or the set of
    records changes, so a tournament still running shows up as it goes."""

    kind = "tournament"

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        if not (self.dir / "summary.json").is_file() and not (self.dir / "records").is_dir():
            raise FileNotFoundError(f"{self.dir} has neither summary.json nor records/")
        self._lock = threading.Lock()
        self._stamp: tuple[Any, ...] | None = None
        self._summary: JSON = {}
        self._records: list[JSON] = []

    def _load(self) -> tuple[JSON, list[JSON]]:
        summary_path = self.dir / "summary.json"
        files = sorted((self.dir / "records").glob("*.json"))
        stamp = (summary_path.stat().st_mtime_ns if summary_path.exists() else None,
                 tuple((f.name, f.stat().st_mtime_ns) for f in files))
        with self._lock:
            if stamp != self._stamp:
                summary: JSON = (json.loads(summary_path.read_text(encoding="utf-8"))
                                 if summary_path.exists() else {})
                by_name = {}
                for f in files:
                    try:
                        by_name[f"records/{f.name}"] = json.loads(f.read_text(encoding="utf-8"))
                    except (OSError, json.JSONDecodeError):
                        continue
                ordered = [by_name.pop(p) for p in summary.get("records", []) if p in by_name]
                ordered += [by_name[k] for k in sorted(by_name)]
                self._summary = summary
                self._records = [r for r in ordered if r.get("finished")]
                self._stamp = stamp
            return self._summary, self._records

    def _bot_names(self, summary: JSON, records: list[JSON]) -> list[str]:
        names = [b["name"] for b in summary.get("config", {}).get("bots", [])]
        for r in records:
            names += [p["name"] for p in r["players"] if p["name"] not in names]
        return names

    def _history(self, records: list[JSON]) -> dict[str, list[JSON]]:
        """Each bot's TrueSkill rating after each match, in schedule order (as the tournament
        computes its standings)."""
        import trueskill

        env = trueskill.TrueSkill(draw_probability=0.05)
        ratings: dict[str, Any] = {}
        history: dict[str, list[JSON]] = {}
        for record in records:
            seats = [p["name"] for p in record["players"]]
            for name in seats:
                ratings.setdefault(name, env.create_rating())
            rated = env.rate([(ratings[n],) for n in seats],
                             ranks=[r - 1 for r in record["ranks"]])
            for name, (rating,) in zip(seats, rated, strict=True):
                ratings[name] = rating
                history.setdefault(name, []).append(
                    {"match_id": record["match_id"], "mu": _round(rating.mu),
                     "sigma": _round(rating.sigma), "at": _record_time(record)})
        return history

    def leaderboard(self) -> list[JSON]:
        summary, records = self._load()
        standings = summary.get("standings")
        if standings is None:
            history = self._history(records)
            standings = []
            for name, points in history.items():
                mu, sigma = points[-1]["mu"], points[-1]["sigma"]
                standings.append({"bot": name, "command": None, "mu": mu, "sigma": sigma,
                                  "mu_minus_3sigma": mu - 3 * sigma, "matches": len(points)})
            standings.sort(key=lambda s: -s["mu_minus_3sigma"])
        form: dict[str, list[int]] = {}
        for record in reversed(records):
            for p in record["players"]:
                ranks = form.setdefault(p["name"], [])
                if len(ranks) < RECENT_FORM_LENGTH:
                    ranks.append(record["ranks"][p["seat"]])
        return [
            {"rank": i, "bot": s["bot"], "owner": s.get("command"), "mu": s["mu"],
             "sigma": s["sigma"], "conservative": s["mu_minus_3sigma"], "games": s["matches"],
             "recent_ranks": form.get(s["bot"], []), "on_probation": False}
            for i, s in enumerate(standings, start=1)
        ]

    @staticmethod
    def _match(record: JSON) -> JSON:
        meta_seats = record.get("meta", {}).get("seats") or [{}] * record["num_players"]
        forfeits = set(record.get("forfeits", []))
        return {
            "match_id": record["match_id"], "status": "finished",
            "table_size": record["num_players"], "rated": True,
            "created_at": None, "finished_at": _record_time(record), "void_reason": None,
            "seats": [{"seat": p["seat"], "bot": p["name"],
                       "score": record["totals"][p["seat"]], "rank": record["ranks"][p["seat"]],
                       "forfeited": p["seat"] in forfeits,
                       "timeouts": meta_seats[p["seat"]].get("timeouts", 0),
                       "illegal_actions": meta_seats[p["seat"]].get("illegal_actions", 0)}
                      for p in record["players"]],
        }

    def bot_profile(self, name: str) -> JSON | None:
        summary, records = self._load()
        if name not in self._bot_names(summary, records):
            return None
        board = {row["bot"]: row for row in self.leaderboard()}
        mine = [self._match(r) for r in records
                if any(p["name"] == name for p in r["players"])]
        seats = [next(s for s in m["seats"] if s["bot"] == name) for m in mine]
        sizes: dict[int, list[JSON]] = {}
        for m, s in zip(mine, seats, strict=True):
            sizes.setdefault(m["table_size"], []).append(s)
        row = board.get(name)
        command = next((b.get("command") for b in summary.get("config", {}).get("bots", [])
                        if b.get("name") == name), None)
        return {
            "bot": name, "owner": command, "version": None, "retired": False,
            "probation_reason": None,
            "rating": None if row is None else {
                "mu": row["mu"], "sigma": row["sigma"], "conservative": row["conservative"],
                "games": row["games"]},
            "leaderboard_rank": None if row is None else row["rank"],
            "history": self._history(records).get(name, []),
            "by_table_size": [
                {"table_size": size, "matches": len(ss),
                 "wins": sum(1 for s in ss if s["rank"] == 1),
                 "mean_rank": _round(sum(s["rank"] for s in ss) / len(ss)),
                 "mean_score": _round(sum(s["score"] for s in ss) / len(ss))}
                for size, ss in sorted(sizes.items())],
            "matches_finished": len(mine),
            "timeouts": sum(s["timeouts"] for s in seats),
            "forfeits": sum(1 for s in seats if s["forfeited"]),
            "illegal_actions": sum(s["illegal_actions"] for s in seats),
            "recent_matches": list(reversed(mine))[:10],
        }

    def list_matches(self, bot: str | None, table_size: int | None, limit: int) -> list[JSON]:
        _, records = self._load()
        out = []
        for record in reversed(records):
            if table_size is not None and record["num_players"] != table_size:
                continue
            if bot is not None and all(p["name"] != bot for p in record["players"]):
                continue
            out.append(self._match(record))
            if len(out) >= limit:
                break
        return out

    def get_record(self, match_id: str) -> JSON | None:
        _, records = self._load()
        return next((r for r in records if r.get("match_id") == match_id), None)


def _record_time(record: JSON) -> str | None:
    ended = record.get("meta", {}).get("ended_at")
    if isinstance(ended, int | float) and math.isfinite(ended):
        from datetime import UTC

        return datetime.fromtimestamp(ended, UTC).isoformat()
    return None


# --- replays --------------------------------------------------------------------------------


class _SnapshotState(State):
    """A State that remembers the table as it was when a round ended (the engine deals the
    next round at once, so afterwards the last active set and hands are gone)."""

    end_snapshot: tuple[tuple[Card, ...], int | None, tuple[bool, ...]] | None = None

    def _end_round(self, reason: RoundEnd, exempt: int | None) -> None:
        self.end_snapshot = (tuple(self.active), self.active_owner,
                             tuple(self.scout_show_tokens))
        super()._end_round(reason, exempt)


def _cards(cards: Sequence[Card]) -> list[list[int]]:
    return [[c.face, c.other] for c in cards]


def _table(state: State) -> JSON:
    return {
        "hands": [_cards(state.hand(s)) for s in range(state.num_players)],
        "active": _cards(state.active_set),
        "active_owner": state.active_owner,
        "captured": [len(c) for c in state.captured],
        "chips": list(state.scout_chips),
        "tokens": list(state.scout_show_tokens),
        "scores": list(state.scores),
        "current_seat": state.current_seat,
    }


def replay_frames(record: JSON) -> JSON:
    """The match as a list of frames, each the whole table after one step (computed by the
    engine). Raises RecordError for a record that does not replay."""
    replay(record)  # validates every step first: below we can trust the record
    n = record["num_players"]
    if record.get("seed") is not None:
        state = _SnapshotState(n, deal_match(n, record["seed"]), record["seed"])
    else:
        deals = [[Hand(Card(*c) for c in hand) for hand in r] for r in record["explicit_deals"]]
        state = _SnapshotState(n, deals)
    frames: list[JSON] = []

    def frame(kind: str, round_index: int, description: str, **extra: Any) -> None:
        base: JSON = {"index": len(frames), "kind": kind, "round": round_index,
                      "description": description, "seat": None, "action": None,
                      "rotations": None, "inserted": None, "round_end": None}
        base.update(_table(state))
        base.update(extra)
        frames.append(base)

    for i, entry in enumerate(record["rounds"]):
        frame("deal", i, f"round {i + 1}: the deal (seat {entry['starting_seat']} starts)",
              current_seat=None)
        rotations = entry["rotations"]
        for seat, rotate in enumerate(rotations):
            state.choose_rotation(seat, rotate)
        rotated = [s for s, r in enumerate(rotations) if r]
        text = (f"round {i + 1}: " + (", ".join(f"seat {s}" for s in rotated) + " rotated"
                                      if rotated else "nobody rotated"))
        frame("rotation", i, text, rotations=list(rotations))
        for item in entry["actions"]:
            seat = item["seat"]
            action = action_from_json({k: v for k, v in item.items() if k != "seat"})
            hand, active = state.hand(seat), state.active_set
            description = describe_action(seat, hand, active, action)
            body = {k: v for k, v in item.items() if k != "seat"}
            scout = body.get("scout") or body.get("scout_and_show", {}).get("scout")
            inserted = None if scout is None else {"seat": seat, "position": scout["insert_at"]}
            if "scout_and_show" in body:
                # the shown cards left the hand: the insert position is no longer a card there
                inserted = None
            state.end_snapshot = None
            state.apply(action)
            if state.end_snapshot is None:
                frame("action", i, description, seat=seat, action=body, inserted=inserted)
                continue
            result = state.round_results[-1]
            active_set, owner, tokens = state.end_snapshot
            frame("action", i, description, seat=seat, action=body, inserted=inserted,
                  hands=[_cards(h) for h in result.hands], active=_cards(active_set),
                  active_owner=owner, captured=list(result.captured),
                  chips=list(result.scout_chips), tokens=list(tokens), current_seat=None,
                  round_end={"reason": result.end_reason.value,
                             "exempt_seat": result.exempt_seat,
                             "scores": list(result.scores)})
    return {
        "match_id": record.get("match_id"),
        "num_players": n,
        "players": [p["name"] for p in record["players"]],
        "finished": bool(record.get("finished")),
        "totals": record.get("totals"),
        "ranks": record.get("ranks"),
        "forfeits": record.get("forfeits", []),
        "frames": frames,
    }


# --- live spectating -----------------------------------------------------------------------


class LiveMatch(Protocol):
    """A match being played (the referee's MatchRunner has these)."""

    match_id: str
    names: list[str]
    state: State


def spectator_view(match_id: str, players: Sequence[str], state: State) -> JSON:
    """What a spectator may see of a match in play: public information only. Hands of the
    round being played appear only as sizes; a hand is shown once its round has ended (the
    engine reveals every hand at round end). A Scout's flip stays private."""
    return {
        "match_id": match_id,
        "players": list(players),
        "num_players": state.num_players,
        "round": state.round_index,
        "phase": state.phase.value,
        "hand_sizes": [len(state.hand(s)) for s in range(state.num_players)],
        "active": _cards(state.active_set),
        "active_owner": state.active_owner,
        "captured": [len(c) for c in state.captured],
        "chips": list(state.scout_chips),
        "tokens": list(state.scout_show_tokens),
        "scores": list(state.scores),
        "current_seat": state.current_seat,
        "moves": [str(action) for action in state.history],
        "finished_rounds": [
            {"round": r.round_index, "end_reason": r.end_reason.value,
             "exempt_seat": r.exempt_seat, "scores": list(r.scores),
             "hands": [_cards(h) for h in r.hands]}
            for r in state.round_results],
    }


# --- the app --------------------------------------------------------------------------------


def _int_param(request: Request, key: str) -> int | None:
    value = request.query_params.get(key)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        raise HTTPException(400, f"{key} must be an integer") from None


def create_app(source: WebSource, *, title: str | None = None,
               live: Callable[[], Sequence[LiveMatch]] | None = None) -> Starlette:
    """The web app over ``source``: JSON under /api, the pages at / and /static. ``live``
    lists the matches being played (the ladder passes its referee's); it is called on the
    event loop, never from a worker thread, so it sees each state between two actions."""
    cache: OrderedDict[str, JSON] = OrderedDict()
    cache_lock = threading.Lock()

    def info(request: Request) -> Response:
        return JSONResponse({"kind": source.kind, "live": live is not None,
                             "title": title or f"Scout Arena {source.kind}"})

    def leaderboard(request: Request) -> Response:
        return JSONResponse(source.leaderboard())

    def bot(request: Request) -> Response:
        profile = source.bot_profile(request.path_params["name"])
        if profile is None:
            raise HTTPException(404, "no such bot")
        return JSONResponse(profile)

    def matches(request: Request) -> Response:
        limit = _int_param(request, "limit") or 50
        bot_name = request.query_params.get("bot") or None
        return JSONResponse(source.list_matches(bot_name, _int_param(request, "table_size"),
                                                max(1, min(limit, 500))))

    def replay_view(request: Request) -> Response:
        match_id = request.path_params["match_id"]
        with cache_lock:
            hit = cache.get(match_id)
        if hit is None:
            record = source.get_record(match_id)
            if record is None:
                raise HTTPException(404, "no finished match with this id")
            try:
                hit = replay_frames(record)
            except (RecordError, KeyError, TypeError, ValueError) as exc:
                raise HTTPException(422, f"the record does not replay: {exc}") from exc
            if hit["finished"]:
                with cache_lock:
                    cache[match_id] = hit
                    while len(cache) > _REPLAY_CACHE_SIZE:
                        cache.popitem(last=False)
        return JSONResponse(hit)

    def record_view(request: Request) -> Response:
        record = source.get_record(request.path_params["match_id"])
        if record is None:
            raise HTTPException(404, "no finished match with this id")
        return JSONResponse(record)

    async def live_list(request: Request) -> Response:
        running = live() if live is not None else []
        return JSONResponse([{"match_id": m.match_id, "players": list(m.names),
                              "table_size": len(m.names), "round": m.state.round_index}
                             for m in running])

    async def live_view(request: Request) -> Response:
        match_id = request.path_params["match_id"]
        running = live() if live is not None else []
        match = next((m for m in running if m.match_id == match_id), None)
        if match is None:
            raise HTTPException(404, "no match with this id is being played")
        return JSONResponse(spectator_view(match.match_id, match.names, match.state))

    def index(request: Request) -> Response:
        return FileResponse(STATIC_DIR / "index.html")

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code)

    routes = [
        Route("/", index),
        Route("/api/info", info),
        Route("/api/leaderboard", leaderboard),
        Route("/api/bots/{name}", bot),
        Route("/api/matches", matches),
        Route("/api/matches/{match_id}/replay", replay_view),
        Route("/api/matches/{match_id}/record", record_view),
        Route("/api/live", live_list),
        Route("/api/live/{match_id}", live_view),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    return Starlette(routes=routes, exception_handlers={HTTPException: http_error})


class EmbeddedServer(uvicorn.Server):
    """A uvicorn server that runs as one task of a loop owned by someone else: it leaves the
    process's signal handling to its owner (the owner sets ``should_exit`` to stop it)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    @property
    def address(self) -> str:
        """host:port actually bound (useful with port 0), once ``started``."""
        for server in getattr(self, "servers", []):
            for sock in server.sockets:
                host, port = sock.getsockname()[:2]
                return f"{host}:{port}"
        return f"{self.config.host}:{self.config.port}"


def make_server(app: Starlette, host: str, port: int) -> EmbeddedServer:
    """A uvicorn server for ``app``; ``await server.serve()`` runs it in the current loop."""
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off")
    return EmbeddedServer(config)
