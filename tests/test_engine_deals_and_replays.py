"""Property tests over seeded random matches with 2-5 players (played by
tests/support/random_matches.py): seed determinism (in a fresh process too) and records that
replay to the same result."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import scout_arena
from hypothesis import assume, given, settings
from scout_rules import (
    State,
    deal_match,
)
from support.random_matches import players, seeds

_DEAL_SCRIPT = """
import sys
from scout_rules import deal_match
for n in (2, 3, 4, 5):
    for seed in map(int, sys.argv[1:]):
        print(n, seed, [[[tuple(c) for c in h] for h in r] for r in deal_match(n, seed)])
"""


def test_the_same_seed_deals_the_same_cards_in_a_fresh_process() -> None:
    chosen = [0, 1, 42, 2**63 + 5, 2**64 - 1]
    package_root = str(Path(scout_arena.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env["PYTHONHASHSEED"] = "12345"  # a different hash seed must not matter
    out = subprocess.run(
        [sys.executable, "-c", _DEAL_SCRIPT, *map(str, chosen)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        timeout=60,
    ).stdout.splitlines()
    expected = [
        f"{n} {seed} {[[[tuple(c) for c in h] for h in r] for r in deal_match(n, seed)]}"
        for n in (2, 3, 4, 5)
        for seed in chosen
    ]
    assert out == expected
    for n in (2, 3, 4, 5):
        assert State.new(n, 42).deals == State.new(n, 42).deals


def test_different_seeds_give_different_deals() -> None:
    for n in (2, 3, 4, 5):
        deals = {tuple(tuple(h) for h in deal_match(n, seed)[0]) for seed in range(200)}
        assert len(deals) == 200


@settings(max_examples=50, derandomize=True, deadline=None)
@given(players, seeds, seeds)
def test_two_distinct_seeds_deal_differently(n: int, a: int, b: int) -> None:
    assume(a != b)
    assert deal_match(n, a) != deal_match(n, b)
    assert deal_match(n, a) == deal_match(n, a)


def test_a_record_of_a_match_stopped_during_the_rotation_choice_replays() -> None:
    import pytest
    from scout_arena.record import RecordError, build_record, record_to_json, replay

    state = State.new(3, 5)
    state.choose_rotation(0, True)
    record = record_to_json(build_record(state, ["a", "b", "c"]))
    assert record["rounds"][0]["rotations"] == [True, None, None]
    assert replay(record).state.round_index == 0
    record["rounds"][0]["actions"] = [{"seat": 0, "show": {"start": 0, "length": 1}}]
    with pytest.raises(RecordError, match="rotations must be 3 booleans"):
        replay(record)
