"""`scout_arena.local.play_match`: bots in process hear what they would hear at a referee."""

from __future__ import annotations

import pytest
from scout_arena.local import bot_from_spec, play_match
from scout_arena.search import SearchBot
from scout_client import (
    Action,
    GreedyBot,
    MatchEnded,
    MatchStart,
    Observation,
    PublicEvent,
    RoundEnded,
)


class Listening(GreedyBot):
    """Greedy play, and a note of every hook in the order it came."""

    def __init__(self) -> None:
        super().__init__()
        self.heard: list[object] = []

    def on_match_start(self, start: MatchStart) -> None:
        self.heard.append(start)

    def act(self, observation: Observation) -> Action:
        self.heard.append(observation)
        return super().act(observation)

    def on_event(self, event: PublicEvent) -> None:
        self.heard.append(event)

    def on_round_end(self, round_ended: RoundEnded) -> None:
        self.heard.append(round_ended)

    def on_match_end(self, match_ended: MatchEnded) -> None:
        self.heard.append(match_ended)


def test_local_play_calls_every_hook_a_referee_would_in_the_same_order() -> None:
    bots = [Listening() for _ in range(3)]
    state = play_match(bots, seed=11, match_id="local-m")
    actions = [a for log in state.round_logs for a in log.actions]
    for seat, bot in enumerate(bots):
        start, *middle, end = bot.heard
        assert isinstance(start, MatchStart)
        assert (start.match_id, start.seat, start.num_players, start.num_rounds) == (
            "local-m", seat, 3, state.num_rounds)
        assert isinstance(end, MatchEnded)
        assert end.totals == tuple(state.scores) and min(end.ranks) == 1
        events = [m for m in middle if isinstance(m, PublicEvent)]
        assert [e.action.seat for e in events] == [seat for seat, _ in actions]
        assert [e.action.kind.name.replace("_", "") for e in events] == [
            type(action).__name__.upper() for _, action in actions]
        ends = [m for m in middle if isinstance(m, RoundEnded)]
        assert [r.round_index for r in ends] == list(range(state.num_rounds))
        assert [r.round_scores for r in ends] == [tuple(r.scores) for r in state.round_results]
        # Each of this seat's decisions comes after the event of the action before it.
        for i, message in enumerate(middle):
            if isinstance(message, Observation) and message.history:
                previous = middle[i - 1]
                assert isinstance(previous, PublicEvent)
                assert previous.action == message.history[-1]


def test_local_play_hands_bots_exactly_what_the_referee_s_wire_would() -> None:
    """In process the SDK's messages are built from the engine's values with no protobuf; each
    must equal the message a networked bot parses from the referee's own encoding."""
    from dataclasses import replace
    from itertools import accumulate

    from scout_arena.server import convert as wire
    from scout_arena.server.events import MatchStarted
    from scout_arena.server.events import RoundEnded as WireRoundEnded
    from scout_client import convert as sdk_wire
    from scout_rules import State
    from scout_rules.protocol import DEFAULT_DECISION_MS, DEFAULT_TIME_BANK_MS, TimeControl

    for players, seed in ((2, 3), (3, 11), (4, 5), (5, 8)):
        bots = [Listening() for _ in range(players)]
        on_wire: list[Observation] = []

        def note(state: State, actor: int, _action: Action,
                 on_wire: list[Observation] = on_wire) -> None:
            message = wire.decision_request(state.observation(actor), "m", 0, DEFAULT_DECISION_MS,
                                            DEFAULT_TIME_BANK_MS)
            on_wire.append(sdk_wire.decision_request_from_proto(message.decision_request))

        state = play_match(bots, seed=seed, match_id="m", on_action=note)
        heard = [m for bot in bots for m in bot.heard]
        asked = sorted((m for m in heard if isinstance(m, Observation)),
                       key=lambda o: o.request_id)
        assert [replace(o, request_id=0) for o in asked] == on_wire
        totals = list(accumulate((r.scores for r in state.round_results),
                                 lambda a, b: tuple(x + y for x, y in zip(a, b, strict=True))))
        ends = [sdk_wire.referee_message_from_proto(wire.referee_message(WireRoundEnded(
                    "m", log.result, totals[i], log.dealt_hands, tuple(log.rotations))))
                for i, log in enumerate(state.round_logs) if log.result is not None]
        assert [m for m in bots[0].heard if isinstance(m, RoundEnded)] == ends
        for seat, bot in enumerate(bots):
            start = sdk_wire.referee_message_from_proto(wire.referee_message(MatchStarted(
                "m", seat, tuple(b.display_name for b in bots), players, state.num_rounds,
                TimeControl(), False, DEFAULT_TIME_BANK_MS, 0)))
            assert bot.heard[0] == start


def test_a_bot_spec_names_a_bundled_bot_or_a_search_bot_with_options() -> None:
    assert isinstance(bot_from_spec("greedy"), GreedyBot)
    bot = bot_from_spec("search:iterations=50,exploration=0.5,opponents_search=false,eval=rollout",
                        seed=3)
    assert isinstance(bot, SearchBot)
    assert (bot.iterations, bot.exploration, bot.opponents_search, bot.seed) == (50, 0.5, False, 3)


@pytest.mark.parametrize("text", ["false", "False", "FALSE"])
def test_a_bool_search_option_is_read_in_any_case(text: str) -> None:
    bot = bot_from_spec(f"search:opponents_search={text},exploration=1")
    assert isinstance(bot, SearchBot)
    assert bot.opponents_search is False
    assert bot.exploration == 1.0 and isinstance(bot.exploration, float)


@pytest.mark.parametrize("spec", ["nobody", "greedy:depth=2", "search:iterations",
                                  "search:no_such_option=1", "search:eval=oracle",
                                  "search:opponents_search=no", "search:iterations=many",
                                  "search:exploration=wide", "search:clock=1"])
def test_a_bad_bot_spec_is_refused_with_a_value_error(spec: str) -> None:
    with pytest.raises(ValueError):
        bot_from_spec(spec)
