"""scout_arena.env.spiel: SCOUT as an OpenSpiel game (``python_scout``)."""

from __future__ import annotations

import random

import numpy as np
import pyspiel
import pytest
from scout_arena.env import ObservationLayout, Rotation
from scout_arena.env.spiel import ScoutGame, ScoutState
from scout_arena.record import record_to_json, replay
from scout_rules import Phase, deck_for

PLAYER_COUNTS = (2, 3, 4, 5)


def load(players: int) -> ScoutGame:
    game = pyspiel.load_game("python_scout", {"players": players})
    assert isinstance(game, ScoutGame)
    return game


def play_random(game: ScoutGame, seed: int) -> ScoutState:
    """Chance outcomes by their probabilities, decisions uniformly among the legal ones."""
    rng = random.Random(seed)
    state = game.new_initial_state()
    while not state.is_terminal():
        if state.is_chance_node():
            outcomes, probs = zip(*state.chance_outcomes(), strict=True)
            state.apply_action(rng.choices(outcomes, probs)[0])
        else:
            state.apply_action(rng.choice(state.legal_actions()))
    return state


@pytest.mark.parametrize("players", PLAYER_COUNTS)
def test_openspiel_random_sim_test_passes(players: int) -> None:
    pyspiel.random_sim_test(load(players), num_sims=2, serialize=False, verbose=False)


def test_the_players_parameter_sets_the_game() -> None:
    for players in PLAYER_COUNTS:
        game = pyspiel.load_game(f"python_scout(players={players})")
        assert game.num_players() == players
        assert game.num_distinct_actions() == game.codec.size
        assert game.observation_tensor_shape() == [ObservationLayout(players).size]
    assert pyspiel.load_game("python_scout").num_players() == 2
    with pytest.raises(ValueError):
        ScoutGame({"players": 6})


@pytest.mark.parametrize("players", PLAYER_COUNTS)
def test_the_deal_is_chance_card_by_card_over_the_whole_deck(players: int) -> None:
    game = load(players)
    state = game.new_initial_state()
    deck = deck_for(players)
    first = state.chance_outcomes()
    assert [o for o, _ in first] == list(range(2 * len(deck)))
    assert sum(p for _, p in first) == pytest.approx(1.0)
    rng = random.Random(players)
    while state.is_chance_node():
        outcomes = state.chance_outcomes()
        assert sum(p for _, p in outcomes) == pytest.approx(1.0)
        state.apply_action(rng.choice(outcomes)[0])
    match = state.match
    assert match is not None and match.phase is Phase.ROTATION
    for round_hands in match.deals:  # every round is a full, valid deal (the engine checks)
        assert len({c.pair for h in round_hands for c in h}) == sum(map(len, round_hands))
    assert state.current_player() == 0


@pytest.mark.parametrize("players", PLAYER_COUNTS)
def test_legal_actions_are_the_engines_and_returns_are_match_scores(players: int) -> None:
    game = load(players)
    rng = random.Random(7)
    for _ in range(2):
        state = game.new_initial_state()
        rewards = np.zeros(players)
        while not state.is_terminal():
            if state.is_chance_node():
                state.apply_action(rng.choice(state.chance_outcomes())[0])
                continue
            match = state.match
            assert match is not None
            legal = state.legal_actions()
            assert legal == sorted(legal)
            decoded = {game.codec.decode(a) for a in legal}
            if match.phase is Phase.ROTATION:
                assert decoded == {Rotation(False), Rotation(True)}
            else:
                assert decoded == set(match.legal_actions())
                assert state.current_player() == match.current_seat
            state.apply_action(rng.choice(legal))
            rewards += state.rewards()
            assert list(rewards) == state.returns()
        match = state.match
        assert match is not None and match.is_over
        assert state.returns() == [float(s) for s in match.scores]
        assert replay(record_to_json(state.match_record())).state.scores == match.scores


@pytest.mark.parametrize("players", PLAYER_COUNTS)
def test_observation_tensor_is_the_environment_layout_and_hides_other_hands(
        players: int) -> None:
    game = load(players)
    assert play_random(game, 1).is_terminal()
    # Play one match to its midst and compare with the layout's own encoding.
    state = game.new_initial_state()
    rng = random.Random(3)
    while state.is_chance_node() or rng.random() < 0.97:
        if state.is_terminal():
            break
        if state.is_chance_node():
            state.apply_action(rng.choice(state.chance_outcomes())[0])
        else:
            state.apply_action(rng.choice(state.legal_actions()))
    match = state.match
    assert match is not None
    layout = ObservationLayout(players)
    for seat in range(players):
        expected = layout.encode(match.observation(seat))
        assert np.array_equal(np.asarray(state.observation_tensor(seat), np.float32), expected)
        info = np.asarray(state.information_state_tensor(seat), np.float32)
        assert np.array_equal(info[: layout.size], expected)
        text = state.information_state_string(seat)
        assert text.startswith(f"seat {seat}")
        # Another seat's dealt hand is not in this seat's information state.
        other = (seat + 1) % players
        assert f"dealt {' '.join(map(str, match.deals[match.round_index][other]))}" not in text


def test_a_clone_is_independent_of_its_original() -> None:
    game = load(3)
    state = game.new_initial_state()
    rng = random.Random(5)
    while state.is_chance_node() or (state.match is not None
                                     and state.match.phase is Phase.ROTATION):
        legal = ([o for o, _ in state.chance_outcomes()] if state.is_chance_node()
                 else state.legal_actions())
        state.apply_action(rng.choice(legal))
    copy = state.clone()
    before = copy.information_state_string(0)
    state.apply_action(state.legal_actions()[0])
    assert copy.information_state_string(0) == before
    assert copy.history() == state.history()[:-1]
    assert copy.match is not None and state.match is not None
    assert copy.match is not state.match
    assert len(copy.match.round_logs[0].actions) + 1 == len(state.match.round_logs[0].actions)
