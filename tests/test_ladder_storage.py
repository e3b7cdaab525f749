"""The ladder's storage layer, on SQLite and on PostgreSQL (every test runs on both).

The fixtures ``repository`` (a migrated, empty Repository) and ``ladder_url`` (an empty
database) come from conftest.py.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from scout_ladder import (
    BotInfo,
    BotOwnerError,
    BotRetiredError,
    DuplicateMatchError,
    InvalidInputError,
    MatchStateError,
    MatchSummary,
    RatingHistoryEntry,
    Repository,
    SeatResult,
    UnknownBotError,
    UnknownChallengeError,
    UnknownMatchError,
    alembic_config,
    hash_token,
)
from scout_ladder.models import Base
from scout_ladder.repository import ratings as rating_queries
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import Engine

START = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    """A clock that moves one second per reading, so finish order is unambiguous."""

    def __init__(self) -> None:
        self.now = START
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            self.now += timedelta(seconds=1)
            return self.now


@pytest.fixture
def clocked(ladder_url: str) -> Iterator[Repository]:
    """Like ``repository`` but on the ticking Clock."""
    with Repository(ladder_url, clock=Clock()) as repo:
        repo.migrate()
        yield repo


@pytest.fixture
def raw(ladder_url: str) -> Iterator[Engine]:
    """A plain engine on the same database, to look under the repository."""
    engine = create_engine(ladder_url)
    yield engine
    engine.dispose()


def register(repo: Repository, *names: str, owner: str = "alice") -> dict[str, str]:
    return {name: repo.register_bot(name, owner)[1] for name in names}


def start(
    repo: Repository,
    match_id: str,
    names: Sequence[str],
    *,
    rated: bool = True,
    seed: int = 7,
    challenge_id: int | None = None,
) -> None:
    versions = {bot.name: bot.version for bot in repo.list_bots(include_retired=True)}
    repo.start_match(
        match_id, len(names), seed, [(n, versions[n]) for n in names], rated, challenge_id
    )


def results(names: Sequence[str], ranks: Sequence[int], **extra: Any) -> list[SeatResult]:
    return [
        SeatResult(seat=i, bot=name, score=10 * (len(names) - rank), rank=rank, **extra)
        for i, (name, rank) in enumerate(zip(names, ranks, strict=True))
    ]


def record(match_id: str) -> str:
    return json.dumps({"format": "scout-arena-match-record", "match_id": match_id})


def play(
    repo: Repository,
    match_id: str,
    names: Sequence[str],
    ranks: Sequence[int],
    ratings: dict[str, tuple[float, float]] | None = None,
    *,
    rated: bool = True,
    seed: int = 7,
) -> None:
    start(repo, match_id, names, rated=rated, seed=seed)
    if ratings is None:
        ratings = {n: (25.0 - r, 8.0) for n, r in zip(names, ranks, strict=True)} if rated else {}
    repo.finish_match(match_id, record(match_id), results(names, ranks), ratings)


def bot_of(repo: Repository, name: str) -> BotInfo:
    bot = repo.get_bot(name)
    assert bot is not None, name
    return bot


def match_of(repo: Repository, match_id: str) -> MatchSummary:
    match = repo.get_match(match_id)
    assert match is not None, match_id
    return match


def dump_rows(engine: Engine) -> str:
    """Every row of every table, as text."""
    out = []
    with engine.connect() as connection:
        for table in inspect(connection).get_table_names():
            for row in connection.execute(text(f'SELECT * FROM "{table}"')):
                out.append(f"{table}: {tuple(row)!r}")
    return "\n".join(out)


# --- bots -----------------------------------------------------------------------------------


def test_registered_bot_authenticates_with_its_token(repository: Repository) -> None:
    bot, token = repository.register_bot("greedy", "alice")
    assert (bot.name, bot.owner, bot.version, bot.retired) == ("greedy", "alice", 1, False)
    assert bot.created_at.tzinfo is not None
    assert len(token) >= 40
    assert repository.authenticate(token) == bot
    assert repository.authenticate(token + "x") is None
    assert repository.authenticate("") is None
    assert repository.authenticate("\udcff") is None
    assert repository.get_bot("greedy") == bot
    assert repository.get_bot("nobody") is None


def test_tokens_are_stored_only_as_hashes(
    repository: Repository, raw: Engine, ladder_url: str
) -> None:
    tokens = [repository.register_bot("greedy", "alice")[1]]
    tokens.append(repository.register_bot("random", "bob")[1])
    tokens.append(repository.register_bot("greedy", "alice")[1])  # a new version
    play(repository, "m1", ["greedy", "random"], [1, 2])
    rows = dump_rows(raw)
    assert hash_token(tokens[2]) in rows  # the scan does see the tables' contents
    for token in tokens:
        assert token not in rows
    if ladder_url.startswith("sqlite"):
        repository.close()
        database = Path(ladder_url.removeprefix("sqlite:///"))
        files = [p for p in database.parent.iterdir() if p.name.startswith(database.name)]
        for path in files:
            content = path.read_bytes()
            for token in tokens:
                assert token.encode() not in content, path


def test_reregistration_makes_a_new_version_keeps_history_and_revokes_the_old_token(
    clocked: Repository,
) -> None:
    repo = clocked
    register(repo, "random", owner="bob")
    first, old_token = repo.register_bot("greedy", "alice")
    play(repo, "m1", ["greedy", "random"], [1, 2], {"greedy": (27.0, 7.0), "random": (23, 7)})

    second, new_token = repo.register_bot("greedy", "alice")
    assert second.version == 2 and second.created_at == first.created_at
    assert new_token != old_token
    assert repo.authenticate(old_token) is None
    assert repo.authenticate(new_token) == second
    assert [v.version for v in repo.bot_versions("greedy")] == [1, 2]
    assert repo.ratings()["greedy"].mu == 27.0
    profile = repo.bot_profile("greedy")
    assert profile is not None
    assert [p.match_id for p in profile.history] == ["m1"]
    assert [v.version for v in profile.versions] == [1, 2]

    play(repo, "m2", ["greedy", "random"], [2, 1])
    seats = {s.bot: s.bot_version for s in repo.list_matches(limit=1)[0].seats}
    assert seats == {"greedy": 2, "random": 1}
    assert repo.ratings()["greedy"].games == 2

    with pytest.raises(BotOwnerError):
        repo.register_bot("greedy", "mallory")
    assert repo.authenticate(new_token) == second  # the refused attempt changed nothing


def test_a_seat_can_only_name_a_registered_version(repository: Repository) -> None:
    register(repository, "a", "b")
    with pytest.raises(InvalidInputError, match="no version 2"):
        repository.start_match("m", 2, 1, [("a", 2), ("b", 1)], True)
    assert repository.get_match("m") is None


def test_retired_bots_lose_their_token_their_place_and_their_seat(
    repository: Repository,
) -> None:
    tokens = register(repository, "a", "b", "c")
    play(repository, "m1", ["a", "b", "c"], [1, 2, 3])
    retired = repository.retire_bot("b")
    assert retired.retired
    assert repository.authenticate(tokens["b"]) is None
    assert [b.name for b in repository.list_bots()] == ["a", "c"]
    assert [b.name for b in repository.list_bots(include_retired=True)] == ["a", "b", "c"]
    assert [row.bot for row in repository.leaderboard()] == ["a", "c"]
    assert "b" in repository.ratings()  # the rating is kept
    with pytest.raises(BotRetiredError):
        start(repository, "m2", ["a", "b"])
    assert repository.get_match("m2") is None

    revived, token = repository.register_bot("b", "alice")
    assert not revived.retired and revived.version == 2
    assert repository.authenticate(token) == revived
    assert [row.bot for row in repository.leaderboard()] == ["a", "b", "c"]


def test_unknown_bots_are_reported_as_key_errors(repository: Repository) -> None:
    with pytest.raises(UnknownBotError) as caught:
        repository.retire_bot("ghost")
    assert isinstance(caught.value, KeyError) and str(caught.value) == "ghost"
    with pytest.raises(KeyError):
        repository.set_probation("ghost", "why")
    with pytest.raises(KeyError):
        repository.recent_seat_results("ghost", 3)
    assert repository.bot_profile("ghost") is None


@pytest.mark.parametrize("name", ["", " greedy", "-x", "a b", "x" * 65, "bot/1", "ü"])
def test_bot_names_are_plain(repository: Repository, name: str) -> None:
    with pytest.raises(InvalidInputError):
        repository.register_bot(name, "alice")
    assert repository.list_bots() == []


@pytest.mark.parametrize("owner", ["", " ", "o" * 129])
def test_owners_are_named(repository: Repository, owner: str) -> None:
    with pytest.raises(InvalidInputError):
        repository.register_bot("fine", owner)


def test_probation_keeps_its_start_while_the_reason_changes(clocked: Repository) -> None:
    register(clocked, "a")
    assert bot_of(clocked, "a").on_probation is False
    first = clocked.set_probation("a", "3 timeouts")
    assert first.on_probation and first.probation_since is not None
    second = clocked.set_probation("a", "4 timeouts")
    assert second.probation_reason == "4 timeouts"
    assert second.probation_since == first.probation_since
    cleared = clocked.set_probation("a", None)
    assert cleared.probation_reason is None and cleared.probation_since is None
    assert clocked.get_bot("a") == cleared


# --- matches --------------------------------------------------------------------------------


def test_start_match_checks_the_table(repository: Repository) -> None:
    register(repository, "a", "b", "c")
    with pytest.raises(InvalidInputError):
        repository.start_match("m", 3, 1, [("a", 1), ("b", 1)], True)
    with pytest.raises(InvalidInputError):
        repository.start_match("m", 1, 1, [("a", 1)], True)
    with pytest.raises(InvalidInputError):
        repository.start_match("m", 2, 1, [("a", 1), ("a", 1)], True)
    with pytest.raises(InvalidInputError):
        repository.start_match("m", 2, -1, [("a", 1), ("b", 1)], True)
    with pytest.raises(UnknownBotError):
        repository.start_match("m", 2, 1, [("a", 1), ("ghost", 1)], True)
    with pytest.raises(UnknownChallengeError):
        repository.start_match("m", 2, 1, [("a", 1), ("b", 1)], False, challenge_id=99)
    started = repository.start_match("m", 2, 1, [("b", 1), ("a", 1)], True)
    assert started.status == "in_flight" and started.finished_at is None
    assert [(s.seat, s.bot, s.rank) for s in started.seats] == [(0, "b", None), (1, "a", None)]
    with pytest.raises(DuplicateMatchError):
        repository.start_match("m", 2, 1, [("a", 1), ("c", 1)], True)


def test_finish_match_stores_results_record_and_ratings(clocked: Repository) -> None:
    repo = clocked
    register(repo, "a", "b", "c")
    start(repo, "m1", ["c", "a", "b"], seed=99)
    assert repo.get_record("m1") is None
    finished = repo.finish_match(
        "m1",
        record("m1"),
        [
            SeatResult(0, "c", score=-3, rank=3, forfeited=True, timeouts=2),
            SeatResult(1, "a", score=12, rank=1, illegal_actions=1),
            SeatResult(2, "b", score=5, rank=2),
        ],
        {"a": (29.5, 7.1), "b": (25.0, 7.2), "c": (20.5, 7.3)},
    )
    assert finished.status == "finished" and finished.finished_at is not None
    assert repo.get_match("m1") == finished
    assert [
        (s.bot, s.score, s.rank, s.forfeited, s.timeouts, s.illegal_actions) for s in finished.seats
    ] == [
        ("c", -3, 3, True, 2, 0),
        ("a", 12, 1, False, 0, 1),
        ("b", 5, 2, False, 0, 0),
    ]
    assert repo.get_record("m1") == record("m1")
    ratings = repo.ratings()
    assert {n: (r.mu, r.sigma, r.games) for n, r in ratings.items()} == {
        "a": (29.5, 7.1, 1),
        "b": (25.0, 7.2, 1),
        "c": (20.5, 7.3, 1),
    }
    assert ratings["a"].conservative == pytest.approx(29.5 - 3 * 7.1)
    assert ratings["a"].updated_at == finished.finished_at
    profile = repo.bot_profile("a")
    assert profile is not None
    assert [(p.match_id, p.mu, p.sigma) for p in profile.history] == [("m1", 29.5, 7.1)]


FAILURES = ["unknown bot", "bot not at the table", "not a number", "database error"]


@pytest.mark.parametrize("failure", FAILURES)
def test_finish_match_is_all_or_nothing(
    repository: Repository, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    register(repository, "a", "b", "outsider")
    play(repository, "m1", ["a", "b"], [1, 2], {"a": (26.0, 8.0), "b": (24.0, 8.0)})
    before = repository.ratings()
    start(repository, "m2", ["a", "b"])
    # Updates are applied in name order, so "a" (and for most failures "b") is written first.
    updates = {"a": (30.0, 7.0), "b": (20.0, 7.0)}
    if failure == "unknown bot":
        updates["zz-ghost"] = (25.0, 8.0)
        error: type[Exception] = UnknownBotError
    elif failure == "bot not at the table":
        updates["outsider"] = (25.0, 8.0)
        error = InvalidInputError
    elif failure == "not a number":
        updates["b"] = (float("nan"), 7.0)
        error = InvalidInputError
    else:
        calls = []
        real = rating_queries._upsert_rating

        def flaky(*args: Any) -> Any:
            calls.append(args)
            if len(calls) == 2:
                raise RuntimeError("the database went away")
            return real(*args)

        monkeypatch.setattr(rating_queries, "_upsert_rating", flaky)
        error = RuntimeError
    with pytest.raises(error):
        repository.finish_match("m2", record("m2"), results(["a", "b"], [2, 1]), updates)

    match = repository.get_match("m2")
    assert match is not None and match.status == "in_flight" and match.finished_at is None
    assert all(s.rank is None and s.score is None for s in match.seats)
    assert repository.get_record("m2") is None
    assert repository.ratings() == before
    profile = repository.bot_profile("a")
    assert profile is not None and [p.match_id for p in profile.history] == ["m1"]

    monkeypatch.undo()
    repository.finish_match(
        "m2", record("m2"), results(["a", "b"], [2, 1]), {"a": (30.0, 7.0), "b": (20.0, 7.0)}
    )
    assert repository.ratings()["a"].games == 2


def test_finish_match_refuses_what_cannot_be(repository: Repository) -> None:
    register(repository, "a", "b", "c")
    with pytest.raises(UnknownMatchError):
        repository.finish_match("nope", "{}", results(["a", "b"], [1, 2]), {})
    start(repository, "m", ["a", "b"])
    start(repository, "friendly", ["a", "c"], rated=False)
    bad: list[tuple[str, list[SeatResult], dict[str, tuple[float, float]], str]] = [
        ("m", results(["a"], [1]), {}, "seats"),
        ("m", results(["b", "a"], [1, 2]), {}, "seat 0"),
        ("m", results(["a", "b"], [1, 3]), {}, "rank 3"),
        ("m", [*results(["a", "b"], [1, 2]), SeatResult(1, "b", 0, 2)], {}, "twice"),
        ("m", results(["a", "b"], [1, 2], timeouts=-1), {}, "counts"),
        ("friendly", results(["a", "c"], [1, 2]), {"a": (25.0, 8.0)}, "unrated"),
    ]
    for match_id, seats, updates, message in bad:
        with pytest.raises(InvalidInputError, match=message):
            repository.finish_match(match_id, record(match_id), seats, updates)
    with pytest.raises(InvalidInputError, match="JSON"):
        repository.finish_match("m", "{not json", results(["a", "b"], [1, 2]), {})
    with pytest.raises(InvalidInputError, match="sigma"):
        repository.finish_match("m", "{}", results(["a", "b"], [1, 2]), {"a": (25.0, 0.0)})
    repository.finish_match("m", "{}", results(["a", "b"], [1, 1]), {})  # a shared first
    with pytest.raises(MatchStateError):
        repository.finish_match("m", "{}", results(["a", "b"], [1, 2]), {})


def test_void_in_flight_voids_exactly_the_interrupted_matches(repository: Repository) -> None:
    register(repository, "a", "b", "c")
    start(repository, "m2", ["a", "b"])
    play(repository, "m1", ["a", "c"], [1, 2])
    start(repository, "m3", ["b", "c"], rated=False)
    assert repository.void_in_flight("the ladder restarted") == ["m2", "m3"]
    for match_id in ("m2", "m3"):
        match = repository.get_match(match_id)
        assert match is not None
        assert (match.status, match.void_reason) == ("void", "the ladder restarted")
        assert repository.get_record(match_id) is None
    # A result that arrives after its match was voided is kept, but the match stays void and
    # is never rated (its updates are ignored); the same finish again is a no-op.
    late_updates = {"a": (30.0, 7.0), "b": (20.0, 7.0)}
    late = repository.finish_match("m2", record("m2"), results(["a", "b"], [1, 2]), late_updates)
    assert (late.status, late.void_reason) == ("void", "the ladder restarted")
    assert [s.rank for s in late.seats] == [1, 2]
    assert repository.get_record("m2") == record("m2")
    assert repository.ratings()["a"].games == 1
    assert repository.finish_match("m2", record("m2"), results(["a", "b"], [1, 2]), late_updates) \
        == late
    with pytest.raises(MatchStateError):
        repository.finish_match("m2", record("m2"), results(["a", "b"], [2, 1]), {})
    assert repository.ratings()["a"].games == 1
    assert repository.recent_seat_results("a", 10)[0].match_id == "m1"
    assert match_of(repository, "m1").status == "finished"
    assert repository.void_in_flight("again") == []

    start(repository, "m4", ["a", "b"])
    assert repository.void_match("m4", "referee aborted it")
    assert not repository.void_match("m4", "twice")
    assert not repository.void_match("m1", "finished already")
    with pytest.raises(UnknownMatchError):
        repository.void_match("ghost", "?")
    assert repository.recent_seat_results("b", 10) == []  # void matches are not results


def test_seeds_are_unsigned_64_bit(repository: Repository, raw: Engine) -> None:
    register(repository, "a", "b")
    for i, seed in enumerate([0, 2**63 - 1, 2**63, 2**64 - 1]):
        start(repository, f"m{i}", ["a", "b"], seed=seed)
        assert match_of(repository, f"m{i}").seed == seed
    assert {m.seed for m in repository.list_matches()} == {0, 2**63 - 1, 2**63, 2**64 - 1}
    with raw.connect() as connection:
        stored = connection.execute(text("SELECT seed FROM matches WHERE id = 'm3'")).scalar()
    assert stored == str(2**64 - 1)
    for seed in (2**64, -1):
        with pytest.raises(InvalidInputError):
            start(repository, "bad", ["a", "b"], seed=seed)


def test_list_matches_filters_and_pages_newest_first(clocked: Repository) -> None:
    repo = clocked
    register(repo, "a", "b", "c", "d")
    play(repo, "m1", ["a", "b"], [1, 2])
    play(repo, "m2", ["a", "b", "c"], [1, 2, 3])
    play(repo, "m3", ["c", "d"], [1, 2], rated=False)
    start(repo, "m4", ["a", "d"])

    def ids(matches: list[MatchSummary]) -> list[str]:
        return [m.match_id for m in matches]

    assert ids(repo.list_matches()) == ["m4", "m3", "m2", "m1"]
    assert ids(repo.list_matches(bot="a")) == ["m4", "m2", "m1"]
    assert ids(repo.list_matches(bot="d")) == ["m4", "m3"]
    assert ids(repo.list_matches(table_size=2)) == ["m4", "m3", "m1"]
    assert ids(repo.list_matches(bot="a", table_size=2)) == ["m4", "m1"]
    assert ids(repo.list_matches(status="finished")) == ["m3", "m2", "m1"]
    assert ids(repo.list_matches(limit=2)) == ["m4", "m3"]
    assert ids(repo.list_matches(limit=2, offset=2)) == ["m2", "m1"]
    assert ids(repo.list_matches(offset=10)) == []
    assert ids(repo.list_matches(bot="ghost")) == []
    m3 = repo.list_matches(bot="c", table_size=2)[0]
    assert not m3.rated and [s.bot for s in m3.seats] == ["c", "d"]


def test_recent_seat_results_are_newest_first(clocked: Repository) -> None:
    repo = clocked
    register(repo, "a", "b")
    play(repo, "m1", ["a", "b"], [1, 2])
    start(repo, "m2", ["b", "a"])
    repo.finish_match("m2", "{}", results(["b", "a"], [2, 1], timeouts=1), {})
    play(repo, "m3", ["a", "b"], [2, 1], rated=False)
    start(repo, "m4", ["a", "b"])  # in flight: not a result yet
    recent = repo.recent_seat_results("a", 2)
    assert [(r.match_id, r.seat, r.rank, r.rated) for r in recent] == [
        ("m3", 0, 2, False),
        ("m2", 1, 1, True),
    ]
    assert recent[1].timeouts == 1 and recent[1].bot_version == 1
    assert recent[0].finished_at > recent[1].finished_at
    assert len(repo.recent_seat_results("a", 10)) == 3
    assert repo.recent_seat_results("a", 0) == []


def test_iter_finished_matches_follows_the_finish_order(clocked: Repository) -> None:
    repo = clocked
    register(repo, "a", "b", "c")
    for match_id in ("m1", "m2", "m3", "m4", "m5"):
        start(repo, match_id, ["a", "b", "c"], rated=match_id != "m4")
    start(repo, "m6", ["a", "b"])
    for match_id, ranks in [("m3", [1, 2, 3]), ("m1", [3, 1, 1]), ("m5", [2, 1, 3])]:
        repo.finish_match(match_id, "{}", results(["a", "b", "c"], ranks), {})
    repo.finish_match("m4", "{}", results(["a", "b", "c"], [1, 2, 3]), {})
    repo.finish_match("m2", "{}", results(["a", "b", "c"], [1, 3, 2]), {})
    finished = list(repo.iter_finished_matches(batch_size=2))
    assert [m.match_id for m in finished] == ["m3", "m1", "m5", "m2"]
    assert finished[1].bots == ("a", "b", "c") and finished[1].ranks == (3, 1, 1)
    assert all(m.rated for m in finished)
    everything = list(repo.iter_finished_matches(rated_only=False, batch_size=3))
    assert [m.match_id for m in everything] == ["m3", "m1", "m5", "m4", "m2"]
    assert list(repo.iter_finished_matches(batch_size=4)) == finished


# --- ratings --------------------------------------------------------------------------------


def test_leaderboard_sorts_by_mu_minus_three_sigma(clocked: Repository) -> None:
    repo = clocked
    register(repo, "steady", "lucky", "newbie", "gone", "unrated")
    play(
        repo,
        "m1",
        ["steady", "lucky", "newbie", "gone"],
        [2, 1, 3, 4],
        {"steady": (28.0, 2.0), "lucky": (31.0, 3.5), "newbie": (25.0, 8.0), "gone": (40, 1)},
    )
    repo.retire_bot("gone")
    repo.set_probation("newbie", "timeouts")
    board = repo.leaderboard()
    assert [(r.rank, r.bot) for r in board] == [(1, "steady"), (2, "lucky"), (3, "newbie")]
    top = board[0]
    assert (top.owner, top.mu, top.sigma, top.games) == ("alice", 28.0, 2.0, 1)
    assert top.conservative == pytest.approx(22.0)
    assert board[2].on_probation and not top.on_probation
    assert [row.recent_ranks for row in board] == [(2,), (1,), (3,)]


def test_leaderboard_shows_the_last_five_rated_ranks_newest_first(clocked: Repository) -> None:
    repo = clocked
    register(repo, "a", "b")
    ranks_of_a = [1, 2, 2, 1, 1, 2]
    for i, rank in enumerate(ranks_of_a):
        play(repo, f"m{i}", ["a", "b"], [rank, 3 - rank])
    play(repo, "friendly", ["a", "b"], [2, 1], rated=False)
    start(repo, "in-flight", ["a", "b"])
    rows = {r.bot: r for r in repo.leaderboard()}
    assert rows["a"].recent_ranks == (2, 1, 1, 2, 2)
    assert rows["b"].recent_ranks == (1, 2, 2, 1, 1)
    assert rows["a"].games == 6
    # each rank with its table's size, so that a 2nd of 2 reads as a last place
    register(repo, "c")
    play(repo, "m-three", ["c", "a", "b"], [1, 3, 2])
    rows = {r.bot: r for r in repo.leaderboard()}
    assert rows["a"].recent_ranks == (3, 2, 1, 1, 2)
    assert rows["a"].recent_table_sizes == (3, 2, 2, 2, 2)


def test_bot_profile_gathers_the_bots_page(clocked: Repository) -> None:
    repo = clocked
    register(repo, "a", "b", "c")
    play(repo, "m1", ["a", "b"], [1, 2], {"a": (27.0, 7.0), "b": (23.0, 7.0)})
    start(repo, "m2", ["b", "a", "c"])
    repo.finish_match(
        "m2",
        "{}",
        [
            SeatResult(0, "b", 9, 1),
            SeatResult(1, "a", 1, 3, forfeited=True, timeouts=3, illegal_actions=2),
            SeatResult(2, "c", 4, 2),
        ],
        {"a": (24.0, 6.5), "b": (26.0, 6.5), "c": (25.0, 6.5)},
    )
    play(repo, "m3", ["a", "c"], [1, 1], rated=False)
    start(repo, "m4", ["a", "b"])

    profile = repo.bot_profile("a", recent=2)
    assert profile is not None
    assert profile.bot.name == "a"
    assert profile.rating is not None and (profile.rating.mu, profile.rating.games) == (24.0, 2)
    assert profile.leaderboard_rank == 3  # b 26-19.5, c 25-19.5, a 24-19.5
    assert [(p.match_id, p.mu) for p in profile.history] == [("m1", 27.0), ("m2", 24.0)]
    assert profile.history[0].created_at < profile.history[1].created_at
    sizes = {r.table_size: r for r in profile.by_table_size}
    assert sorted(sizes) == [2, 3]
    assert (sizes[2].matches, sizes[2].wins, sizes[2].mean_rank) == (2, 2, 1.0)
    assert (sizes[3].matches, sizes[3].wins, sizes[3].mean_rank) == (1, 0, 3.0)
    assert sizes[3].mean_score == 1.0
    assert profile.matches_finished == 3
    assert (profile.timeouts, profile.forfeits, profile.illegal_actions) == (3, 1, 2)
    assert [m.match_id for m in profile.recent_matches] == ["m3", "m2"]
    assert [s.bot for s in profile.recent_matches[1].seats] == ["b", "a", "c"]

    register(repo, "fresh")
    fresh = repo.bot_profile("fresh")
    assert fresh is not None
    assert fresh.rating is None and fresh.leaderboard_rank is None
    assert fresh.history == () and fresh.by_table_size == () and fresh.recent_matches == ()
    assert (fresh.matches_finished, fresh.timeouts, fresh.forfeits) == (0, 0, 0)


def test_replace_ratings_rewrites_ratings_and_history_at_once(clocked: Repository) -> None:
    repo = clocked
    register(repo, "a", "b", "c")
    play(repo, "m1", ["a", "b"], [1, 2])
    play(repo, "m2", ["b", "c"], [1, 2])
    play(repo, "friendly", ["a", "c"], [1, 2], rated=False)
    finished_at = {m.match_id: m.finished_at for m in repo.iter_finished_matches()}

    history = [
        RatingHistoryEntry("a", "m1", 26.0, 8.0),
        RatingHistoryEntry("b", "m1", 24.0, 8.0),
        RatingHistoryEntry("b", "m2", 25.5, 7.5),
        RatingHistoryEntry("c", "m2", 23.5, 7.5),
    ]
    ratings = {"a": (26.0, 8.0), "b": (25.5, 7.5), "c": (23.5, 7.5)}
    repo.replace_ratings(ratings, history)
    stored = repo.ratings()
    assert {n: (r.mu, r.sigma, r.games) for n, r in stored.items()} == {
        "a": (26.0, 8.0, 1),
        "b": (25.5, 7.5, 2),
        "c": (23.5, 7.5, 1),
    }
    profile = repo.bot_profile("b")
    assert profile is not None
    assert [(p.match_id, p.mu, p.created_at) for p in profile.history] == [
        ("m1", 24.0, finished_at["m1"]),
        ("m2", 25.5, finished_at["m2"]),
    ]

    for bad_ratings, bad_history, error in [
        ({**ratings, "ghost": (1.0, 1.0)}, history, UnknownBotError),
        ({"a": (26.0, 8.0)}, history, InvalidInputError),  # history for unrated bots
        (ratings, [RatingHistoryEntry("a", "friendly", 1.0, 1.0)], InvalidInputError),
        (ratings, [RatingHistoryEntry("a", "nope", 1.0, 1.0)], InvalidInputError),
    ]:
        with pytest.raises(error):
            repo.replace_ratings(bad_ratings, bad_history)
        assert repo.ratings() == stored

    repo.replace_ratings({}, [])
    assert repo.ratings() == {} and repo.leaderboard() == []


def test_concurrent_finishes_lose_no_rating_update(repository: Repository) -> None:
    names = [f"bot{i}" for i in range(8)]
    register(repository, *names)
    tables = [[names[(i + k * (1 + i % 3)) % 8] for k in range(4)] for i in range(24)]
    tables = [list(dict.fromkeys(t)) for t in tables]
    tables = [t for t in tables if len(t) >= 2]
    for i, table in enumerate(tables):
        start(repository, f"m{i}", table)
    barrier = threading.Barrier(8)

    def finish(i: int) -> None:
        if i < 8:
            barrier.wait(timeout=30)
        table = tables[i]
        updates = {n: (20.0 + i, 5.0 + k / 10) for k, n in enumerate(table)}
        repository.finish_match(
            f"m{i}", record(f"m{i}"), results(table, list(range(1, len(table) + 1))), updates
        )

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(finish, range(len(tables))))

    seats = Counter(n for table in tables for n in table)
    ratings = repository.ratings()
    assert {n: r.games for n, r in ratings.items()} == dict(seats)
    assert all(m.status == "finished" for m in repository.list_matches(limit=100))
    for name in names:
        profile = repository.bot_profile(name)
        assert profile is not None and len(profile.history) == seats[name]
        # The stored rating is the one of the last update that was applied.
        assert (profile.history[-1].mu, profile.history[-1].sigma) == (
            ratings[name].mu,
            ratings[name].sigma,
        )
    assert len(list(repository.iter_finished_matches())) == len(tables)


# --- challenges -----------------------------------------------------------------------------


def test_challenges_count_their_games(repository: Repository) -> None:
    register(repository, "mine", "x", "y")
    challenge = repository.create_challenge("alice", "mine", ["x", "y"], 2)
    assert (challenge.bot, challenge.opponents, challenge.status) == ("mine", ("x", "y"), "open")
    assert (challenge.games_requested, challenge.games_played, challenge.games_in_flight) == (
        2,
        0,
        0,
    )
    assert repository.open_challenges() == [challenge]
    assert repository.get_challenge(challenge.id) == challenge

    start(repository, "c1", ["mine", "x", "y"], rated=False, challenge_id=challenge.id)
    assert repository.open_challenges()[0].games_in_flight == 1
    assert match_of(repository, "c1").challenge_id == challenge.id
    # finish_match counts the game in its own transaction, so a repeated finish counts once.
    for _ in range(2):
        repository.finish_match("c1", "{}", results(["mine", "x", "y"], [1, 2, 3]), {})
    after_one = repository.get_challenge(challenge.id)
    assert after_one is not None
    assert (after_one.games_played, after_one.games_in_flight, after_one.status) == (1, 0, "open")
    start(repository, "c2", ["mine", "x", "y"], rated=False, challenge_id=challenge.id)
    repository.void_match("c2", "the referee aborted it")
    assert repository.get_challenge(challenge.id).games_played == 1  # type: ignore[union-attr]
    start(repository, "c3", ["x", "mine", "y"], rated=False, challenge_id=challenge.id)
    repository.finish_match("c3", "{}", results(["x", "mine", "y"], [1, 2, 3]), {})
    done = repository.get_challenge(challenge.id)
    assert done is not None and (done.games_played, done.status) == (2, "done")
    assert repository.open_challenges() == []

    other = repository.create_challenge("alice", "mine", ["x"], 5)
    cancelled = repository.cancel_challenge(other.id)
    assert cancelled.status == "cancelled" and repository.open_challenges() == []
    assert repository.get_challenge(999) is None


def test_challenges_are_checked(repository: Repository) -> None:
    register(repository, "mine", "x", "y")
    repository.retire_bot("y")
    for opponents, games, error in [
        (["x"], 0, InvalidInputError),
        ([], 1, InvalidInputError),
        (["x", "x"], 1, InvalidInputError),
        (["mine"], 1, InvalidInputError),
        (["a", "b", "c", "d", "e"], 1, InvalidInputError),
        (["ghost"], 1, UnknownBotError),
        (["y"], 1, BotRetiredError),
    ]:
        with pytest.raises(error):
            repository.create_challenge("alice", "mine", opponents, games)
    with pytest.raises(UnknownBotError):
        repository.create_challenge("alice", "ghost", ["x"], 1)
    assert repository.open_challenges() == []


# --- migrations and engine ------------------------------------------------------------------


def test_migrations_run_twice_without_harm(ladder_url: str, raw: Engine) -> None:
    with Repository(ladder_url) as repo:
        repo.migrate()
        register(repo, "a", "b")
        play(repo, "m1", ["a", "b"], [1, 2])
        repo.migrate()
    with Repository(ladder_url) as again:
        again.migrate()
        assert [b.name for b in again.list_bots()] == ["a", "b"]
        assert again.get_record("m1") == record("m1")
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    with raw.connect() as connection:
        versions = connection.execute(text("SELECT version_num FROM alembic_version")).all()
    assert [tuple(v) for v in versions] == [(head,)]


def test_concurrent_first_migrations_agree(ladder_url: str) -> None:
    repos = [Repository(ladder_url) for _ in range(3)]
    try:
        with ThreadPoolExecutor(max_workers=3) as pool:
            list(pool.map(lambda repo: repo.migrate(), repos))
        register(repos[0], "a")
        assert repos[2].get_bot("a") is not None
    finally:
        for repo in repos:
            repo.close()


def test_the_migrations_build_exactly_the_models(repository: Repository, raw: Engine) -> None:
    with raw.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert differences == []


def test_sqlite_runs_with_foreign_keys_and_wal(tmp_path: Path) -> None:
    with Repository(f"sqlite:///{tmp_path / 'l.db'}") as repo:
        repo.migrate()
        with repo._engine.connect() as connection:  # the repository's own connections
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_an_in_memory_sqlite_is_one_database_for_all_threads() -> None:
    with Repository("sqlite://") as repo:
        repo.migrate()
        register(repo, "a", "b")
        with ThreadPoolExecutor(max_workers=4) as pool:
            names = list(pool.map(lambda _: [b.name for b in repo.list_bots()], range(8)))
        assert names == [["a", "b"]] * 8


def test_other_databases_are_refused() -> None:
    with pytest.raises(ValueError, match="sqlite or postgresql"):
        Repository("mysql://localhost/ladder")


def test_times_come_back_in_utc(ladder_url: str) -> None:
    clock = Clock()
    plus_five = timezone(timedelta(hours=5))
    with Repository(ladder_url, clock=lambda: clock().astimezone(plus_five)) as repo:
        repo.migrate()
        bot, _ = repo.register_bot("a", "alice")
        assert bot.created_at.tzinfo == UTC
        stored = repo.get_bot("a")
        assert stored is not None and stored.created_at == bot.created_at
        assert stored.created_at.tzinfo == UTC
