"""The set-up of tests/test_fuzz_bot_messages.py (bots, tokens, time controls, bounds) and the
oracle's judgement of the decisions the referee sends, with a few wire-format helpers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

import pytest
from google.protobuf.message import DecodeError
from grpc_health.v1 import health_pb2
from hypothesis import HealthCheck, Phase, settings
from scout.v1 import arena_pb2, game_pb2, matches_pb2

from support import oracle
from support.rawbot import (
    ACCEPTED,
    ILLEGAL,
    MALFORMED,
)

pytestmark = pytest.mark.timeout(300)


T = TypeVar("T")


HONEST = ("h1", "h2", "h3", "h4")


FUZZ = "fz"  # the stateful fuzzing bot


SHAKER = "fzh"  # fresh calls: first messages and tokens


SILENT = "fzs"  # one call that never sends anything


TOKENS = {
    **{name: f"tok-{name}" for name in HONEST},
    FUZZ: "tok-fz",
    SHAKER: "tok-fzh",
    SILENT: "tok-fzs",
}


HONEST_TABLES = (("h1", "h2"), ("h1", "h2", "h3"))


FUZZ_OPPONENTS = (("h4",), ("h4", "h3"))


FUZZ_DECISION_MS = 600_000  # the most CreateMatch allows: a hostile example never times out


FUZZ_BANK_MS = 600_000


FUZZ_MAX_MATCHES = 3


FUZZ_RUNNING = 2  # matches the fuzzing bot is kept seated in


HONEST_DECISION_MS = 10_000  # generous: the machine is shared, honest bots answer at once


LIMIT = 64 * 1024  # §11.2: at most 64 KiB from a bot


HELLO_TIMEOUT_S = 10.0  # §3.3


REACTION_S = 15.0  # bound on waiting for any one reaction


EXAMPLE_S = 120.0  # backstop per example (every inner wait is bounded already)


BAD_MESSAGE = arena_pb2.ERROR_CODE_BAD_MESSAGE


EXPECTED_HELLO = arena_pb2.ERROR_CODE_EXPECTED_HELLO


UNSUPPORTED_PROTOCOL = arena_pb2.ERROR_CODE_UNSUPPORTED_PROTOCOL


END_LEFT, END_RIGHT = game_pb2.END_LEFT, game_pb2.END_RIGHT


FINISHED = matches_pb2.MATCH_STATUS_FINISHED


RUNNING = matches_pb2.MATCH_STATUS_RUNNING


SERVING = health_pb2.HealthCheckResponse.SERVING


FUZZ_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)


def status_name(status: int) -> str:
    known = status in arena_pb2.AnswerStatus.values()
    return (
        arena_pb2.AnswerStatus.Name(arena_pb2.AnswerStatus.ValueType(status))
        if known
        else str(status)
    )


def parse_bot_message(data: bytes) -> arena_pb2.BotMessage | None:
    try:
        return arena_pb2.BotMessage.FromString(data)
    except DecodeError:
        return None


WIRE_END = {oracle.L: END_LEFT, oracle.R: END_RIGHT}


ORACLE_END = {END_LEFT: oracle.L, END_RIGHT: oracle.R}


def active_pairs(obs: game_pb2.Observation) -> list[tuple[int, int]]:
    return [(c.face, c.other) for c in obs.active_set]


def expected_scouts(request: arena_pb2.DecisionRequest) -> list[tuple[int, bool, int]]:
    obs = request.observation
    if not oracle.may_scout(obs.num_players, obs.scout_chips[obs.seat], len(obs.active_set)):
        return []
    return [
        (WIRE_END[end], flip, at)
        for end, flip, at in oracle.scout_choices(len(obs.hand), len(obs.active_set))
    ]


def scout_and_shows(
    request: arena_pb2.DecisionRequest,
) -> Iterator[tuple[int, bool, int, int, int]]:
    """§6.3's enumeration: (end, flip, insert_at, start, length) of every legal Scout & Show."""
    obs = request.observation
    if not oracle.may_scout_and_show(
        obs.num_players, obs.scout_show_tokens[obs.seat], len(obs.active_set)
    ):
        return
    for end, flip, at, start, length in oracle.scout_and_show_choices(
        [c.face for c in obs.hand], active_pairs(obs)
    ):
        yield WIRE_END[end], flip, at, start, length


def wire_scout_and_show(end: int, flip: bool, at: int, start: int, length: int) -> game_pb2.Action:
    return game_pb2.Action(
        scout_and_show=game_pb2.ScoutAndShow(
            scout=game_pb2.Scout(end=end, flip=flip, insert_at=at),  # type: ignore[arg-type]
            show=game_pb2.Show(start=start, length=length),
        )
    )


def judge_action(
    request: arena_pb2.DecisionRequest, action: game_pb2.Action
) -> arena_pb2.AnswerStatus.ValueType:
    """The documented judgement (§4.2, §5, §8.1) of ``action`` against an open request."""
    obs = request.observation
    n = len(obs.hand)
    kind = action.WhichOneof("kind")
    if kind is None:
        return MALFORMED
    if kind == "show":
        show = action.show
        if show.length < 1 or show.start < 0 or show.start + show.length > n:
            return MALFORMED
        listed = {(s.start, s.length) for s in request.legal_shows}
        return ACCEPTED if (show.start, show.length) in listed else ILLEGAL
    if kind == "scout":
        scout = action.scout
        if scout.end not in (END_LEFT, END_RIGHT) or not 0 <= scout.insert_at <= n:
            return MALFORMED
        end = END_LEFT if len(obs.active_set) == 1 else scout.end  # §5.3: RIGHT names it too
        scouts = {(s.end, s.flip, s.insert_at) for s in request.legal_scouts}
        return ACCEPTED if (end, scout.flip, scout.insert_at) in scouts else ILLEGAL
    both = action.scout_and_show
    scout, show = both.scout, both.show  # a missing part reads as END_UNSPECIFIED / length 0
    if scout.end not in (END_LEFT, END_RIGHT) or not 0 <= scout.insert_at <= n:
        return MALFORMED
    if show.length < 1 or show.start < 0 or show.start + show.length > n + 1:
        return MALFORMED
    if not oracle.may_scout_and_show(
        obs.num_players, obs.scout_show_tokens[obs.seat], len(obs.active_set)
    ):
        return ILLEGAL
    new, rest = oracle.scouted(
        [c.face for c in obs.hand],
        active_pairs(obs),
        ORACLE_END[scout.end],
        scout.flip,
        scout.insert_at,
    )
    legal = oracle.beats(new[show.start : show.start + show.length], rest)
    return ACCEPTED if legal else ILLEGAL


def decision_problems(request: arena_pb2.DecisionRequest, seat: int) -> list[str]:
    """Where a DecisionRequest departs from §4.3 and §6.1."""
    obs = request.observation
    faces = [c.face for c in obs.hand]
    problems = []
    if obs.match_id != request.match_id or obs.seat != seat or obs.current_seat != seat:
        problems.append(
            f"ids/seat: match {obs.match_id!r} seat {obs.seat} current "
            f"{obs.current_seat}, expected seat {seat}"
        )
    shows = [(s.start, s.length) for s in request.legal_shows]
    want = oracle.groups_beating(faces, [c.face for c in obs.active_set])
    if shows != want:
        problems.append(
            f"legal_shows {shows} != documented {want} (hand {faces}, active "
            f"{[c.face for c in obs.active_set]})"
        )
    scouts = [(s.end, s.flip, s.insert_at) for s in request.legal_scouts]
    if scouts != expected_scouts(request):
        problems.append(
            f"legal_scouts {scouts[:6]}... ({len(scouts)}) != documented "
            f"({len(expected_scouts(request))})"
        )
    available = next(scout_and_shows(request), None) is not None
    if request.scout_and_show_available != available:
        problems.append(
            f"scout_and_show_available {request.scout_and_show_available} but "
            f"the documented enumeration says {available}"
        )
    if not shows and not scouts:
        problems.append("neither a legal Show nor a legal Scout (§6.1 promises one)")
    return problems


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tag(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def sized(size: int, build: Any) -> bytes:
    """``build(n)`` (a message with an n-character string) serialized to exactly ``size``
    bytes, or as close as varint widths allow."""
    n = max(0, size - 16)
    data = b""
    for _ in range(8):
        data = build(n)
        if len(data) == size:
            break
        n = max(0, n + size - len(data))
    return bytes(data)
