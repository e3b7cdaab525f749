"""The ladder's storage layer, on SQLite and on PostgreSQL (every test runs on both; the fixtures
``repository`` and ``ladder_url`` come from conftest.py, the rest from
tests/support/ladder_storage.py): bots, their tokens, versions, names, owners and probation."""

from __future__ import annotations

from pathlib import Path

import pytest
from scout_ladder import (
    BotOwnerError,
    BotRetiredError,
    InvalidInputError,
    Repository,
    UnknownBotError,
    hash_token,
)
from sqlalchemy.engine import Engine
from support.ladder_storage import (  # noqa: F401  (the *_fixture names: pytest fixtures)
    bot_of,
    clocked_fixture,
    dump_rows,
    play,
    raw_fixture,
    register,
    start,
)


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
