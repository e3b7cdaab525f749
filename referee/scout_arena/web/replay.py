"""Replay frames: a finished match as the whole table after each step, drawn by the engine.

The frames are taken from the very run of `scout_arena.record.replay` that checks the record
(through its ``on_event`` hook), so a record is re-played once and every frame shown is one
the checks have passed. A round-ending action shows the table the engine left in its
`RoundResult`, since by then the next round is already dealt.
"""

from __future__ import annotations

from scout_rules import Scout, State

from ..record import JSON, action_to_json, record_from_json, replay, seat_labels
from ..record.json_v1 import cards_json
from ..record.replay import ReplayEvent, player_names


def _table(state: State) -> JSON:
    return {
        "hands": [cards_json(state.hand(s)) for s in range(state.num_players)],
        "active": cards_json(state.active_set),
        "active_owner": state.active_owner,
        "captured": [len(c) for c in state.captured],
        "chips": list(state.scout_chips),
        "tokens": list(state.scout_show_tokens),
        "scores": list(state.scores),
        "current_seat": state.current_seat,
    }


def _frame(index: int, event: ReplayEvent, labels: list[str]) -> JSON:
    state, i = event.state, event.round_index
    frame: JSON = {"index": index, "kind": event.kind, "round": i, "description": "",
                   "seat": None, "action": None, "rotations": None, "inserted": None,
                   "round_end": None, **_table(state)}
    if event.kind == "deal":
        frame["description"] = (f"round {i + 1}: the deal "
                                f"({labels[state.round_logs[i].starting_seat]} starts)")
        frame["current_seat"] = None
    elif event.kind == "rotation":
        rotations = [bool(r) for r in state.round_logs[i].rotations]
        rotated = [s for s, r in enumerate(rotations) if r]
        frame["description"] = f"round {i + 1}: " + (
            ", ".join(labels[s] for s in rotated) + " rotated" if rotated
            else "nobody rotated")
        frame["rotations"] = rotations
    else:
        step = event.step
        assert step is not None
        frame.update(description=step.description, seat=step.seat,
                     action=action_to_json(step.action))
        if isinstance(step.action, Scout):
            # after a Scout & Show the insert position no longer holds a card of the hand
            frame["inserted"] = {"seat": step.seat, "position": step.action.insert_at}
        result = event.round_result
        if result is not None:
            frame.update(hands=[cards_json(h) for h in result.hands],
                         active=cards_json(result.active_set),
                         active_owner=result.active_owner, captured=list(result.captured),
                         chips=list(result.scout_chips), tokens=list(result.scout_show_tokens),
                         current_seat=None,
                         round_end={"reason": result.end_reason.value,
                                    "exempt_seat": result.exempt_seat,
                                    "scores": list(result.scores)})
    return frame


def replay_frames(record: JSON) -> JSON:
    """The match as a list of frames, each the whole table after one step. Raises RecordError
    (naming the first step that fails) for a record that does not replay."""
    frames: list[JSON] = []
    players = record.get("players")
    labels = seat_labels(player_names(players if isinstance(players, list) else []))
    replay(record, lambda event: frames.append(_frame(len(frames), event, labels)))
    typed = record_from_json(record)
    return {
        "match_id": typed.match_id,
        "num_players": typed.num_players,
        "players": list(typed.players),
        "finished": typed.finished,
        "totals": None if typed.totals is None else list(typed.totals),
        "ranks": None if typed.ranks is None else list(typed.ranks),
        "forfeits": list(typed.forfeits),
        "frames": frames,
    }
