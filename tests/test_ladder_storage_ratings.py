"""The ladder's storage layer, on SQLite and on PostgreSQL (every test runs on both; the fixtures
``repository`` and ``ladder_url`` come from conftest.py, the rest from
tests/support/ladder_storage.py): ratings, the leaderboard, a bot's profile, recomputed ratings,
concurrent finishes, and challenges."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from scout_ladder import (
    BotRetiredError,
    InvalidInputError,
    RatingHistoryEntry,
    Repository,
    SeatResult,
    UnknownBotError,
)
from support.ladder_storage import (
    clocked_fixture,  # noqa: F401  (the *_fixture names: pytest fixtures)
    match_of,
    play,
    record,
    register,
    results,
    start,
)


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
