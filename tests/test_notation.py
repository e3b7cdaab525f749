"""One notation for a move: the live view, the replay viewer and `scout-arena replay` word a
turn the same way (scout_arena.record.notation), and call seats by their bots' names."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from scout_arena.record import (
    build_record,
    describe_round,
    dump_record,
    record_to_json,
    replay,
    seat_labels,
)
from scout_arena.web import live_json, replay_frames
from scout_rules import PublicAction, Scout, ScoutAndShow, State, spectator_view

SCOUT_ARENA = Path(sys.executable).parent / "scout-arena"
TURNED = re.compile(r" \(turned to \d+\)")


def _play(num_players: int, seed: int) -> tuple[State, list[list[PublicAction]]]:
    """A whole match of random legal play, with every round's public history as the table saw
    it (taken action by action: the engine clears a round's history when the next is dealt)."""
    rng = random.Random(seed)
    state = State.new(num_players, seed)
    rounds: list[list[PublicAction]] = []
    while not state.is_over:
        if state.pending_rotations():
            for seat in state.pending_rotations():
                state.choose_rotation(seat, rng.random() < 0.3)
            continue
        index = state.round_index
        state.apply(rng.choice(state.legal_actions()))
        while len(rounds) <= index:
            rounds.append([])
        assert state.last_action is not None
        rounds[index].append(state.last_action)
    return state, rounds


@pytest.mark.parametrize(("num_players", "seed"), [(2, 1), (3, 7), (4, 12), (5, 3)])
def test_live_and_replay_word_every_move_alike(num_players: int, seed: int) -> None:
    names = ["alpha", "bravo", "charlie", "delta", "echo"][:num_players]
    state, rounds = _play(num_players, seed)
    steps = replay(build_record(state, names)).steps
    flips = 0
    for index, history in enumerate(rounds):
        live = describe_round(history, names)
        recorded = [s for s in steps if s.round_index == index]
        assert len(live) == len(recorded) > 0
        for said, step in zip(live, recorded, strict=True):
            assert said.startswith(f"{names[step.seat]} ")
            assert "seat" not in said
            scout = (
                step.action
                if isinstance(step.action, Scout)
                else (step.action.scout if isinstance(step.action, ScoutAndShow) else None)
            )
            if scout is not None and scout.flip:
                # the replay knows which way up the card went in; the rest reads the same
                flips += 1
                assert TURNED.search(step.description)
                assert TURNED.sub("", step.description) == said
            else:
                assert step.description == said
    assert flips > 0, "the match should have a turned scout"


def test_a_show_says_what_it_captured() -> None:
    _, rounds = _play(3, 7)
    said = [text for history in rounds for text in describe_round(history, ["a", "b", "c"])]
    shows = [t for t in said if " shows " in t]
    assert shows and any(", capturing " in t for t in shows)
    # the opening show of each round finds the table clear
    for history in rounds:
        assert ", capturing" not in describe_round(history, ["a", "b", "c"])[0]


def test_seats_sharing_a_name_are_told_apart() -> None:
    assert seat_labels(["greedy", "random", "greedy"]) == [
        "greedy (seat 0)",
        "random",
        "greedy (seat 2)",
    ]
    assert seat_labels(["", "x"]) == ["seat 0", "x"]


def test_live_view_and_replay_frames_use_the_notation() -> None:
    names = ["alpha", "bravo", "charlie"]
    state = State.new(3, 5)
    rng = random.Random(5)
    history: list[PublicAction] = []
    while len(history) < 6:
        if state.pending_rotations():
            for seat in state.pending_rotations():
                state.choose_rotation(seat, False)
            continue
        state.apply(rng.choice(state.legal_actions()))
        assert state.last_action is not None
        history.append(state.last_action)
    view = live_json("m-1", names, spectator_view(state))
    assert view["moves"] == describe_round(history, names)
    assert all(m.split(" ")[0] in names for m in view["moves"])

    finished, _ = _play(3, 9)
    record = record_to_json(build_record(finished, names, match_id="m-2"))
    frames = replay_frames(record)["frames"]
    deal, rotation = frames[0], frames[1]
    starter = finished.round_logs[0].starting_seat
    assert deal["description"] == f"round 1: the deal ({names[starter]} starts)"
    assert "seat" not in rotation["description"]
    actions = [f["description"] for f in frames if f["kind"] == "action"]
    assert actions == [s.description for s in replay(record).steps]


def test_cli_replay_prints_the_same_moves(tmp_path: Path) -> None:
    names = ["alpha", "bravo", "charlie", "delta"]
    state, _ = _play(4, 21)
    record = build_record(state, names)
    path = tmp_path / "match.json"
    dump_record(record, path)
    out = subprocess.run(
        [str(SCOUT_ARENA), "replay", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    play, standings = out.split("Final standings")
    moves = [line.split(". ", 1)[1] for line in play.splitlines() if re.match(r"\s+\d+\. ", line)]
    assert moves == [s.description for s in replay(json.loads(path.read_text())).steps]
    assert "dealt to alpha:" in out and "seat 0 " not in out.split("Round 1", 1)[1]
    assert re.search(r"1\. (alpha|bravo|charlie|delta) +[+-]\d+", standings)
