"""Golden move-generation counts at fixed points of fixed seeds, in the manner of chess perft.

Each match is dealt by `State.new(players, seed)`; every seat makes the same rotation choice and
the seat to act always plays the first action of `legal_actions()`. "Decision k" is the position
before the k-th action of the match (0-based, counted over all rounds). At each point we pin
(total, Shows, Scouts, Scout & Shows, round index, seat to act).

The goldens were produced by the engine and, before being written down, checked against two
independent enumerations that this file also re-runs: a rules oracle written from RULES.md, and
a brute force that offers `is_legal` every action a bot could name.
"""

from __future__ import annotations

import pytest
from scout_rules import End, Phase, State
from support.oracle import brute_force_legal as brute_force
from support.oracle import oracle_actions

L, R = End.LEFT, End.RIGHT
POINTS = (0, 5, 10, 20)

Counts = tuple[int, int, int, int, int, int]

# GOLDEN[(players, seed, rotate)][decision] = (total, shows, scouts, scout&shows, round, seat)
GOLDEN: dict[tuple[int, int, bool], dict[int, Counts]] = {
    (2, 1, False): {0: (14, 14, 0, 0, 0, 0), 5: (23, 3, 20, 0, 0, 0),
                    10: (19, 1, 18, 0, 0, 0), 20: (5, 5, 0, 0, 0, 0)},
    (2, 2, False): {0: (13, 13, 0, 0, 0, 0), 5: (20, 2, 18, 0, 0, 0),
                    10: (12, 0, 12, 0, 0, 0), 20: (13, 13, 0, 0, 1, 1)},
    (2, 3, False): {0: (15, 15, 0, 0, 0, 0), 5: (38, 2, 36, 0, 0, 1),
                    10: (20, 0, 20, 0, 0, 1), 20: (8, 0, 8, 0, 0, 0)},
    (3, 1, False): {0: (16, 16, 0, 0, 0, 0), 5: (364, 1, 48, 315, 0, 2),
                    10: (192, 4, 16, 172, 0, 1), 20: (64, 0, 10, 54, 0, 2)},
    (3, 2, False): {0: (14, 14, 0, 0, 0, 0), 5: (721, 4, 48, 669, 0, 2),
                    10: (228, 1, 32, 195, 0, 1), 20: (10, 10, 0, 0, 0, 2)},
    (3, 3, False): {0: (15, 15, 0, 0, 0, 0), 5: (216, 0, 48, 168, 0, 2),
                    10: (193, 3, 16, 174, 0, 1), 20: (355, 10, 22, 323, 0, 2)},
    (4, 1, False): {0: (14, 14, 0, 0, 0, 0), 5: (304, 2, 22, 280, 0, 1),
                    10: (108, 0, 32, 76, 0, 2), 20: (149, 2, 14, 133, 0, 0)},
    (4, 2, False): {0: (15, 15, 0, 0, 0, 0), 5: (292, 2, 22, 268, 0, 1),
                    10: (186, 0, 18, 168, 0, 2), 20: (129, 1, 14, 114, 0, 0)},
    (4, 3, False): {0: (13, 13, 0, 0, 0, 0), 5: (382, 5, 22, 355, 0, 1),
                    10: (232, 0, 44, 188, 0, 2), 20: (6, 6, 0, 0, 0, 0)},
    (5, 1, False): {0: (11, 11, 0, 0, 0, 0), 5: (232, 10, 18, 204, 0, 0),
                    10: (171, 3, 16, 152, 0, 0), 20: (137, 7, 14, 116, 0, 0)},
    (5, 2, False): {0: (11, 11, 0, 0, 0, 0), 5: (346, 1, 36, 309, 0, 0),
                    10: (124, 3, 14, 107, 0, 0), 20: (4, 4, 0, 0, 0, 0)},
    (5, 3, False): {0: (12, 12, 0, 0, 0, 0), 5: (332, 1, 36, 295, 0, 0),
                    10: (146, 3, 14, 129, 0, 0), 20: (30, 0, 12, 18, 0, 0)},
    # Every seat rotates its hand.
    (2, 1, True): {0: (13, 13, 0, 0, 0, 0), 5: (21, 3, 18, 0, 0, 0),
                   10: (14, 0, 14, 0, 0, 0), 20: (40, 0, 40, 0, 1, 1)},
    (3, 1, True): {0: (18, 18, 0, 0, 0, 0), 5: (102, 0, 44, 58, 0, 2),
                   10: (179, 0, 32, 147, 0, 1), 20: (333, 5, 24, 304, 0, 2)},
    (4, 1, True): {0: (12, 12, 0, 0, 0, 0), 5: (279, 0, 44, 235, 0, 1),
                   10: (352, 1, 36, 315, 0, 2), 20: (117, 1, 14, 102, 0, 0)},
    (5, 1, True): {0: (11, 11, 0, 0, 0, 0), 5: (227, 4, 18, 205, 0, 0),
                   10: (128, 0, 28, 100, 0, 0), 20: (253, 0, 36, 217, 0, 0)},
}

# PERFT[(players, seed, decision, depth)] = leaves. A node that is not a decision (the round or
# the match ended) is a leaf. With 2 players a Scout keeps the turn, so depth 3 stays in one turn.
PERFT = {
    (2, 1, 5, 3): 6100,
    (2, 3, 5, 2): 1012,
    (3, 1, 10, 2): 21601,
    (5, 3, 20, 2): 5046,
}


# ----- walking the fixed policy -------------------------------------------------------------


def position(players: int, seed: int, decision: int, rotate: bool = False) -> State:
    state = State.new(players, seed)
    done = 0
    while True:
        assert not state.is_over, "the match ended before the requested decision"
        if state.phase is Phase.ROTATION:
            for seat in state.pending_rotations():
                state.choose_rotation(seat, rotate)
            continue
        if done == decision:
            return state
        state.apply(state.legal_actions()[0])
        done += 1


def counts(state: State) -> Counts:
    assert state.current_seat is not None
    return (len(state.legal_actions()), len(state.legal_shows()), len(state.legal_scouts()),
            len(state.legal_scout_and_shows()), state.round_index, state.current_seat)


def perft(state: State, depth: int) -> int:
    if depth == 0 or state.phase is not Phase.PLAY:
        return 1
    total = 0
    for action in state.legal_actions():
        child = state.clone()
        child.apply(action)
        total += perft(child, depth - 1)
    return total


def oracle_perft(state: State, depth: int) -> int:
    if depth == 0 or state.phase is not Phase.PLAY:
        return 1
    total = 0
    for action in oracle_actions(state):
        child = state.clone()
        child.apply(action)
        total += oracle_perft(child, depth - 1)
    return total


# ----- tests --------------------------------------------------------------------------------


@pytest.mark.parametrize(("players", "seed", "rotate"), sorted(GOLDEN))
def test_golden_legal_action_counts_at_fixed_decisions(
    players: int, seed: int, rotate: bool
) -> None:
    got = {d: counts(position(players, seed, d, rotate)) for d in POINTS}
    assert got == GOLDEN[(players, seed, rotate)]


@pytest.mark.parametrize(("players", "seed", "rotate"), sorted(GOLDEN))
def test_golden_positions_agree_with_the_rules_oracle(
    players: int, seed: int, rotate: bool
) -> None:
    for d in POINTS:
        state = position(players, seed, d, rotate)
        listed = state.legal_actions()
        assert len(listed) == len(set(listed)) == GOLDEN[(players, seed, rotate)][d][0]
        assert set(listed) == oracle_actions(state)


@pytest.mark.parametrize(("players", "seed"), [(2, 1), (3, 1), (4, 2), (5, 3)])
def test_golden_positions_agree_with_brute_force_through_is_legal(players: int, seed: int) -> None:
    for d in POINTS:
        state = position(players, seed, d)
        assert brute_force(state) == set(state.legal_actions())


@pytest.mark.parametrize(("players", "seed", "decision", "depth"), sorted(PERFT))
def test_perft_leaf_counts(players: int, seed: int, decision: int, depth: int) -> None:
    state = position(players, seed, decision)
    before = (state.observation(state.current_seat or 0), state.cards_in_play())
    leaves = perft(state, depth)
    assert leaves == PERFT[(players, seed, decision, depth)]
    assert (state.observation(state.current_seat or 0), state.cards_in_play()) == before


def test_perft_agrees_with_the_oracle_at_every_inner_node() -> None:
    state = position(2, 1, 5)
    assert oracle_perft(state, 3) == PERFT[(2, 1, 5, 3)]
    state = position(5, 3, 20)
    assert oracle_perft(state, 2) == PERFT[(5, 3, 20, 2)]


def test_perft_depth_one_is_the_number_of_legal_actions() -> None:
    state = position(3, 1, 10)
    assert perft(state, 1) == GOLDEN[(3, 1, False)][10][0] == 192
    assert perft(state, 0) == 1
