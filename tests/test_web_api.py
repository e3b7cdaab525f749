"""The web pages' JSON API (scout_arena.web, with the ladder's LadderSource), through Starlette's
TestClient, against a real tournament output directory and against a seeded ladder database;
every replay frame is checked against the engine's own state after the same action."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from scout_arena.local import make_bot, play_match
from scout_arena.record import build_record, record_to_json
from scout_rules import State, spectator_view
from support.web_site import (  # noqa: F401  (the *_fixture names: pytest fixtures)
    SEEDED,
    TestClient,
    _check_replay,
    _EmptySource,
    _LiveMatch,
    _node,
    _play_until,
    ladder_repo_fixture,
    tournament_dir_fixture,
)


def test_tournament_api(tournament_dir: Path) -> None:
    from scout_arena.web import TournamentSource, create_app

    summary = json.loads((tournament_dir / "summary.json").read_text())
    client = TestClient(create_app(TournamentSource(tournament_dir)))
    board = client.get("/api/leaderboard").json()
    assert [row["bot"] for row in board] == [s["bot"] for s in summary["standings"]]
    assert board[0]["rank"] == 1 and board[0]["games"] == summary["standings"][0]["matches"]
    assert board[0]["conservative"] == summary["standings"][0]["mu_minus_3sigma"]

    matches = client.get("/api/matches").json()
    assert len(matches) == summary["matches_finished"] == 2
    assert {m["match_id"] for m in matches} == {Path(p).stem for p in summary["records"]}
    assert client.get("/api/matches", params={"table_size": 3}).json() == []
    assert len(client.get("/api/matches", params={"bot": "a", "limit": 1}).json()) == 1

    profile = client.get("/api/bots/a").json()
    assert profile["matches_finished"] == 2 and len(profile["history"]) == 2
    # the history ends at the rating the summary reports
    stand = next(s for s in summary["standings"] if s["bot"] == "a")
    assert profile["history"][-1]["mu"] == pytest.approx(stand["mu"], abs=1e-3)
    assert profile["by_table_size"][0]["table_size"] == 2
    assert client.get("/api/bots/nobody").status_code == 404

    for m in matches:
        record = json.loads((tournament_dir / "records" / f"{m['match_id']}.json").read_text())
        replay = client.get(f"/api/matches/{m['match_id']}/replay").json()
        _check_replay(replay, record)
    assert client.get("/api/matches/nope/replay").status_code == 404
    page = client.get("/")
    assert page.status_code == 200 and "/static/app.js" in page.text
    assert client.get("/static/app.js").status_code == 200


def test_ladder_api(ladder_repo: Any) -> None:
    from scout_arena.web import create_app
    from scout_ladder.web_source import LadderSource

    client = TestClient(create_app(LadderSource(ladder_repo)))
    board = client.get("/api/leaderboard").json()
    assert {row["bot"] for row in board} == {"alpha", "bravo", "charlie", "delta"}
    expected = {r.bot: r for r in ladder_repo.leaderboard()}
    for row in board:
        assert row["rank"] == expected[row["bot"]].rank
        assert row["mu"] == pytest.approx(expected[row["bot"]].mu, abs=1e-3)
        assert row["recent_ranks"] == list(expected[row["bot"]].recent_ranks)
    assert next(r for r in board if r["bot"] == "alpha")["games"] == 4

    alpha = client.get("/api/bots/alpha").json()
    assert alpha["owner"] == "ann" and len(alpha["history"]) == 4
    assert [s["table_size"] for s in alpha["by_table_size"]] == [2, 3, 4]
    assert [m["match_id"] for m in alpha["recent_matches"]] == [
        "m-0004",
        "m-0003",
        "m-0002",
        "m-0001",
    ]
    assert client.get("/api/bots/delta").json()["timeouts"] == 2

    assert len(client.get("/api/matches").json()) == 4
    assert [m["match_id"] for m in client.get("/api/matches", params={"bot": "delta"}).json()] == [
        "m-0004",
        "m-0003",
    ]
    assert [m["match_id"] for m in client.get("/api/matches", params={"table_size": 3}).json()] == [
        "m-0002"
    ]
    assert client.get("/api/matches", params={"table_size": "x"}).status_code == 400

    for match_id, _, _ in SEEDED:
        record = json.loads(ladder_repo.get_record(match_id))
        _check_replay(client.get(f"/api/matches/{match_id}/replay").json(), record)
    # 3+ players: Scout & Show tokens are shown and spent
    four = client.get("/api/matches/m-0003/replay").json()
    assert four["frames"][0]["tokens"] == [True] * 4


def _cards_in(obj: Any) -> list[list[int]]:
    """Every [face, other] pair anywhere in a JSON value."""
    if isinstance(obj, list):
        if len(obj) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in obj):
            return [obj]
        return [card for item in obj for card in _cards_in(item)]
    if isinstance(obj, dict):
        return [card for value in obj.values() for card in _cards_in(value)]
    return []


def _live_json(match_id: str, players: list[str], state: State) -> Any:
    from scout_arena.web import live_json

    return json.loads(json.dumps(live_json(match_id, players, spectator_view(state))))


def test_spectator_view_shows_no_hidden_card() -> None:
    from scout_arena.web import create_app

    state = State.new(4, 99)
    for _ in range(60):
        _play_until(state, 1)
        view = _live_json("m-live", ["a", "b", "c", "d"], state)
        current = {k: v for k, v in view.items() if k != "finished_rounds"}
        # of the round in play, only the active set's cards are visible; hands are sizes
        assert _cards_in(current) == [[c.face, c.other] for c in state.active_set]
        assert view["hand_sizes"] == [len(state.hand(s)) for s in range(4)]
        # a round's hands are shown once that round is over, as the engine revealed them
        assert [r["hands"] for r in view["finished_rounds"]] == [
            [[[c.face, c.other] for c in h] for h in r.hands] for r in state.round_results
        ]
        if state.is_over:
            break
    assert view["finished_rounds"], "the test should reach the end of a round"

    live = [_LiveMatch("m-live", ["a", "b", "c", "d"], state)]
    client = TestClient(create_app(_EmptySource(), live=lambda: live))
    assert client.get("/api/info").json()["live"] is True
    assert [m["match_id"] for m in client.get("/api/live").json()] == ["m-live"]
    got = client.get("/api/live/m-live").json()
    assert got == _live_json("m-live", ["a", "b", "c", "d"], state)
    assert client.get("/api/live/other").status_code == 404


class _RecordsSource(_EmptySource):
    def __init__(self, records: dict[str, Any]) -> None:
        self.records = records

    def get_record(self, match_id: str) -> Any:
        return self.records.get(match_id)


def test_replay_is_one_engine_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The frames are taken from the run that checks the record: the engine plays each recorded
    action once, and a record that fails its checks gets replay's own message."""
    from scout_arena.web import create_app

    bots = [make_bot("greedy", 3), make_bot("random", 4), make_bot("greedy", 5)]
    record = record_to_json(build_record(play_match(bots, 3), ["x", "y", "z"], match_id="m-1"))
    tampered = json.loads(json.dumps(record))
    tampered["totals"][0] += 1
    client = TestClient(create_app(_RecordsSource({"m-1": record, "m-bad": tampered})))
    applied = 0
    apply = State.apply

    def counting(state: State, action: Any) -> None:
        nonlocal applied
        applied += 1
        apply(state, action)

    monkeypatch.setattr(State, "apply", counting)
    replay = client.get("/api/matches/m-1/replay").json()
    assert applied == sum(len(r["actions"]) for r in record["rounds"])
    monkeypatch.undo()
    _check_replay(replay, record)
    bad = client.get("/api/matches/m-bad/replay")
    assert bad.status_code == 422
    assert bad.json()["error"].startswith("the record does not replay: record: totals ")


def test_nodes_api_shows_the_node_report_as_it_is_now() -> None:
    from datetime import UTC, datetime

    from scout_arena.web import create_app

    report = [
        _node("east", "10.0.0.1:7000", 3, 4, 1_700_000_000.5),
        _node("west", "10.0.0.2:7000", 0, 8, 1_700_000_100.0, decisions_per_s=0.0),
    ]
    calls = 0

    def nodes() -> list[dict[str, Any]]:
        nonlocal calls
        calls += 1
        return report

    client = TestClient(create_app(_EmptySource(), nodes=nodes))
    info = client.get("/api/info").json()
    assert info["nodes"] is True and info["live"] is False
    got = client.get("/api/nodes").json()
    assert calls == 1
    assert got == {
        "nodes": [
            {**n, "attached_at_iso": datetime.fromtimestamp(n["attached_at"], UTC).isoformat()}
            for n in report
        ]
    }
    assert got["nodes"][0]["attached_at_iso"] == "2023-11-14T22:13:20.500000+00:00"
    assert "attached_at_iso" not in report[0]  # the report itself is left as it was
    # every request reads the report afresh: a node that leaves is gone at once
    report = report[1:]
    assert [n["name"] for n in client.get("/api/nodes").json()["nodes"]] == ["west"]
    report = []
    assert client.get("/api/nodes").json() == {"nodes": []}
    assert calls == 3


def test_no_nodes_view_without_nodes() -> None:
    from scout_arena.web import create_app

    client = TestClient(create_app(_EmptySource()))
    assert client.get("/api/info").json()["nodes"] is False
    missing = client.get("/api/nodes")
    assert missing.status_code == 404 and "error" in missing.json()
    # the page has a Nodes link, hidden until /api/info says the view exists
    page = client.get("/").text
    assert '<a href="#/nodes" id="nav-nodes" hidden>Nodes</a>' in page
    script = client.get("/static/app.js").text
    assert 'api("/api/nodes")' in script and "info.nodes" in script
