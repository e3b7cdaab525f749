"""Matches of SDK bots played in process on the engine: no network, no subprocess, no protobuf.

The bundled bots play the same whether they sit at a referee or here, and they see the same:
the SDK's messages are built straight from the engine's values (the SDK's cards and actions are
the rules package's own), holding exactly what a referee's requests and events carry, and a
bot's answer is the engine's action as it is.
"""

from __future__ import annotations

import asyncio
import inspect
import typing
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar, cast

import scout_client as sdk
from scout_client import Bot, GreedyBot, RandomBot
from scout_client.types import RefereeMessage
from scout_rules import Action, Phase, State, rank_scores
from scout_rules.protocol import DEFAULT_DECISION_MS, DEFAULT_TIME_BANK_MS, TimeControl

from .search import SearchBot

__all__ = ["BUNDLED_BOTS", "bot_from_spec", "make_bot", "play_match"]

#: The bundled bots by the name `scout-arena play --bot`, tournaments and `bot run` know them by.
BUNDLED_BOTS: dict[str, Callable[[int], Bot]] = {
    "random": lambda seed: RandomBot(seed),
    "greedy": lambda seed: GreedyBot(),
    "search": lambda seed: SearchBot(seed),
}

#: In process nobody is on a clock; the requests still say what a default referee would.
_DECISION_MS = DEFAULT_DECISION_MS
_TIME_BANK_MS = DEFAULT_TIME_BANK_MS

T = TypeVar("T")


def make_bot(name: str, seed: int = 0) -> Bot:
    try:
        return BUNDLED_BOTS[name](seed)
    except KeyError:
        raise ValueError(f"unknown bot {name!r}; bundled bots: "
                         f"{', '.join(sorted(BUNDLED_BOTS))}") from None


def _option(key: str, text: str, hint: object) -> int | float | bool | str | None:
    """``text`` as the type ``SearchBot`` declares for ``key``: a bool is ``true`` or ``false``
    (any case), a number must parse; anything else is refused rather than passed on as a string
    (``opponents_search=False`` once reached the bot as the truthy ``"False"``)."""
    kinds = set(typing.get_args(hint)) or {hint}
    if bool in kinds:
        if text.lower() not in ("true", "false"):
            raise ValueError(f"{key} is true or false, not {text!r}")
        return text.lower() == "true"
    if type(None) in kinds and text.lower() == "none":
        return None
    for kind in (int, float):
        if kind in kinds:
            try:
                return kind(text)
            except ValueError:
                raise ValueError(f"{key} is a number ({kind.__name__}), not {text!r}") from None
    return text  # eval=net, weights=PATH


def bot_from_spec(spec: str, seed: int = 0) -> Bot:
    """The bot ``NAME[:KEY=VALUE,...]`` names: a bundled bot, the keys `SearchBot`'s keyword
    arguments (``search:iterations=200,eval=mix``); what benches and training pit together."""
    name, _, params = spec.partition(":")
    if not params:
        return make_bot(name, seed)
    if name != "search":
        raise ValueError(f"only search takes options, not {name!r} in {spec!r}")
    hints = typing.get_type_hints(SearchBot.__init__)
    options: dict[str, int | float | bool | str | None] = {}
    for part in filter(None, params.split(",")):
        key, equals, text = part.partition("=")
        if not equals:
            raise ValueError(f"options are KEY=VALUE, got {part!r} in {spec!r}")
        if key not in hints or key in ("seed", "clock", "return"):
            raise ValueError(f"bad search option in {spec!r}: no option {key!r}")
        options[key] = _option(key, text, hints[key])
    return SearchBot(seed, **options)  # type: ignore[arg-type]  # each coerced to its hint


def _resolve(loop: asyncio.AbstractEventLoop, value: T | Awaitable[T]) -> T:
    """A bot method's result, whether it was written plain or ``async def``."""
    if inspect.isawaitable(value):
        result: T = loop.run_until_complete(value)
        return result
    return value


def _tell(loop: asyncio.AbstractEventLoop, bots: Sequence[Bot], message: RefereeMessage,
          hook: str) -> None:
    """Every bot's ``hook`` with ``message``."""
    for bot in bots:
        _resolve(loop, getattr(bot, hook)(message))


def _round_ended(match: str, state: State, round_number: int) -> sdk.RoundEnded:
    log = state.round_logs[round_number]
    result = log.result
    assert result is not None
    return sdk.RoundEnded(
        match_id=match, round_index=result.round_index,
        reason=sdk.RoundEndReason(result.end_reason.value), exempt_seat=result.exempt_seat,
        round_scores=result.scores, totals=tuple(state.scores),
        hands=tuple(map(tuple, result.hands)), dealt_hands=tuple(map(tuple, log.dealt_hands)),
        rotations=tuple(bool(r) for r in log.rotations))


def play_match(bots: Sequence[Bot], seed: int, *, match_id: str | None = None,
               on_action: Callable[[State, int, Action], None] | None = None) -> State:
    """Play one whole match: every seat's rotation from its own hand, then each decision from
    the acting seat's observation, as a referee would ask for them. The bots' hooks hear what
    a referee's bots hear, in the same order: the match's start, every action, each round's
    end and the match's end."""
    state = State.new(len(bots), seed)
    match = match_id if match_id is not None else f"local-{seed}"
    names = tuple(bot.display_name for bot in bots)
    time_control = TimeControl(_DECISION_MS, _TIME_BANK_MS)
    loop = asyncio.new_event_loop()
    request_id = 0
    try:
        for seat, bot in enumerate(bots):
            start = sdk.MatchStart(match, seat, names, state.num_players, state.num_rounds,
                                   time_control, False, _TIME_BANK_MS, 0)
            _tell(loop, [bot], start, "on_match_start")
        while not state.is_over:
            if state.phase is Phase.ROTATION:
                choices = []
                for seat, bot in enumerate(bots):
                    request_id += 1
                    request = sdk.RotationRequest(match, request_id, state.round_index,
                                                  tuple(state.hand(seat)), _DECISION_MS,
                                                  _TIME_BANK_MS)
                    choices.append(bool(_resolve(loop, bot.choose_rotation(request))))
                for seat, rotate in enumerate(choices):
                    state.choose_rotation(seat, rotate)
                continue
            actor = state.current_seat
            assert actor is not None
            request_id += 1
            observation = sdk.Observation.from_view(
                state.observation(actor), match_id=match, request_id=request_id,
                deadline_ms=_DECISION_MS, time_bank_ms=_TIME_BANK_MS)
            action = cast(Action, _resolve(loop, bots[actor].act(observation)))
            if on_action is not None:
                on_action(state, actor, action)
            rounds_before, round_index = len(state.round_results), state.round_index
            state.apply(action)
            public = state.last_action
            assert public is not None
            _tell(loop, bots, sdk.PublicEvent(match, round_index, public), "on_event")
            if len(state.round_results) > rounds_before:
                _tell(loop, bots, _round_ended(match, state, rounds_before), "on_round_end")
        totals = tuple(state.scores)
        _tell(loop, bots, sdk.MatchEnded(match, totals, rank_scores(totals, ()), (),
                                         record_id=match), "on_match_end")
    finally:
        loop.close()
    return state
