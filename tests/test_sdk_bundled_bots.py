"""The SDK's group rules and bundled bots, judged by the rules oracle of tests/support, not by
the SDK's own code."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest
from scout_client import (
    Action,
    Bot,
    Card,
    GreedyBot,
    Observation,
    RandomBot,
    RotationRequest,
    Scout,
    ScoutAndShow,
    Show,
    beats,
    group_strength,
)
from support import oracle
from support.sdk_fakes import (
    LEFT,
    after_scout,
    cards,
    legal_shows,
    observation,
    random_observation,
    scout_and_show_ok,
)


@pytest.mark.parametrize(
    ("mine", "active", "expected"),
    [
        ((5, 6, 7), (3, 4, 5), True),
        ((8, 8), (6, 6), True),
        ((6, 6), (6, 6), False),  # equal strength does not beat
        ((3, 3), (4, 5), True),  # a set beats a run of the same length
        ((4, 5), (3, 3), False),
        ((1, 2, 3), (9, 9), True),  # more cards wins
        ((8, 7, 6), (5, 6, 7), True),  # descending runs count by their lowest value
        ((9,), (8,), True),
        ((2, 4), (), False),  # not a group
        ((7,), (), True),
    ],
)
def test_beats_follows_the_rules(
    mine: tuple[int, ...], active: tuple[int, ...], expected: bool
) -> None:
    assert beats(mine, active) is expected
    assert oracle.beats(mine, active) is expected


def test_group_strength() -> None:
    assert group_strength((4,)) == (1, 1, 4)
    assert group_strength((3, 2, 1)) == (3, 0, 1)
    assert group_strength((1, 2, 2)) is None
    assert group_strength(()) is None


def check_action(obs: Observation, action: Action) -> None:
    if isinstance(action, Show):
        assert action in obs.legal_shows
    elif isinstance(action, Scout):
        assert action in obs.legal_scouts
    else:
        assert isinstance(action, ScoutAndShow)
        assert scout_and_show_ok(obs, action), (obs, action)
    assert obs.is_legal(action)


@pytest.mark.parametrize("bot_class", [RandomBot, GreedyBot])
def test_bundled_bots_play_only_legal_actions(bot_class: type[Bot]) -> None:
    rng = random.Random(7)
    bot = bot_class()
    combos: list[tuple[Observation, ScoutAndShow]] = []
    for _ in range(400):
        obs = random_observation(rng)
        action = bot.act(obs)
        check_action(obs, action)  # type: ignore[arg-type]
        if isinstance(action, ScoutAndShow):
            combos.append((obs, action))
        rotate = bot.choose_rotation(RotationRequest("m1", 1, 0, obs.hand))
        assert isinstance(rotate, bool)
    assert combos, "both bots play Scout & Show when it is allowed"
    assert all(obs.num_players >= 3 for obs, _ in combos)
    if bot_class is GreedyBot:
        # Greedy spends the token only on a group at least as long as the active set.
        assert all(combo.show.length >= max(2, len(obs.active_set)) for obs, combo in combos)


def kind_of(action: Action) -> str:
    return type(action).__name__


def test_random_bot_picks_each_available_kind_about_equally_often() -> None:
    """Uniform over the kinds, not over the actions: the one legal Show is played about as
    often as any of the 20 Scouts or the many Scout & Shows."""
    obs = observation(cards(5, 7, 9, 9), (Card(6, 1), Card(6, 2)), players=4)
    assert obs.legal_shows == (Show(2, 2),) and len(obs.legal_scouts) == 20
    assert len(obs.scout_and_shows()) > 20
    bot = RandomBot(seed=1)
    actions = [bot.act(replace(obs, match_id=f"m{i}")) for i in range(600)]
    counts = Counter(kind_of(action) for action in actions)
    assert set(counts) == {"Show", "Scout", "ScoutAndShow"}
    assert all(150 <= count <= 250 for count in counts.values()), counts
    combos = {action for action in actions if isinstance(action, ScoutAndShow)}
    assert len(combos) > 10  # uniform within the kind, not one favourite
    for combo in combos:
        assert scout_and_show_ok(obs, combo)


@pytest.mark.parametrize(
    ("players", "token"), [(2, True), (4, False)], ids=["two players", "token spent"]
)
def test_random_bot_never_plays_scout_and_show_where_it_is_not_allowed(
    players: int, token: bool
) -> None:
    obs = observation(cards(5, 7, 9, 9), (Card(6, 1), Card(6, 2)), players=players, token=token)
    assert not obs.scout_and_show_available and obs.scout_and_shows() == []
    bot = RandomBot(seed=1)
    counts = Counter(kind_of(bot.act(replace(obs, match_id=f"m{i}"))) for i in range(400))
    assert set(counts) == {"Show", "Scout"}
    assert all(150 <= count <= 250 for count in counts.values()), counts


def test_scout_and_shows_match_the_reference() -> None:
    rng = random.Random(3)
    checked = 0
    while checked < 50:
        obs = random_observation(rng)
        if not obs.scout_and_show_available:
            assert obs.scout_and_shows() == []
            continue
        combos = obs.scout_and_shows()
        assert combos, obs
        expected = {
            ScoutAndShow(scout, show)
            for scout in obs.legal_scouts
            for show in legal_shows(*after_scout(obs.hand, obs.active_set, scout))
        }
        assert set(combos) == expected
        checked += 1


def test_greedy_prefers_the_longest_then_weakest_show() -> None:
    obs = observation(cards(9, 9, 2, 3, 7, 7), cards(4))
    assert GreedyBot().act(obs) == Show(2, 2)  # run 2-3 is weaker than the sets 7-7 and 9-9
    obs = observation(cards(9, 9, 1, 2, 3), ())
    assert GreedyBot().act(obs) == Show(2, 3)


def test_greedy_uses_scout_and_show_to_complete_a_run() -> None:
    obs = observation(cards(5, 7), (Card(6, 1), Card(6, 2)))
    assert not obs.legal_shows and obs.scout_and_show_available
    action = GreedyBot().act(obs)
    assert action == ScoutAndShow(Scout(LEFT, False, 1), Show(0, 3))
    # Without the token it scouts the card that makes the run.
    action = GreedyBot().act(observation(cards(5, 7), (Card(6, 1), Card(6, 2)), token=False))
    assert isinstance(action, Scout) and action.insert_at == 1 and not action.flip


def test_random_bot_is_reproducible_per_match() -> None:
    rng = random.Random(11)
    observations = [random_observation(rng) for _ in range(30)]
    first = [RandomBot(seed=5).act(o) for o in observations]
    assert [RandomBot(seed=5).act(o) for o in observations] == first
    # A match replays the same when another match draws from the same bot in between.
    alone, shared = RandomBot(seed=5), RandomBot(seed=5)
    solo = [alone.act(o) for o in observations]
    interleaved = []
    for o in observations:
        shared.act(replace(o, match_id="another match"))
        interleaved.append(shared.act(o))
    assert interleaved == solo
    assert len(set(solo)) > 1


def test_fallback_is_the_first_legal_show_else_first_scout() -> None:
    obs = observation(cards(4, 4, 1), cards(2))
    assert obs.fallback() == Show(0, 1)
    obs = observation(cards(1), cards(5, 5))
    assert obs.fallback() == Scout(LEFT, False, 0)
