"""The optional C move generators (`scout_rules._speedups`) against the pure-Python reference.

Every compiled function must return exactly what its Python twin returns, in the same order,
so a seeded match or search plays the same moves either way: the twins are compared on
generated hands and active sets and on the positions of played matches, and the perft goldens
and a seeded search are re-run in a process that uses the pure-Python engine only
(``SCOUT_RULES_PURE=1``).
"""

from __future__ import annotations

import functools
import os
import random
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scout_rules import (
    Action,
    Card,
    End,
    IllegalAction,
    MalformedAction,
    Observation,
    Phase,
    Scout,
    ScoutAndShow,
    Show,
    State,
    groups,
    moves,
)
from scout_rules._native import SPEEDUPS
from scout_rules.cards import (
    SplitMix64,
    _pure_faces_of,
    _pure_shuffled_deck,
    faces_of,
    shuffled_deck,
)
from support.states import snapshot

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("group_key", "legal_shows", "has_show", "legal_scout_and_shows", "has_scout_and_show")

faces_lists = st.lists(st.integers(min_value=1, max_value=10), max_size=30)
# Runs and sets are rare among random faces: hands built from short groups hold many.
grouped = st.lists(
    st.tuples(st.integers(1, 10), st.integers(1, 4), st.sampled_from((-1, 0, 1))),
    max_size=8,
).map(lambda parts: [min(10, max(1, f + step * k)) for f, size, step in parts
                     for k in range(size)][:40])
cards = st.builds(Card, st.integers(1, 10), st.integers(1, 10))
active_sets = st.one_of(
    st.lists(cards, max_size=6),
    grouped.map(lambda fs: [Card(f, 11 - f) for f in fs[:6]]),
)
beats = st.one_of(st.just(moves.NO_ACTIVE_SET), st.integers(min_value=0, max_value=40 << 5))


def compiled(name: str) -> Callable[..., Any]:
    assert SPEEDUPS is not None, "the C extension is not built (run make)"
    fn: Callable[..., Any] = getattr(SPEEDUPS, name)
    return fn


def same(name: str, *args: object) -> None:
    assert compiled(name)(*args) == moves.REFERENCE[name](*args), (name, args)


def test_the_compiled_generators_are_in_use_where_a_compiler_built_them() -> None:
    headers = Path(sysconfig.get_paths()["include"], "Python.h").exists()
    if shutil.which("cc") and headers and not os.environ.get("SCOUT_RULES_PURE"):
        assert moves.COMPILED, "a compiler is here but the C extension is not built: run make"
        assert SPEEDUPS is not None and moves.legal_shows is SPEEDUPS.legal_shows
    else:
        assert not moves.COMPILED and moves.legal_shows is moves.REFERENCE["legal_shows"]


@settings(max_examples=400, derandomize=True, deadline=None)
@given(st.one_of(faces_lists, grouped), beats)
def test_compiled_shows_equal_the_reference_on_any_hand(faces: list[int], beat: int) -> None:
    same("group_key", faces)
    same("legal_shows", faces, beat)
    same("legal_shows", tuple(faces), beat)
    same("has_show", faces, beat)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(st.one_of(faces_lists, grouped), active_sets)
def test_compiled_scout_and_shows_equal_the_reference(faces: list[int],
                                                      active: list[Card]) -> None:
    same("legal_scout_and_shows", faces, active)
    same("legal_scout_and_shows", tuple(faces), tuple(active))
    same("has_scout_and_show", faces, active)


@settings(max_examples=100, derandomize=True, deadline=None)
@given(st.lists(cards, max_size=30))
def test_compiled_faces_of_equal_the_reference(hand: list[Card]) -> None:
    assert faces_of(hand) == _pure_faces_of(hand) == tuple(c.face for c in hand)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(st.one_of(faces_lists, grouped), st.lists(cards, max_size=70))
def test_compiled_hand_potentials_equal_the_reference(faces: list[int],
                                                      hand: list[Card]) -> None:
    for args in ((faces,), (tuple(faces),)):
        assert (compiled("hand_potential")(*args)
                == groups.REFERENCE["hand_potential"](*args) == groups.hand_potential(*args))
    grouped_hand = [Card(f, 11 - f) for f in faces]
    for cards_held in (hand, grouped_hand, tuple(hand)):
        assert (compiled("more_playable_rotated")(cards_held)
                == groups.REFERENCE["more_playable_rotated"](cards_held))


def test_compiled_hand_potentials_refuse_what_is_not_a_hand() -> None:
    for bad in (None, [1, "2"], [1.5]):
        with pytest.raises(TypeError):
            compiled("hand_potential")(bad)
        with pytest.raises(TypeError):
            groups.REFERENCE["hand_potential"](bad)
    for bad_hand in (None, [Card(1, 2), 3], [("a", 1)]):
        with pytest.raises(TypeError):
            compiled("more_playable_rotated")(bad_hand)
        with pytest.raises((TypeError, AttributeError)):
            groups.REFERENCE["more_playable_rotated"](bad_hand)


def test_hands_too_long_for_the_c_tables_are_handed_to_the_reference() -> None:
    faces = [3, 4, 5] * 22
    active = [Card(2, 9), Card(3, 1)]
    for args in ((faces, 0), (faces, 3 << 5)):
        same("legal_shows", *args)
        same("has_show", *args)
    same("group_key", faces)
    same("legal_scout_and_shows", faces, active)
    same("has_scout_and_show", faces, active)


def test_compiled_generators_refuse_what_the_reference_refuses() -> None:
    for name, args in (("legal_shows", ([1, "x"], 0)), ("has_show", (None, 0)),
                       ("group_key", (5,))):
        errors = []
        for fn in (compiled(name), moves.REFERENCE[name]):
            try:
                fn(*args)
            except TypeError as error:
                errors.append(error)
        assert len(errors) == 2, name


@functools.cache
def positions(players: int, seed: int) -> Sequence[State]:
    """Every decision of a random match (clones), for the twins to be compared on."""
    rng = random.Random(seed)
    state = State.new(players, seed)
    out = []
    while not state.is_over:
        if state.phase is Phase.ROTATION:
            for seat in state.pending_rotations():
                state.choose_rotation(seat, rng.random() < 0.5)
            continue
        out.append(state.clone())
        state.apply(rng.choice(state.legal_actions()))
    return tuple(out)


def test_compiled_generators_equal_the_reference_at_every_decision_of_played_matches() -> None:
    for players in (2, 3, 4, 5):
        for seed in (1, 2):
            for state in positions(players, seed):
                seat = state.current_seat
                assert seat is not None
                faces, active = state.faces[seat], state.active
                same("legal_shows", faces, state.active_key)
                same("has_show", faces, state.active_key)
                same("legal_scout_and_shows", faces, active)
                same("has_scout_and_show", faces, active)
                same("group_key", state.active_faces)


def run_pure(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SCOUT_RULES_PURE="1")
    return subprocess.run([sys.executable, *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=600, check=False)


def test_the_perft_goldens_hold_for_the_pure_python_engine_too() -> None:
    out = run_pure("-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_perft.py")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    probe = run_pure("-c", "from scout_rules import moves; print(moves.COMPILED)")
    assert probe.stdout.strip() == "False", probe.stderr


SEARCH_SCRIPT = """
import random
from scout_rules import InformationSet, Phase, State
from scout_arena.search.mcts import search

for players, seed in ((3, 5), (4, 7), (5, 11)):
    rng = random.Random(seed)
    state = State.new(players, seed)
    for seat in range(players):
        state.choose_rotation(seat, False)
    for _ in range(6):
        state.apply(rng.choice(state.legal_actions()))
    seat = state.current_seat
    info = InformationSet.from_observation(state.observation(seat))
    result = search(info, random.Random(seed), iterations=60, deadline=None)
    print(players, result.action, [(str(a), v, round(m, 9)) for a, v, m in result.stats])
"""


def test_a_seeded_search_chooses_the_same_way_on_either_engine() -> None:
    pure = run_pure("-c", SEARCH_SCRIPT)
    assert pure.returncode == 0, pure.stderr
    here = subprocess.run([sys.executable, "-c", SEARCH_SCRIPT], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, check=True)
    assert here.stdout == pure.stdout
    assert len(here.stdout.splitlines()) == 3


def test_an_engine_built_observation_equals_one_built_field_by_field() -> None:
    for players in (2, 5):
        for state in positions(players, 3)[::7]:
            seat = state.current_seat
            assert seat is not None
            made = state.observation(seat)
            by_name = Observation(**{f.name: getattr(made, f.name) for f in fields(Observation)})
            assert made == by_name and type(made) is Observation
            assert made.hand == state.hand(seat) and made.history == tuple(state.history)
            assert made.legal_actions() == state.legal_actions()


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.integers(2, 5), st.integers(min_value=0, max_value=2**64 - 1))
def test_the_compiled_shuffle_deals_what_the_reference_deals(players: int, seed: int) -> None:
    ours, theirs = SplitMix64(seed), SplitMix64(seed)
    assert shuffled_deck(players, ours) == _pure_shuffled_deck(players, theirs)
    assert ours.getstate() == theirs.getstate()


ends = st.sampled_from([End.LEFT, End.RIGHT, 0, 1, 2, True, -1])
flips = st.sampled_from([True, False, 0, 1, None])
spots = st.one_of(st.integers(-2, 14), st.sampled_from([True, False, 1.0]))
shows = st.builds(Show, spots, spots)
scouts = st.builds(Scout, ends, flips, spots)
any_actions = st.one_of(shows, scouts, st.builds(ScoutAndShow, scouts, shows),
                        st.builds(ScoutAndShow, shows, scouts))


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.integers(2, 5), st.integers(0, 8), st.integers(0, 400),
       st.one_of(any_actions, st.integers(0, 10**6)))
def test_apply_accepts_exactly_what_check_accepts_and_plays_it_the_same_way(
        players: int, seed: int, at: int, action_or_pick: Action | int) -> None:
    played = positions(players, seed)
    state = played[at % len(played)]
    if isinstance(action_or_pick, int):
        legal = state.legal_actions()
        action_or_pick = legal[action_or_pick % len(legal)]
    action = action_or_pick
    checked, fast = state.clone(), state.clone()
    try:
        checked.check(action)
    except (IllegalAction, MalformedAction) as error:
        refused: type[Exception] | None = type(error)
    else:
        refused = None
    assert not (refused and fast._plainly_legal(action))
    if refused is None:
        checked.apply(action)  # the action check just accepted: not checked again
        fast.apply(action)  # checked by the fast path, or by check when it does not know
        assert snapshot(fast) == snapshot(checked)
    else:
        before = snapshot(fast)
        with pytest.raises(refused):
            fast.apply(action)
        assert snapshot(fast) == before
