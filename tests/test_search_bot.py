"""The search bot (`scout_arena.search`): determinizations, legality, time budget, the CLI.

Strength against greedy is measured by bench/strength.py, not here: on the 16 two-player
matches at 20 iterations that would fit the test budget the bot's mean margin was +3.0 points
with a standard error of 2.7, nowhere near a result a test could rely on.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from referee_support import (
    create_match,
    fetch_record,
    running_referee,
    start_bot,
    wait_connected,
    wait_finished,
)
from scout_arena.local import BUNDLED_BOTS, play_match
from scout_arena.search import Reads, SearchBot, time_budget_ms
from scout_arena.server import convert as wire
from scout_client import GreedyBot, Observation
from scout_client import convert as sdk_wire
from scout_rules import Action, Phase, State, deck_for, hand_potential
from scout_rules.playout import greedy_action


def sdk_observation(state: State, deadline_ms: int = 1000, match_id: str = "m") -> Observation:
    """The acting seat's observation exactly as a networked bot receives it."""
    seat = state.current_seat
    assert seat is not None
    message = wire.decision_request(state.observation(seat), match_id, 1, deadline_ms, 10_000)
    return sdk_wire.decision_request_from_proto(message.decision_request)


def mid_round(num_players: int, seed: int, steps: int, policy_seed: int,
              greedy_share: float = 0.6) -> State:
    """A position some way into a round, reached by a mix of greedy and random play."""
    rng = random.Random(policy_seed)
    state = State.new(num_players, seed)
    for _ in range(steps):
        if state.phase is Phase.ROTATION:
            for s in range(num_players):
                state.choose_rotation(s, rng.random() < 0.5)
            continue
        if state.is_over:
            break
        legal = state.legal_actions()
        action = greedy_action(state) if rng.random() < greedy_share else rng.choice(legal)
        state.apply(action)
    if state.phase is Phase.ROTATION:
        for s in range(num_players):
            state.choose_rotation(s, False)
    return state


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 5), st.integers(0, 2**64 - 1), st.integers(0, 120), st.integers(0, 99),
       st.integers(0, 99))
def test_determinizations_are_consistent_with_the_observation(
        num_players: int, seed: int, steps: int, policy_seed: int, sample_seed: int) -> None:
    state = mid_round(num_players, seed, steps, policy_seed)
    if state.is_over:
        return
    observation = sdk_observation(state)
    seat = observation.seat
    info = observation.information_set()
    reads = Reads.of(info)
    true_hands = [state.hand(s) for s in range(num_players)]
    out_of_play = [c.pair for c in state.active] + [c.pair for cs in state.captured for c in cs]
    # the public knowledge itself is right: every known card is where the true hand has it
    for s, slots in enumerate(info.known):
        for i, slot in enumerate(slots):
            if slot is not None:
                assert s != seat and true_hands[s][i].pair == slot.pair
    known_pairs = {slot.pair for h in info.known for slot in h if slot is not None}
    rng = random.Random(sample_seed)
    for tries in (1, 1, 6):
        hands = info.deal(rng, tries=tries, misfits=reads.misfits)
        assert [len(h) for h in hands] == list(observation.hand_sizes)
        assert tuple(hands[seat]) == true_hands[seat]
        for s in range(num_players):
            for i, slot in enumerate(info.known[s]):
                if slot is not None and s != seat:
                    assert hands[s][i].pair == slot.pair  # known cards stay in place
        mine = {c.pair for c in true_hands[seat]}
        for s in range(num_players):
            if s == seat:
                continue
            for card in hands[s]:
                assert card.pair not in mine and card.pair not in out_of_play
                assert card.pair in known_pairs or card.pair in info.unseen
        everything = Counter(c.pair for h in hands for c in h) + Counter(out_of_play)
        undealt = Counter(p for p in info.unseen if p not in everything)
        assert everything + undealt == Counter(deck_for(num_players))
        if num_players > 2:  # every card is dealt: nothing is left over
            assert not undealt
        # and the engine state built from it shows the seat exactly what it saw
        built = info.state(hands).observation(seat)
        real = state.observation(seat)
        for name in ("hand", "hand_sizes", "active_set", "active_owner", "captured_counts",
                     "scout_chips", "scout_show_tokens", "scores", "current_seat"):
            assert getattr(built, name) == getattr(real, name), name
        assert built.legal_actions() == real.legal_actions()


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 5), st.integers(0, 2**64 - 1), st.integers(0, 120))
def test_true_hands_never_contradict_the_scouts_of_greedy_players(
        num_players: int, seed: int, steps: int) -> None:
    state = mid_round(num_players, seed, steps, policy_seed=0, greedy_share=1.0)
    if state.is_over:
        return
    reads = Reads.of(sdk_observation(state).information_set())
    true_hands = [state.hand(s) for s in range(num_players)]
    assert reads.violations(true_hands) == 0



@settings(max_examples=40, deadline=None)
@given(st.integers(2, 5), st.integers(0, 2**64 - 1), st.integers(0, 60), st.integers(0, 99))
def test_an_opponent_reads_as_misrotated_exactly_when_its_dealt_hand_was_better_the_other_way(
        num_players: int, seed: int, steps: int, policy_seed: int) -> None:
    rng = random.Random(policy_seed)
    state = State.new(num_players, seed)
    for s in range(num_players):
        state.choose_rotation(s, rng.random() < 0.5)
    held = [state.hand(s) for s in range(num_players)]
    for _ in range(steps):
        action = greedy_action(state) if rng.random() < 0.6 else rng.choice(state.legal_actions())
        state.apply(action)
        if state.round_index != 0 or state.phase is not Phase.PLAY:
            return
    seat = state.current_seat
    assert seat is not None
    reads = Reads.of(sdk_observation(state).information_set())
    worse = sum(hand_potential([c.other for c in reversed(held[s])])
                > hand_potential([c.face for c in held[s]])
                for s in range(num_players) if s != seat)
    assert reads.misrotations([state.hand(s) for s in range(num_players)]) == worse


def legal_only(bot: SearchBot) -> Callable[[State, int, Action], None]:
    def check(state: State, seat: int, action: Action) -> None:
        assert state.is_legal(action), f"seat {seat} played an illegal {action}"
    return check


def test_bot_returns_only_legal_actions_in_full_matches_of_two_to_five_players() -> None:
    for num_players in (2, 3, 4, 5):
        bot = SearchBot(seed=num_players, iterations=6)
        bots = [bot, *[GreedyBot() for _ in range(num_players - 1)]]
        state = play_match(bots, seed=100 + num_players, on_action=legal_only(bot))
        assert state.is_over
        assert bot.fallbacks == 0  # never an inconsistent history, never an illegal choice
        assert bot.last_stats.used_search


def test_bot_is_deterministic_with_a_seed_in_iteration_mode() -> None:
    def scores() -> list[int]:
        state = play_match([SearchBot(seed=3, iterations=5), GreedyBot(), GreedyBot()], seed=9)
        return state.scores

    assert scores() == scores()


def test_time_budget_is_think_ms_capped_by_the_deadline_less_the_margin() -> None:
    assert time_budget_ms(200, 1000, 150) == 200
    assert time_budget_ms(1000, 400, 150) == 250
    assert time_budget_ms(200, 100, 150) == 0
    assert time_budget_ms(200, 0, 150) == 200  # no deadline: think_ms alone
    assert time_budget_ms(None, 0, 150) is None  # iteration mode, no deadline: no clock
    assert time_budget_ms(None, 1000, 150) == 850  # iteration mode: the deadline still caps


class StepClock:
    """A clock that advances a fixed step each time it is read: iterations by count."""

    def __init__(self, step_s: float) -> None:
        self.now = 0.0
        self.step = step_s

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_tiny_deadline_gets_an_answer_with_fewer_iterations() -> None:
    state = mid_round(4, 12345, 20, 1)
    # 5 ms a clock read: 200 ms of think_ms is 40 iterations, so min_iterations (100) decides
    roomy = SearchBot(seed=1, think_ms=200, clock=StepClock(0.005))
    roomy.act(sdk_observation(state, deadline_ms=1000))
    tight = SearchBot(seed=1, think_ms=200, clock=StepClock(0.005))
    tight.act(sdk_observation(state, deadline_ms=250))  # 250 - 150 ms margin: 100 ms
    assert roomy.last_stats.budget_ms == 200 and tight.last_stats.budget_ms == 100
    assert roomy.last_stats.iterations == roomy.min_iterations == 100
    assert 0 < tight.last_stats.iterations <= 20
    hopeless = SearchBot(seed=1, iterations=1000)
    observation = sdk_observation(state, deadline_ms=100)
    answer = hopeless.act(observation)  # no time at all: the rollout policy answers at once
    assert hopeless.last_stats.iterations == 0 and not hopeless.last_stats.used_search
    assert observation.is_legal(answer)


def test_min_iterations_never_run_past_the_deadline_less_the_margin() -> None:
    state = mid_round(3, 777, 10, 2)
    slow = SearchBot(seed=1, think_ms=200, clock=StepClock(0.05))  # 50 ms a clock read
    slow.act(sdk_observation(state, deadline_ms=1000))
    assert 0 < slow.last_stats.iterations <= 850 // 50


def test_search_is_a_bundled_bot() -> None:
    assert isinstance(BUNDLED_BOTS["search"](0), SearchBot)


def test_bot_run_search_plays_a_match_on_a_real_referee(tmp_path: Path) -> None:
    tokens = {"searcher": "token-searcher", "greedy": "token-greedy"}
    with running_referee(tmp_path, tokens) as referee:
        start_bot(referee, "search", tokens["searcher"], "--think-ms", "20")
        start_bot(referee, "greedy", tokens["greedy"])
        wait_connected(referee, list(tokens))
        channel, stub = referee.matches_stub()
        with channel:
            info = create_match(stub, ["searcher", "greedy"], seed=77, decision_ms=1000,
                                time_bank_ms=10_000)
            wait_finished(stub, info.match_id, timeout=60)
            record = fetch_record(stub, info.match_id)
    assert record["finished"] is True
    assert record["notes"] == [] and record["forfeits"] == []  # no strike, timeout or fallback


def test_the_tree_is_narrower_below_the_root_at_two_and_three_players_unless_a_width_is_given(
        ) -> None:
    from scout_arena.search.mcts import Width

    bot = SearchBot(iterations=10)
    narrow = Width(root_scouts=3, root_combos=6, scouts=1, combos=4)
    assert [bot.width(n) for n in (2, 3, 4, 5)] == [narrow, narrow, Width(), Width()]
    wide = SearchBot(iterations=10, scouts=3, root_combos=2)
    given = Width(root_scouts=3, root_combos=2, scouts=3, combos=4)
    assert [wide.width(n) for n in (2, 3, 4, 5)] == [given] * 4



def test_below_an_opponents_show_the_tree_branches_on_the_faces_it_showed() -> None:
    """The same hand positions hold different cards in different determinizations, so the
    searching seat's next decision hangs below what it would see, not below the positions."""
    from scout_arena.search.mcts import TreeNode, search
    from scout_rules import Show

    state = State.new(2, 11)
    for s in range(2):
        state.choose_rotation(s, False)
    info = sdk_observation(state).information_set()
    observed = search(info, random.Random(3), iterations=1500, deadline=None, observe=True)
    assert observed is not None
    assert all(child.seen is None for child in observed.root.children.values())  # our own
    branching = 0
    nodes: list[TreeNode] = [observed.root]
    while nodes:
        node = nodes.pop()
        for action, child in node.children.items():
            if child.seen is None:
                nodes.append(child)
                continue
            assert isinstance(action, Show)
            assert all(len(faces) == action.length for faces in child.seen)
            branching += len(child.seen) > 1
            nodes += child.seen.values()
    assert branching > 0
    plain = search(info, random.Random(3), iterations=1500, deadline=None, observe=False)
    assert plain is not None
    nodes = [plain.root]
    while nodes:
        node = nodes.pop()
        assert node.seen is None
        nodes += node.children.values()
