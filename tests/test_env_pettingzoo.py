"""scout_arena.env: the PettingZoo AEC environment, its action encoding and its observations."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import cast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pettingzoo.test import api_test, render_test, seed_test
from scout_arena.env import ActionCodec, KnownCards, ObservationLayout, Rotation
from scout_arena.env.aec import ScoutEnv
from scout_arena.env.observation import Vector
from scout_arena.record import record_to_json, replay
from scout_rules import Card, End, Hand, Phase, Scout, ScoutAndShow, Show, State

PLAYER_COUNTS = (2, 3, 4, 5)
#: Random-agent episodes per player count here (a few hundred in all; bench/env.py plays
#: thousands, each record replayed, with --check-records).
EPISODES = {2: 250, 3: 120, 4: 20, 5: 15}


def play_random(env: ScoutEnv, seed: int, rng: np.random.Generator) -> Iterator[int]:
    """One episode of uniformly random masked actions; yields each id as it is stepped."""
    env.reset(seed=seed)
    for _ in env.agent_iter():
        obs, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        action = int(rng.choice(np.flatnonzero(obs["action_mask"])))
        yield action
        env.step(action)


# Dict observations ({"observation", "action_mask"}) are PettingZoo's own convention for masked
# games; api_test warns about them for every environment it does not list by name.
@pytest.mark.filterwarnings("ignore:Observation space for each agent probably")
@pytest.mark.filterwarnings("ignore:Observation is not a NumPy array")
@pytest.mark.parametrize("players", PLAYER_COUNTS)
def test_pettingzoo_api_test_passes(players: int) -> None:
    api_test(ScoutEnv(players), num_cycles=300)


@pytest.mark.parametrize("players", PLAYER_COUNTS)
def test_same_seed_same_episode_by_pettingzoo_seed_test(players: int) -> None:
    seed_test(lambda: ScoutEnv(players), num_cycles=50)


def test_render_test_and_the_text_shows_the_table() -> None:
    render_test(lambda render_mode=None: ScoutEnv(3, render_mode=render_mode))
    env = ScoutEnv(3, render_mode="ansi")
    env.reset(seed=5)
    text = env.render()
    assert isinstance(text, str)
    assert "round 1/3" in text and "seat_0" in text and "seat_2" in text
    assert str(env.match.hand(1).faces[0]) in text  # the spectator's view shows every hand


@pytest.mark.parametrize("players", PLAYER_COUNTS)
def test_reset_seed_deals_the_engines_seeded_deal(players: int) -> None:
    env = ScoutEnv(players)
    env.reset(seed=123456789)
    assert env.match.deals == State.new(players, 123456789).deals
    env.reset()
    first = env.match.deals
    env.reset(seed=123456789)
    env.reset()
    assert env.match.deals == first  # the unseeded reset after a seed is reproducible too


def _deal_with_seat1_changed(players: int, seed: int) -> tuple[State, State]:
    """Two matches whose deals differ only in what seats 1 and 2 hold (cards swapped between
    them, or within seat 1's hand with 2 players)."""
    deals = [[list(h) for h in r] for r in State.new(players, seed).deals]
    other = [[list(h) for h in r] for r in deals]
    for r, hands in enumerate(other):
        if players == 2:
            hands[1].reverse()
            hands[1][0] = hands[1][0].flipped()
        else:
            hands[1][0], hands[2][3] = deals[r][2][3], deals[r][1][0]
    return State.from_deals(players, deals), State.from_deals(players, other)


@pytest.mark.parametrize("players", PLAYER_COUNTS)
def test_observation_never_contains_another_seats_hidden_cards(players: int) -> None:
    codec, obs_layout = ActionCodec(players), ObservationLayout(players)
    a, b = _deal_with_seat1_changed(players, 77)
    assert a.hand(1) != b.hand(1)
    for seat in range(players):
        a.choose_rotation(seat, seat == 0)
        b.choose_rotation(seat, seat == 0)
    # Seat 0 plays the same Show in both; it sees the same vector in both, at every point.
    for state in (a, b):
        state.apply(Show(0, 1))
    first = obs_layout.encode(a.observation(0))
    assert np.array_equal(first, obs_layout.encode(b.observation(0)))
    # ... and through the environment, whose state is the same match.
    env = ScoutEnv(players)
    env.reset(seed=1)
    env.state_ = a
    env._known = KnownCards(players, obs_layout.hand_size)
    assert np.array_equal(env.observe("seat_0")["observation"], first)
    assert codec.size == env.action_space("seat_0").n
    # The seat whose cards changed does see them: the observation is not blind.
    assert not np.array_equal(obs_layout.encode(a.observation(1)),
                              obs_layout.encode(b.observation(1)))


@pytest.mark.parametrize("players", PLAYER_COUNTS)
def test_known_cards_are_where_the_engine_holds_them(players: int) -> None:
    """The public model of every hand puts each scouted card at the position it really has."""
    env = ScoutEnv(players)
    rng = np.random.default_rng(players)
    layout = env.layout
    checked = 0
    for seed in range(3):
        for _ in play_random(env, seed, rng):
            state = env.match
            if state.phase is not Phase.PLAY:
                continue
            # Obs holds both kinds of array; "observation" is always the float vector.
            observed = cast(Vector, env.observe("seat_0")["observation"])
            vector = layout.view(observed, "known_hands")
            for rel in range(1, players):
                seat = rel % players
                hand = state.hand(seat)
                rows = vector[rel - 1]
                assert rows[:, 0].sum() == len(hand)
                for pos, row in enumerate(rows[: len(hand)]):
                    if row[1:].any():
                        low = int(np.argmax(row[1:11])) + 1
                        high = int(np.argmax(row[11:21])) + 1
                        assert (low, high) == hand[pos].pair
                        checked += 1
    assert checked > 0


def _decisions_allowed(state: State) -> set[object]:
    if state.phase is Phase.ROTATION:
        return {Rotation(False), Rotation(True)}
    return set(state.legal_actions())


@pytest.mark.parametrize("players", PLAYER_COUNTS)
def test_mask_is_exactly_the_engines_legal_actions(players: int) -> None:
    env = ScoutEnv(players)
    rng = np.random.default_rng(10 + players)
    steps = 0
    for seed in range(4 if players < 4 else 2):
        env.reset(seed=seed)
        for agent in env.agent_iter():
            obs, _, terminated, _, _ = env.last()
            if terminated:
                env.step(None)
                continue
            ids = np.flatnonzero(obs["action_mask"])
            decoded = [env.codec.decode(int(i)) for i in ids]
            assert len(set(decoded)) == len(decoded)
            assert set(decoded) == _decisions_allowed(env.match)
            for other in env.agents:
                if other != agent:
                    assert not env.observe(other)["action_mask"].any()
            action = int(rng.choice(ids))
            env.step(action)
            steps += 1
    assert steps > 50


@pytest.mark.parametrize("players", PLAYER_COUNTS)
def test_random_agents_every_record_replays_and_rewards_add_up(players: int) -> None:
    env = ScoutEnv(players)
    rng = np.random.default_rng(players)
    for episode in range(EPISODES[players]):
        totals = dict.fromkeys(env.possible_agents, 0.0)
        env.reset(seed=1000 * players + episode)
        for agent in env.agent_iter():
            obs, reward, terminated, truncated, _ = env.last()
            totals[agent] += reward
            if terminated or truncated:
                env.step(None)
                continue
            env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        state = env.match
        assert state.is_over
        result = replay(record_to_json(env.match_record()))
        assert result.state.scores == state.scores
        assert [totals[a] for a in env.possible_agents] == [float(s) for s in state.scores]


def test_match_reward_only_pays_the_match_score_once_at_the_end() -> None:
    env = ScoutEnv(3, match_reward_only=True)
    rng = np.random.default_rng(3)
    env.reset(seed=9)
    paid: list[tuple[str, float, bool]] = []
    for agent in env.agent_iter():
        obs, reward, terminated, _, _ = env.last()
        paid.append((agent, reward, terminated))
        if terminated:
            env.step(None)
            continue
        env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
    assert all(r == 0 for _, r, done in paid if not done)
    final = {a: r for a, r, done in paid if done}
    assert final == {f"seat_{s}": float(v) for s, v in enumerate(env.match.scores)}
    assert any(v != 0 for v in final.values())


def test_an_unmasked_action_is_refused_and_changes_nothing() -> None:
    env = ScoutEnv(2)
    env.reset(seed=4)
    before = env.match.observation(0)
    with pytest.raises(ValueError, match="not in the mask"):
        env.step(env.codec.scout_base)  # a Scout during the rotation phase
    assert env.match.observation(0) == before


# ----- the action encoding ---------------------------------------------------------------

def _decisions(players: int) -> st.SearchStrategy[object]:
    h = ActionCodec(players).max_hand
    shows = st.builds(Show, st.integers(0, h - 1), st.integers(1, 10))
    scouts = st.builds(Scout, st.sampled_from([End.LEFT, End.RIGHT]), st.booleans(),
                       st.integers(0, h - 1))
    options: list[st.SearchStrategy[object]] = [st.builds(Rotation, st.booleans()), shows, scouts]
    if players > 2:
        options.append(st.builds(ScoutAndShow, scouts, shows))
    return st.one_of(options)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), players=st.sampled_from(PLAYER_COUNTS))
def test_action_encoding_round_trips(data: st.DataObject, players: int) -> None:
    codec = ActionCodec(players)
    decision = data.draw(_decisions(players))
    action_id = codec.encode(decision)  # type: ignore[arg-type]
    assert 0 <= action_id < codec.size
    assert codec.decode(action_id) == decision
    any_id = data.draw(st.integers(0, codec.size - 1))
    assert codec.encode(codec.decode(any_id)) == any_id


def test_action_ids_have_the_documented_sizes() -> None:
    sizes = {n: ActionCodec(n).size for n in PLAYER_COUNTS}
    assert sizes == {2: 296, 3: 46718, 4: 67816, 5: 67816}
    with pytest.raises(ValueError):
        ActionCodec(2).encode(ScoutAndShow(Scout(End.LEFT, False, 0), Show(0, 1)))


def test_the_hand_bound_holds_in_random_play() -> None:
    """No hand outgrows ``max_hand`` (the encoding's premise), even when one seat only
    scouts: play where seat 0 scouts whenever it may."""
    rng = random.Random(1)
    for players in PLAYER_COUNTS:
        bound = ActionCodec(players).max_hand
        state = State.new(players, 3)
        while not state.is_over:
            if state.phase is Phase.ROTATION:
                for seat in state.pending_rotations():
                    state.choose_rotation(seat, False)
                continue
            scouts = state.legal_scouts()
            actions = scouts if state.current_seat == 0 and scouts else state.legal_actions()
            state.apply(rng.choice(actions))
            assert max(len(state.hand(s)) for s in range(players)) <= bound


def test_hand_rows_hold_face_and_other_value() -> None:
    layout = ObservationLayout(2)
    state = State.from_deals(2, State.new(2, 8).deals)
    hand = state.hand(0)
    rows = layout.view(layout.encode(state.observation(0)), "hand")
    for row, card in zip(rows, hand, strict=False):
        assert row[0] == 1 and row[card.face] == 1 and row[10 + card.other] == 1
        assert row.sum() == 3
    assert not rows[len(hand):].any()
    assert isinstance(hand, Hand) and isinstance(hand[0], Card)


@pytest.mark.filterwarnings("ignore:Observation space for each agent probably")
@pytest.mark.filterwarnings("ignore:Observation is not a NumPy array")
@pytest.mark.filterwarnings("ignore:.*Illegal move made")
def test_the_wrapped_env_passes_the_api_test_and_ends_on_an_illegal_action() -> None:
    from scout_arena.env.aec import env as make_env

    api_test(make_env(3), num_cycles=100)
    wrapped = make_env(3)
    wrapped.reset(seed=1)
    wrapped.step(5)  # a Show while seats are choosing their rotation
    assert all(wrapped.terminations.values())
    assert wrapped.rewards["seat_0"] == -1
