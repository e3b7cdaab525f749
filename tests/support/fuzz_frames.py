"""The hypothesis strategies for the frames the fuzzing bot of tests/test_fuzz_bot_messages.py
sends: random wire data, mutations of valid messages, hostile field values, first messages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from hypothesis import strategies as st
from scout.v1 import arena_pb2, game_pb2

from support.fuzz_book import SeatView
from support.fuzz_bot import FuzzBot
from support.fuzz_live import Live
from support.fuzz_oracle import (
    LIMIT,
    scout_and_shows,
    sized,
    tag,
    varint,
    wire_scout_and_show,
)
from support.rawbot import (
    action_choice,
    rotation_choice,
)


def weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of the strategies, each as often as its weight (``st.one_of`` would pick its
    branches evenly, and it merges repeated ones)."""
    slots = [index for index, (weight, _) in enumerate(choices) for _ in range(weight)]
    return st.sampled_from(slots).flatmap(lambda index: choices[index][1])


def _field_value(wire_type: int, nested: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    if wire_type == 0:
        return st.one_of(st.integers(0, 300), st.integers(0, 2**64 - 1)).map(varint)
    if wire_type == 1:
        return st.binary(min_size=8, max_size=8)
    if wire_type == 5:
        return st.binary(min_size=4, max_size=4)
    if wire_type == 2:
        payload = st.one_of(
            st.binary(max_size=40), nested, st.text(max_size=20).map(lambda s: s.encode())
        )
        return payload.map(lambda p: varint(len(p)) + p)
    return st.binary(max_size=6)  # groups (3, 4) and the undefined 6, 7: anything


def wire_soup(depth: int = 2) -> st.SearchStrategy[bytes]:
    """Random but mostly well-formed protobuf wire data: fields of BotMessage's numbers (and
    others), every wire type, nested messages."""
    nested = wire_soup(depth - 1) if depth > 0 else st.just(b"")
    number = st.one_of(st.integers(1, 6), st.integers(1, 2**29 - 1))
    one_field = st.tuples(number, st.sampled_from([0, 1, 2, 5, 2, 2, 3, 4, 6, 7])).flatmap(
        lambda nw: _field_value(nw[1], nested).map(lambda v: tag(nw[0], nw[1]) + v)
    )
    return st.lists(one_field, max_size=5).map(b"".join)


FRAMES = st.one_of(
    st.binary(max_size=512), wire_soup(), st.just(b""), st.binary(min_size=1, max_size=8)
)


INT32 = st.one_of(
    st.integers(-3, 16), st.sampled_from([-(2**31), -(2**31) + 1, -1, 2**31 - 1, 2**31 - 2, 1000])
)


POSITION = weighted(
    (2, INT32.map(lambda n: ("abs", n))),
    (1, st.integers(-2, 2).map(lambda d: ("hand", d))),
    (3, st.floats(0, 1, exclude_max=True).map(lambda f: ("frac", f))),
)


END_VALUE = st.sampled_from([0, 1, 2, 1, 2, 3, 7, -1, 2**31 - 1, -(2**31)])


SCOUT_SPEC = st.tuples(st.just("scout"), END_VALUE, st.booleans(), POSITION)


SHOW_SPEC = st.tuples(st.just("show"), POSITION, POSITION)


ACTION_SPEC = weighted(
    (1, st.none()),  # ActionChoice without its action
    (1, st.just(("empty",))),  # an Action with no oneof member
    (3, SHOW_SPEC),
    (3, SCOUT_SPEC),
    (3, st.tuples(st.just("sas"), st.none() | SCOUT_SPEC, st.none() | SHOW_SPEC)),
    (2, st.tuples(st.just("legal"), st.integers(0, 200))),
    (1, st.tuples(st.just("legal_sas"), st.integers(0, 2000))),
)


SURROGATES: tuple[Literal["Cs"]] = ("Cs",)


MATCH_SPEC = weighted(
    (10, st.just(("target",))),
    (1, st.just(("other",))),
    (1, st.just(("foreign",))),
    (1, st.just(("ended",))),
    (1, st.just(("empty",))),
    (
        1,
        st.text(st.characters(blacklist_categories=SURROGATES), max_size=30).map(
            lambda s: ("text", s)
        ),
    ),
    (1, st.sampled_from([-3, -2, -1, 0, 1, 2, -5000, 500]).map(lambda d: ("huge", d))),
)


REQUEST_SPEC = weighted(
    (8, st.just(("open",))),
    (2, st.sampled_from([-3, -2, -1, 1, 2, 3]).map(lambda k: ("offset", k))),
    (
        1,
        st.sampled_from([0, 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64 - 2, 2**32, 2**31]).map(
            lambda n: ("raw", n)
        ),
    ),
    (1, st.integers(0, 2**64 - 1).map(lambda n: ("raw", n))),
)


HELLO = st.builds(
    arena_pb2.Hello,
    bot_name=st.text(st.characters(blacklist_categories=SURROGATES), max_size=20),
    bot_version=st.text(max_size=10),
    protocol_version=st.one_of(st.just(1), st.integers(0, 2**32 - 1)),
    max_concurrent_matches=st.one_of(st.integers(0, 5), st.integers(0, 2**32 - 1)),
    lean=st.booleans(),
)


UNKNOWN_FIELDS = st.one_of(
    st.just(b""),
    st.just(b""),
    st.tuples(st.integers(6, 2**29 - 1), st.integers(0, 2**64 - 1)).map(
        lambda f: tag(f[0], 0) + varint(f[1])
    ),
    st.tuples(st.integers(6, 5000), st.binary(max_size=30)).map(
        lambda f: tag(f[0], 2) + varint(len(f[1])) + f[1]
    ),
)


@dataclass(frozen=True)
class Hostile:
    body: str
    match: tuple[Any, ...]
    request: tuple[Any, ...]
    rotate: bool
    action: Any
    hello: arena_pb2.Hello
    extra: bytes
    repeat: int


HOSTILE = st.builds(
    Hostile,
    # "answer": the kind the open request asks for; the others regardless of it.
    body=st.sampled_from(["answer"] * 6 + ["action", "rotation", "hello", "empty"]),
    match=MATCH_SPEC,
    request=REQUEST_SPEC,
    rotate=st.booleans(),
    action=ACTION_SPEC,
    hello=HELLO,
    extra=UNKNOWN_FIELDS,
    repeat=st.sampled_from([1, 1, 1, 2]),
)


MUTATION = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10_000), st.integers(0, 7)),
    st.tuples(st.just("set"), st.integers(0, 10_000), st.integers(0, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 10_000), st.just(0)),
    st.tuples(st.just("delete"), st.integers(0, 10_000), st.integers(1, 4)),
    st.tuples(st.just("insert"), st.integers(0, 10_000), st.integers(0, 255)),
    st.tuples(st.just("dup"), st.integers(0, 10_000), st.integers(1, 8)),
)


def mutate(data: bytes, ops: Sequence[tuple[str, int, int]]) -> bytes:
    out = bytearray(data)
    for op, where, value in ops:
        pos = where % (len(out) + 1)
        if op == "flip" and out:
            out[pos % len(out)] ^= 1 << value
        elif op == "set" and out:
            out[pos % len(out)] = value
        elif op == "truncate":
            del out[pos:]
        elif op == "delete":
            del out[pos : pos + value]
        elif op == "insert":
            out[pos:pos] = bytes([value])
        elif op == "dup":
            out[pos:pos] = out[pos : pos + value]
    return bytes(out)


def _position(spec: tuple[Any, ...], hand: int) -> int:
    """An absolute value, one relative to the hand size, or a fraction of it (in range)."""
    if spec[0] == "frac":
        return int(spec[1] * hand)
    value = spec[1] if spec[0] == "abs" else hand + spec[1]
    return int(max(-(2**31), min(2**31 - 1, value)))


def build_action(spec: Any, seat: SeatView, hand: int) -> game_pb2.Action | None:
    if spec is None:
        return None
    kind = spec[0]
    if kind == "empty":
        return game_pb2.Action()
    if kind == "show":
        start = _position(spec[1], hand)
        length = (
            _position(spec[2], hand - start) + 1
            if spec[2][0] == "frac"
            else _position(spec[2], hand)
        )
        return game_pb2.Action(show=game_pb2.Show(start=start, length=length))
    if kind == "scout":
        return game_pb2.Action(scout=_scout(spec, hand))
    if kind == "sas":
        both = game_pb2.ScoutAndShow()
        if spec[1] is not None:
            both.scout.CopyFrom(_scout(spec[1], hand + 1))
        if spec[2] is not None:
            start = _position(spec[2][1], hand + 1)
            length = (
                _position(spec[2][2], hand + 1 - start) + 1
                if spec[2][2][0] == "frac"
                else _position(spec[2][2], hand + 1)
            )
            both.show.CopyFrom(game_pb2.Show(start=start, length=length))
        return game_pb2.Action(scout_and_show=both)
    decision = (
        seat.open.decision_request
        if seat.open is not None and seat.open_kind == "decision_request"
        else None
    )
    if decision is None:
        return game_pb2.Action(show=game_pb2.Show(start=0, length=1))
    if kind == "legal_sas" and decision.scout_and_show_available:
        combos = list(scout_and_shows(decision))
        return wire_scout_and_show(*combos[spec[1] % len(combos)])
    listed = [game_pb2.Action(show=s) for s in decision.legal_shows] + [
        game_pb2.Action(scout=s) for s in decision.legal_scouts
    ]
    index: int = spec[1] % len(listed)
    return listed[index]


def _scout(spec: tuple[Any, ...], hand: int) -> game_pb2.Scout:
    scout = game_pb2.Scout(flip=spec[2], insert_at=_position(spec[3], hand))
    scout.end = spec[1]  # out-of-range values too: proto3 enums are open
    return scout


def hostile_frame(example: Hostile, bot: FuzzBot, seat: SeatView, live: Live) -> bytes:
    if example.body == "empty":
        return example.extra
    if example.body == "hello":
        return arena_pb2.BotMessage(hello=example.hello).SerializeToString() + example.extra
    body = example.body
    if body == "answer":
        body = "rotation" if seat.open_kind == "rotation_request" else "action"
    kind = example.match[0]
    others = [s.match_id for s in bot.running() if s is not seat]
    foreign = [m for k in live.keepers for m in k.created[-3:]]
    ended = bot.ended_ids()[-5:]
    match_id = {
        "target": seat.match_id,
        "other": (others or [seat.match_id])[0],
        "foreign": (foreign or ["m-000000000000"])[-1],
        "ended": (ended or ["m-ffffffffffff"])[-1],
        "empty": "",
        "text": example.match[1] if kind == "text" else "",
        "huge": "",
    }[kind]
    named = bot.seats.get(match_id, seat)
    if example.request[0] == "open":
        request_id = named.open_id
    elif example.request[0] == "offset":
        request_id = max(0, named.open_id + example.request[1])
    else:
        request_id = example.request[1]
    hand = 0
    if seat.open_kind == "decision_request":
        hand = len(seat.open.decision_request.observation.hand) if seat.open else 0
    action = build_action(example.action, seat, hand)

    def message(match: str) -> bytes:
        msg = (
            rotation_choice(match, request_id, example.rotate)
            if body == "rotation"
            else action_choice(match, request_id, action)
        )
        return msg.SerializeToString() + example.extra

    if kind == "huge":
        return sized(LIMIT + example.match[1], lambda n: message("m" * n))
    return message(match_id)


FIRST_FRAMES = st.one_of(
    FRAMES,
    st.tuples(
        st.just(
            arena_pb2.BotMessage(
                hello=arena_pb2.Hello(bot_name="x", protocol_version=1, max_concurrent_matches=1)
            ).SerializeToString()
        ),
        st.lists(MUTATION, min_size=1, max_size=2),
    ).map(lambda b: mutate(b[0], b[1])),
    HELLO.map(lambda h: arena_pb2.BotMessage(hello=h).SerializeToString()),
    st.builds(
        arena_pb2.RotationChoice, match_id=st.text(max_size=8), request_id=st.integers(0, 2**64 - 1)
    ).map(lambda r: arena_pb2.BotMessage(rotation=r).SerializeToString()),
)
