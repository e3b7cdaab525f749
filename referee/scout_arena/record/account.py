"""A record as a person reads it: every deal, every action and the standings, in order."""

from __future__ import annotations

import json

from .json_v1 import note_json
from .model import MatchRecord
from .notation import seat_labels
from .replay import replay

__all__ = ["format_match"]


def format_match(record: MatchRecord) -> str:
    """A readable move-by-move account of a record; replays it first (RecordError if bad)."""
    result = replay(record)
    players = record.players
    labels = seat_labels(players)
    lines = [f"SCOUT, {record.num_players} players, seed {record.seed}"]
    lines += [f"  seat {seat}: {name}" for seat, name in enumerate(players)]
    for entry in record.rounds:
        index = entry.index
        lines.append(f"\nRound {index + 1} ({labels[entry.starting_seat]} starts)")
        for seat, hand in enumerate(entry.dealt_hands):
            rotated = " (rotated)" if entry.rotations[seat] else ""
            faces = " ".join(f"{card.face}/{card.other}" for card in hand)
            lines.append(f"  dealt to {labels[seat]}: {faces}{rotated}")
        lines += [f"  {step.number:3d}. {step.description}" for step in result.steps
                  if step.round_index == index]
        if entry.scores is not None and entry.end_reason is not None:
            exempt = entry.exempt_seat
            exempt_text = (f"; {labels[exempt]} exempt from the hand penalty"
                           if exempt is not None else "")
            lines.append(f"  round ends: {entry.end_reason.value.replace('_', ' ')}"
                         f"{exempt_text}")
            lines.append(f"  round scores: {list(entry.scores)}")
    for note in record.notes:
        lines.append(f"  note: {json.dumps(note_json(note))}")
    if record.finished and record.totals is not None and record.ranks is not None:
        lines.append("\nFinal standings")
        totals, ranks = record.totals, record.ranks
        for seat in sorted(range(len(players)), key=lambda s: ranks[s]):
            lines.append(f"  {ranks[seat]}. {labels[seat]:<12} {totals[seat]:+d}")
    return "\n".join(lines)
