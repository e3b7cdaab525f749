"""The ladder's storage layer, on SQLite and on PostgreSQL (every test runs on both; the fixtures
``repository`` and ``ladder_url`` come from conftest.py, the rest from
tests/support/ladder_storage.py): matches: the table, finishing (all or nothing), voiding, seeds
and listings."""

from __future__ import annotations

from typing import Any

import pytest
from scout_ladder import (
    DuplicateMatchError,
    InvalidInputError,
    MatchStateError,
    MatchSummary,
    Repository,
    SeatResult,
    UnknownBotError,
    UnknownChallengeError,
    UnknownMatchError,
)
from scout_ladder.repository import ratings as rating_queries
from sqlalchemy import text
from sqlalchemy.engine import Engine
from support.ladder_storage import (  # noqa: F401  (the *_fixture names: pytest fixtures)
    clocked_fixture,
    match_of,
    play,
    raw_fixture,
    record,
    register,
    results,
    start,
)


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
    assert (
        repository.finish_match("m2", record("m2"), results(["a", "b"], [1, 2]), late_updates)
        == late
    )
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
