"""The referee's bytes on the wire, pinned across refactors by a digest of seeded matches.

The digest covers every DecisionRequest (the fast path: observation, legal lists, the round's
history spliced in as bytes) and every RoundEnded of 24 seeded random matches at 2-5 players.
It was computed on d284faf, the tree before the redesign that moved the engine into
`scout_rules` and the codecs into one per edge, and this tree gives the same bytes with the C
engine and with the pure-Python one; a change of the wire must change this test on purpose.
"""

from __future__ import annotations

import hashlib
import random

from scout_arena.server import convert
from scout_rules import State
from support.wire_history import requests_with_history

GOLDEN_REQUESTS = 5227
GOLDEN_SHA256 = "7532787205afa847ae8e0d5e4bda8250a8e571fc7bcc0cf2dd10b66d0904c74c"


def _coin(rng: random.Random, _seat: int) -> bool:
    return rng.random() < 0.5


def wire_digest() -> tuple[int, str]:
    digest = hashlib.sha256()
    requests = 0
    for players in (2, 3, 4, 5):
        for seed in range(6):
            rng = random.Random(seed)
            state = State.new(players, seed)
            for obs, history in requests_with_history(state, rng, _coin):
                digest.update(convert.decision_request_bytes(
                    obs, f"m-{seed}", requests, 1000, 10_000, history))
                requests += 1
            totals = [0] * players
            for log in state.round_logs:
                assert log.result is not None
                for seat, score in enumerate(log.result.scores):
                    totals[seat] += score
                digest.update(convert.round_ended(
                    f"m-{seed}", log.result, totals, log.dealt_hands, log.rotations
                ).SerializeToString(deterministic=True))
    return requests, digest.hexdigest()


def test_the_wire_bytes_of_seeded_matches_are_those_of_the_tree_before_the_redesign() -> None:
    assert wire_digest() == (GOLDEN_REQUESTS, GOLDEN_SHA256)
