"""The live view of matches in play, built only from the engine's `SpectatorView`.

The app never touches a running match's `State`: whoever runs matches (the referee, a test)
hands it `LiveMatch` objects, and the rule "no hidden card before its round ends" stays in
`scout_rules.spectator_view`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from scout_rules import SpectatorView

from ..record import JSON, describe_round
from ..record.json_v1 import cards_json


class LiveMatch(Protocol):
    """A match being played, as the web app may see it. Read-only properties, so that plain
    attributes (of any sequence type) satisfy it as well as properties do."""

    @property
    def match_id(self) -> str: ...

    @property
    def players(self) -> Sequence[str]: ...

    def spectator_view(self) -> SpectatorView: ...


def live_entry(match: LiveMatch) -> JSON:
    """A match in the list of those being played."""
    players = list(match.players)
    return {"match_id": match.match_id, "players": players, "table_size": len(players),
            "round": match.spectator_view().round_index}


def live_json(match_id: str, players: Sequence[str], view: SpectatorView) -> JSON:
    """What a spectator may see of a match in play (docs/web-api.md, ``/api/live/{id}``)."""
    return {
        "match_id": match_id,
        "players": list(players),
        "num_players": view.num_players,
        "round": view.round_index,
        "phase": view.phase.value,
        "hand_sizes": list(view.hand_sizes),
        "active": cards_json(view.active_set),
        "active_owner": view.active_owner,
        "captured": list(view.captured),
        "chips": list(view.scout_chips),
        "tokens": list(view.scout_show_tokens),
        "scores": list(view.scores),
        "current_seat": view.current_seat,
        "moves": describe_round(view.history, players),
        "finished_rounds": [
            {"round": r.round_index, "end_reason": r.end_reason.value,
             "exempt_seat": r.exempt_seat, "scores": list(r.scores),
             "hands": [cards_json(h) for h in r.hands]}
            for r in view.finished_rounds],
    }
