"""Property tests over seeded random matches with 2-5 players (played by
tests/support/random_matches.py): conservation of cards, round end, score identities, move
generation against a brute-force enumeration and an independent rules oracle, and observation
privacy."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from hypothesis import given
from scout_rules import (
    Action,
    Card,
    Hand,
    Observation,
    Phase,
    RoundEnd,
    Scout,
    Show,
    State,
    deal_match,
    player_count_rules,
)
from support.oracle import brute_force_legal, oracle_actions, oracle_shows
from support.random_matches import (
    MAX_ACTIONS_PER_ROUND,
    MAX_ACTIONS_PER_TWO_PLAYER_ROUND,
    PROPERTY,
    L,
    cards_in,
    choose_scouting,
    conservation,
    pairs_of,
    play,
    players,
    policy_seeds,
    seeds,
)
from support.states import snapshot


@PROPERTY
@given(players, seeds, policy_seeds)
def test_cards_are_conserved_after_every_action(n: int, seed: int, policy_seed: int) -> None:
    state = State.new(n, seed)
    conservation(state, seed)

    def check(before: State, after: State, action: Action) -> None:
        conservation(after, seed)

    final = play(n, seed, policy_seed, after_action=check)
    conservation(final, seed)


@PROPERTY
@given(players, seeds, policy_seeds)
def test_every_round_ends_and_the_match_has_one_result_per_round(
    n: int, seed: int, policy_seed: int
) -> None:
    state = play(n, seed, policy_seed)
    assert state.is_over and state.phase is Phase.MATCH_OVER
    assert len(state.round_results) == player_count_rules(n).rounds
    assert [r.round_index for r in state.round_results] == list(range(n))
    for log in state.round_logs:
        assert log.result is not None
        cap = MAX_ACTIONS_PER_TWO_PLAYER_ROUND if n == 2 else MAX_ACTIONS_PER_ROUND
        assert 1 <= len(log.actions) <= cap
        if log.result.end_reason is RoundEnd.ACTION_LIMIT:
            assert n > 2 and len(log.actions) == State.max_round_actions
        assert all(r is not None for r in log.rotations)


class Shadow:
    """Bookkeeping of one round kept from the actions alone (captures, chips, hand sizes, the
    active set, the Scout & Show tokens), to hold the engine's counters and results against."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.rules = player_count_rules(n)
        self.totals = [0] * n
        self.new_round()

    def new_round(self) -> None:
        n = self.n
        self.captured = [0] * n
        self.chips = [3 if n == 2 else 0] * n
        self.hands = [self.rules.hand_size] * n
        self.tokens = [n > 2] * n
        self.active: list[Card] = []
        self.owner: int | None = None
        self.scouts = 0
        self.plain_scouts_since_show = 0
        self.actions = 0

    def step(self, before: State, after: State, action: Action) -> None:
        seat = before.current_seat
        assert seat is not None
        hand = list(before.hand(seat))
        self.actions += 1
        if isinstance(action, Show):
            self.captured[seat] += len(self.active)
            self.hands[seat] -= action.length
            self.active = hand[action.start : action.start + action.length]
            self.owner = seat
            self.plain_scouts_since_show = 0
        elif isinstance(action, Scout):
            self.scouts += 1
            self.plain_scouts_since_show += 1
            if self.n == 2:
                self.chips[seat] -= 1
            else:
                assert self.owner is not None
                self.chips[self.owner] += 1
            self.hands[seat] += 1
            self.active = self.active[1:] if action.end == L else self.active[:-1]
        else:
            assert self.tokens[seat] and self.owner is not None
            self.tokens[seat] = False
            self.scouts += 1
            self.chips[self.owner] += 1
            card = self.active[0] if action.scout.end == L else self.active[-1]
            card = card.flipped() if action.scout.flip else card
            rest = self.active[1:] if action.scout.end == L else self.active[:-1]
            self.captured[seat] += len(rest)
            hand.insert(action.scout.insert_at, card)
            self.hands[seat] += 1 - action.show.length
            self.active = hand[action.show.start : action.show.start + action.show.length]
            self.owner = seat
            self.plain_scouts_since_show = 0
        if len(after.round_results) == len(before.round_results):
            self.check_round_goes_on(after, seat, action)
        else:
            self.check_round_end(after, seat, action)
            self.new_round()

    def check_round_goes_on(self, after: State, seat: int, action: Action) -> None:
        assert after.scout_chips == self.chips
        assert [len(c) for c in after.captured] == self.captured
        assert [len(after.hand(s)) for s in range(self.n)] == self.hands
        assert list(after.active_set) == self.active
        assert after.scout_show_tokens == self.tokens
        assert after.active_owner == (self.owner if self.active else None)
        # None of the round-end conditions holds.
        assert all(self.hands)
        assert self.actions < State.max_round_actions
        if self.n == 2:
            nxt = seat if isinstance(action, Scout) else 1 - seat
            assert after.current_seat == nxt
            assert not self.no_move([after.hand(s) for s in range(2)], nxt)
        else:
            assert self.plain_scouts_since_show < self.n - 1
            assert after.current_seat == (seat + 1) % self.n

    def no_move(self, hands: Sequence[Hand], seat: int) -> bool:
        if not self.active:
            return False
        table = [c.face for c in self.active]
        return self.chips[seat] == 0 and not oracle_shows([c.face for c in hands[seat]], table)

    def check_round_end(self, after: State, seat: int, action: Action) -> None:
        n = self.n
        result = after.round_results[-1]
        assert result.captured == tuple(self.captured)
        assert result.scout_chips == tuple(self.chips)
        assert tuple(len(h) for h in result.hands) == tuple(self.hands)
        if not all(self.hands):
            assert result.end_reason is RoundEnd.HAND_EMPTIED
            assert not isinstance(action, Scout) and self.hands[seat] == 0
            assert result.exempt_seat is None
        elif n > 2 and isinstance(action, Scout) and self.plain_scouts_since_show == n - 1:
            # After P's Show every other player plain-Scouted: P is exempt.
            assert result.end_reason is RoundEnd.UNBEATEN_SHOW
            assert result.exempt_seat == self.owner
        elif n == 2 and self.no_move(result.hands, 1 - seat if isinstance(action, Show) else seat):
            # The player to act can neither beat the active set nor Scout.
            assert result.end_reason is RoundEnd.NO_LEGAL_MOVE
            assert result.exempt_seat == self.owner
        else:
            # Decision of the engine: a round that reaches the action limit is scored as it
            # stands, with no exempt seat.
            assert result.end_reason is RoundEnd.ACTION_LIMIT
            assert self.actions == State.max_round_actions
            assert result.exempt_seat is None
        for s in range(n):
            penalty = 0 if s == result.exempt_seat else self.hands[s]
            assert result.scores[s] == self.captured[s] + self.chips[s] - penalty
        # Every card of the round is in a hand, captured, or in the (unscored) active set.
        cards = self.rules.hand_size * n
        assert sum(result.captured) + sum(self.hands) + len(self.active) == cards
        if n == 2:
            assert sum(result.scout_chips) == 2 * 3 - self.scouts
        else:
            assert sum(result.scout_chips) == self.scouts
        # Hence the round's total: all captures and chips, less every hand but the exempt one.
        exempt_hand = 0 if result.exempt_seat is None else self.hands[result.exempt_seat]
        assert sum(result.scores) == (
            sum(result.captured) + sum(result.scout_chips) - sum(self.hands) + exempt_hand
        )
        for s in range(n):
            self.totals[s] += result.scores[s]
        assert after.scores == self.totals


@PROPERTY
@given(players, seeds, policy_seeds)
def test_round_and_match_score_identities(n: int, seed: int, policy_seed: int) -> None:
    """Captures, chips and hand sizes kept from the actions alone agree with every round result
    and the score formula; the match score is the sum of the round scores."""
    shadow = Shadow(n)
    final = play(n, seed, policy_seed, after_action=shadow.step)
    assert final.scores == shadow.totals
    assert final.scores == [sum(r.scores[s] for r in final.round_results) for s in range(n)]


@PROPERTY
@given(players, seeds, policy_seeds)
def test_rounds_end_exactly_when_a_round_end_condition_holds(
    n: int, seed: int, policy_seed: int
) -> None:
    """The shadow checks both ways: no round ends early and none goes on past its end. A policy
    that mostly Scouts reaches the unbeaten-Show and out-of-chips ends often."""
    shadow = Shadow(n)
    final = play(n, seed, policy_seed, after_action=shadow.step, policy=choose_scouting)
    reasons = {r.end_reason for r in final.round_results}
    assert reasons <= (
        {RoundEnd.HAND_EMPTIED, RoundEnd.NO_LEGAL_MOVE}
        if n == 2
        else {RoundEnd.HAND_EMPTIED, RoundEnd.UNBEATEN_SHOW, RoundEnd.ACTION_LIMIT}
    )


@PROPERTY
@given(players, seeds, policy_seeds)
def test_every_listed_legal_action_passes_check_and_apply_on_a_clone(
    n: int, seed: int, policy_seed: int
) -> None:
    def check(state: State, decision: int) -> None:
        if decision % 9:
            return
        before = snapshot(state)
        for action in state.legal_actions():
            state.check(action)
            assert state.is_legal(action)
            trial = state.clone()
            trial.apply(action)
            assert snapshot(state) == before

    play(n, seed, policy_seed, at_decision=check)


@PROPERTY
@given(players, seeds, policy_seeds)
def test_legal_actions_equal_a_brute_force_enumeration_and_the_rules_oracle(
    n: int, seed: int, policy_seed: int
) -> None:
    def check(state: State, decision: int) -> None:
        if decision % 11:
            return
        listed = state.legal_actions()
        assert len(listed) == len(set(listed))
        assert listed == [
            *state.legal_shows(),
            *state.legal_scouts(),
            *state.legal_scout_and_shows(),
        ]
        assert state.can_scout_and_show() == bool(state.legal_scout_and_shows())
        expected = oracle_actions(state)
        assert set(listed) == expected
        # The Scout & Show enumeration is the costly part: brute-force it at every other check.
        full = decision % 22 == 0
        found = brute_force_legal(state, with_scout_and_show=full)
        if not full:
            found |= set(state.legal_scout_and_shows())
        assert found == expected

    play(n, seed, policy_seed, at_decision=check)


@PROPERTY
@given(players, seeds, policy_seeds)
def test_observation_never_shows_an_unseen_card_of_another_hand(
    n: int, seed: int, policy_seed: int
) -> None:
    seen: set[tuple[int, int]] = set()  # every card that has been face up this round
    round_of_seen = [0]

    def check(state: State, decision: int) -> None:
        if state.round_index != round_of_seen[0]:
            seen.clear()
            round_of_seen[0] = state.round_index
        seen.update(pairs_of(state.active_set))
        dealt = state.round_logs[-1].dealt_hands
        secret = {
            s: ({c.pair for c in state.hand(s)} & {c.pair for c in dealt[s]}) - seen
            for s in range(n)
        }
        for viewer in range(n):
            visible = {c.pair for c in cards_in(state.observation(viewer))}
            for other in range(n):
                if other != viewer:
                    assert not visible & secret[other], (viewer, other)
            assert {c.pair for c in state.hand(viewer)} <= visible

    def after(before: State, state: State, action: Action) -> None:
        seen.update(pairs_of(state.active_set))

    play(n, seed, policy_seed, at_decision=check, after_action=after)


def test_observation_has_no_field_for_another_seats_hand() -> None:
    # The exact field list is pinned on purpose: a new field must be reviewed for privacy.
    names = {f.name for f in dataclasses.fields(Observation)}
    assert names == {
        "seat",
        "num_players",
        "num_rounds",
        "round_index",
        "starting_seat",
        "phase",
        "hand",
        "rotation_chosen",
        "hand_sizes",
        "active_set",
        "active_owner",
        "captured_counts",
        "scout_chips",
        "scout_show_tokens",
        "scores",
        "current_seat",
        "history",
    }
    hints = {f.name: str(f.type) for f in dataclasses.fields(Observation)}
    assert [name for name, t in hints.items() if "Hand" in t] == ["hand"]
    state = State.new(4, 77)
    for seat in range(4):
        state.choose_rotation(seat, seat % 2 == 0)
    for seat in range(4):
        obs = state.observation(seat)
        assert obs.hand == state.hand(seat)
        values = [getattr(obs, name) for name in names]
        for other in range(4):
            if other != seat:
                assert state.hand(other) not in values
                assert all(not isinstance(v, Hand) or v != state.hand(other) for v in values)


@PROPERTY
@given(players, seeds, policy_seeds)
def test_observation_legal_actions_equal_the_states(n: int, seed: int, policy_seed: int) -> None:
    def check(state: State, decision: int) -> None:
        seat = state.current_seat
        assert seat is not None
        for viewer in range(n):
            obs = state.observation(viewer)
            if viewer == seat:
                assert obs.is_my_turn
                assert obs.legal_actions() == state.legal_actions()
                assert obs.can_scout_and_show() == state.can_scout_and_show()
                assert obs.shows_and_scout_and_show() == (
                    state.legal_shows(),
                    state.can_scout_and_show(),
                )
            else:
                assert not obs.is_my_turn
                assert obs.legal_actions() == []

    play(n, seed, policy_seed, at_decision=check)


@PROPERTY
@given(players, seeds, policy_seeds)
def test_a_recorded_match_replays_to_the_same_result(n: int, seed: int, policy_seed: int) -> None:
    state = play(n, seed, policy_seed)
    replay = State.from_deals(n, deal_match(n, seed))
    assert replay.deals == state.deals
    for log in state.round_logs:
        for seat, rotate in enumerate(log.rotations):
            assert rotate is not None
            replay.choose_rotation(seat, rotate)
        for seat, action in log.actions:
            assert replay.current_seat == seat
            replay.apply(action)
    assert replay.is_over
    assert replay.round_results == state.round_results
    assert replay.scores == state.scores
