"""`scout_arena.local.play_match`: bots in process hear what they would hear at a referee."""

from __future__ import annotations

from scout_arena.local import play_match
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
                assert isinstance(middle[i - 1], PublicEvent)
                assert middle[i - 1].action == message.history[-1]
