"""Matches of SDK bots played in process on the engine: no network, no subprocess.

There is one pair of bundled bots, the SDK's `RandomBot` and `GreedyBot`, and they play the same
whether they sit at a referee or here. So that they also *see* the same, every observation goes
through the referee's own wire translation (`scout_arena.server.convert`) and the SDK's
(`scout_client.convert`): a bot gets exactly the `Observation` a networked bot would, and its
answer reaches the engine the way an answer on the wire does.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar, cast

from scout_client import Action as SdkAction
from scout_client import Bot, GreedyBot, RandomBot
from scout_client import convert as sdk_wire
from scout_rules import Action, Phase, State, rank_scores

from .search import SearchBot
from .server import TimeControl
from .server import convert as wire
from .server.events import ActionPlayed, BotEvent, MatchEnded, MatchStarted, RoundEnded

__all__ = ["BUNDLED_BOTS", "make_bot", "play_match"]

#: The bundled bots by the name `scout-arena play --bot`, tournaments and `bot run` know them by.
BUNDLED_BOTS: dict[str, Callable[[int], Bot]] = {
    "random": lambda seed: RandomBot(seed),
    "greedy": lambda seed: GreedyBot(),
    "search": lambda seed: SearchBot(seed),
}

#: In process nobody is on a clock; the requests still say what a default referee would.
_DECISION_MS = 1000
_TIME_BANK_MS = 30000

T = TypeVar("T")


def make_bot(name: str, seed: int = 0) -> Bot:
    try:
        return BUNDLED_BOTS[name](seed)
    except KeyError:
        raise ValueError(f"unknown bot {name!r}; bundled bots: "
                         f"{', '.join(sorted(BUNDLED_BOTS))}") from None


def _resolve(loop: asyncio.AbstractEventLoop, value: T | Awaitable[T]) -> T:
    """A bot method's result, whether it was written plain or ``async def``."""
    if inspect.isawaitable(value):
        result: T = loop.run_until_complete(value)
        return result
    return value


def _tell(loop: asyncio.AbstractEventLoop, bots: Sequence[Bot], event: BotEvent,
          hook: str) -> None:
    """Every bot's ``hook`` with ``event`` as the SDK would hand it over from the wire."""
    message = sdk_wire.referee_message_from_proto(wire.referee_message(event))
    for bot in bots:
        _resolve(loop, getattr(bot, hook)(message))


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
            start = MatchStarted(match, seat, names, state.num_players, state.num_rounds,
                                 time_control, False, _TIME_BANK_MS, 0)
            _tell(loop, [bot], start, "on_match_start")
        while not state.is_over:
            if state.phase is Phase.ROTATION:
                choices = []
                for seat, bot in enumerate(bots):
                    request_id += 1
                    message = wire.rotation_request(match, request_id, state.round_index,
                                                    state.hand(seat), _DECISION_MS,
                                                    _TIME_BANK_MS)
                    request = sdk_wire.rotation_request_from_proto(message.rotation_request)
                    choices.append(bool(_resolve(loop, bot.choose_rotation(request))))
                for seat, rotate in enumerate(choices):
                    state.choose_rotation(seat, rotate)
                continue
            actor = state.current_seat
            assert actor is not None
            request_id += 1
            message = wire.decision_request(state.observation(actor), match, request_id,
                                            _DECISION_MS, _TIME_BANK_MS)
            observation = sdk_wire.decision_request_from_proto(message.decision_request)
            answer = cast(SdkAction, _resolve(loop, bots[actor].act(observation)))
            action = wire.action_from_pb(sdk_wire.action_to_proto(answer))
            if on_action is not None:
                on_action(state, actor, action)
            rounds_before, round_index = len(state.round_results), state.round_index
            state.apply(action)
            public = state.last_action
            assert public is not None
            _tell(loop, bots, ActionPlayed(match, round_index, public, False), "on_event")
            if len(state.round_results) > rounds_before:
                round_log = state.round_logs[rounds_before]
                assert round_log.result is not None
                _tell(loop, bots, RoundEnded(match, round_log.result, tuple(state.scores),
                                             round_log.dealt_hands, tuple(round_log.rotations)),
                      "on_round_end")
        totals = tuple(state.scores)
        _tell(loop, bots, MatchEnded(match, totals, rank_scores(totals, ()), (),
                                     record_id=match), "on_match_end")
    finally:
        loop.close()
    return state
