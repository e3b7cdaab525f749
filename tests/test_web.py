"""The web pages and their JSON API (scout_arena.web, with the ladder's LadderSource).

(a) API tests through Starlette's TestClient, against a real tournament output directory and
against a seeded ladder database; every replay frame is checked against the engine's own
state after the same action. (b) Browser tests: the real pages in headless Chromium (Debian's
``chromium`` + ``chromedriver``, driven by Selenium), served by uvicorn on a free port. They
save a screenshot of each page in ``$SCOUT_SCREENSHOTS`` (``make screenshots`` points it at
docs/screenshots/), else in a temporary directory: a test run leaves the checkout as it was.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from scout_arena.local import make_bot, play_match
from scout_arena.record import action_from_json, build_record, describe_round, record_to_json
from scout_rules import Card, Hand, SpectatorView, State, deal_match, spectator_view
from support.ports import free_port

with warnings.catch_warnings():
    # Starlette 1.x would rather use the httpx2 fork; plain httpx works the same here.
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

ROOT = Path(__file__).resolve().parent.parent
SCREENSHOTS = Path(os.environ.get("SCOUT_SCREENSHOTS")
                   or Path(tempfile.gettempdir()) / f"scout-arena-screenshots-{os.getpid()}")
SCOUT_ARENA = Path(sys.executable).parent / "scout-arena"


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tournament_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tournament") / "out"
    subprocess.run(
        [str(SCOUT_ARENA), "tournament", "--bot", "a=greedy", "--bot", "b=random",
         "--players", "2", "--games", "1", "--out", str(out), "--no-progress"],
        check=True, capture_output=True, timeout=60, cwd=ROOT)
    return out


SEEDED = [  # (match id, seed, bots by seat as (name, kind))
    ("m-0001", 11, [("alpha", "greedy"), ("bravo", "random")]),
    ("m-0002", 12, [("bravo", "random"), ("charlie", "greedy"), ("alpha", "greedy")]),
    ("m-0003", 13, [("charlie", "greedy"), ("alpha", "greedy"), ("delta", "random"),
                    ("bravo", "random")]),
    ("m-0004", 14, [("delta", "random"), ("alpha", "greedy")]),
]


def _seed_ladder(repo: Any, matches: list[tuple[str, int, list[tuple[str, str]]]]) -> None:
    """Finish ``matches`` (id, seed, seats as (bot, "greedy"/"random")) as real in-process
    games, rated by TrueSkill from the ratings stored so far."""
    from scout_arena.ratings import Rating, make_env, rate_table
    from scout_ladder.repository import SeatResult

    env = make_env()
    ratings = {name: Rating(r.mu, r.sigma) for name, r in repo.ratings().items()}
    for match_id, seed, seats in matches:
        names = [name for name, _ in seats]
        bots = [make_bot(kind, seed + i) for i, (_, kind) in enumerate(seats)]
        record = record_to_json(build_record(play_match(bots, seed), names, match_id=match_id))
        repo.start_match(match_id, len(seats), seed, [(n, 1) for n in names], True)
        ranks = record["ranks"]
        after = rate_table(env, [ratings.get(n, Rating()) for n in names], ranks)
        ratings.update(zip(names, after, strict=True))
        repo.finish_match(
            match_id, json.dumps(record),
            [SeatResult(seat, n, record["totals"][seat], ranks[seat],
                        timeouts=1 if n == "delta" else 0) for seat, n in enumerate(names)],
            {n: (ratings[n].mu, ratings[n].sigma) for n in names})


def _new_ladder(path: Path, bots: list[tuple[str, str]]) -> Any:
    from scout_ladder.repository import Repository

    repo = Repository(f"sqlite:///{path}")
    repo.migrate()
    for name, owner in bots:
        repo.register_bot(name, owner)
    return repo


@pytest.fixture(scope="module")
def ladder_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A SQLite ladder with four bots and four finished, rated matches of real play."""
    repo = _new_ladder(tmp_path_factory.mktemp("ladder") / "ladder.db",
                       [("alpha", "ann"), ("bravo", "bob"), ("charlie", "cid"),
                        ("delta", "dee")])
    _seed_ladder(repo, SEEDED)
    yield repo
    repo.close()


def _engine_frames(record: dict[str, Any]) -> list[dict[str, Any]]:
    """What the table must show after each action, computed here from the engine alone:
    (round, seat, hands) with the hands as [face, other] pairs."""
    n = record["num_players"]
    state = State(n, deal_match(n, record["seed"]), record["seed"])
    out = []
    for i, entry in enumerate(record["rounds"]):
        for seat, rotate in enumerate(entry["rotations"]):
            state.choose_rotation(seat, rotate)
        for item in entry["actions"]:
            state.apply(action_from_json({k: v for k, v in item.items() if k != "seat"}))
            if len(state.round_results) > i:  # the action ended the round
                hands = state.round_results[i].hands
            else:
                hands = tuple(state.hand(s) for s in range(n))
            out.append({"round": i, "seat": item["seat"],
                        "hands": [[[c.face, c.other] for c in h] for h in hands],
                        "captured": None if len(state.round_results) > i
                        else [len(c) for c in state.captured]})
    return out


def _check_replay(replay: dict[str, Any], record: dict[str, Any]) -> None:
    frames = replay["frames"]
    assert replay["players"] == [p["name"] for p in record["players"]]
    actions = [f for f in frames if f["kind"] == "action"]
    expected = _engine_frames(record)
    assert len(actions) == len(expected) == sum(len(r["actions"]) for r in record["rounds"])
    for frame, want in zip(actions, expected, strict=True):
        assert frame["round"] == want["round"] and frame["seat"] == want["seat"]
        assert frame["hands"] == want["hands"]
        if want["captured"] is not None:
            assert frame["captured"] == want["captured"]
        assert frame["description"].startswith(f"{replay['players'][want['seat']]} ")
    # the rotation frame of every round shows the rotated hands and the choices
    rotations = [f for f in frames if f["kind"] == "rotation"]
    assert len(rotations) == len(record["rounds"])
    for frame, entry in zip(rotations, record["rounds"], strict=True):
        assert frame["rotations"] == entry["rotations"]
        for seat, dealt in enumerate(entry["dealt_hands"]):
            hand = Hand(Card(*c) for c in dealt)
            held = hand.rotated() if entry["rotations"][seat] else hand
            assert frame["hands"][seat] == [[c.face, c.other] for c in held]
    # round ends carry the recorded scores, and the last frame the final totals
    ends = [f["round_end"] for f in frames if f["round_end"] is not None]
    assert [e["scores"] for e in ends] == [r["scores"] for r in record["rounds"]]
    assert frames[-1]["scores"] == record["totals"]
    # scouts name the position the card went in, and it holds the scouted card
    for frame in actions:
        if frame["action"] and "scout" in frame["action"]:
            position = frame["action"]["scout"]["insert_at"]
            assert frame["inserted"] == {"seat": frame["seat"], "position": position}


# --- (a) the API ----------------------------------------------------------------------------


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
    assert {m["match_id"] for m in matches} == {
        Path(p).stem for p in summary["records"]}
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
    assert [m["match_id"] for m in alpha["recent_matches"]] == ["m-0004", "m-0003", "m-0002",
                                                                "m-0001"]
    assert client.get("/api/bots/delta").json()["timeouts"] == 2

    assert len(client.get("/api/matches").json()) == 4
    assert [m["match_id"] for m in client.get("/api/matches",
                                              params={"bot": "delta"}).json()] == [
        "m-0004", "m-0003"]
    assert [m["match_id"] for m in client.get("/api/matches",
                                              params={"table_size": 3}).json()] == ["m-0002"]
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


def _play_until(state: State, actions: int) -> None:
    rng = random.Random(state.num_players)
    done = 0
    while done < actions and not state.is_over:
        if state.pending_rotations():
            for seat in state.pending_rotations():
                state.choose_rotation(seat, bool(seat % 2))
            continue
        actor = state.current_seat
        assert actor is not None
        state.apply(rng.choice(state.legal_actions()))
        done += 1


@dataclass
class _LiveMatch:
    """A match in play as the referee offers it to the web app, over an in-process State."""

    match_id: str
    players: list[str]
    state: State

    def spectator_view(self) -> SpectatorView:
        return spectator_view(self.state)


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
            [[[c.face, c.other] for c in h] for h in r.hands] for r in state.round_results]
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


class _EmptySource:
    kind = "ladder"

    def leaderboard(self) -> list[Any]:
        return []

    def bot_profile(self, name: str) -> Any:
        return None

    def list_matches(self, bot: str | None, table_size: int | None, limit: int) -> list[Any]:
        return []

    def get_record(self, match_id: str) -> Any:
        return None


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


def _node(name: str, address: str, matches: int, capacity: int, attached_at: float,
          **load: Any) -> dict[str, Any]:
    """One node as `Ladder.node_report` gives it."""
    return {"node_id": f"n-{name}", "name": name, "address": address, "version": "0.9.1",
            "capacity": capacity, "matches": matches,
            "running_matches": load.get("running_matches", matches),
            "connected_bots": load.get("connected_bots", 2 * matches),
            "decisions_per_s": load.get("decisions_per_s", 12.5),
            "rss_mb": load.get("rss_mb", 48.2), "cpu_s": load.get("cpu_s", 3.4),
            "heartbeat_age_s": load.get("heartbeat_age_s", 0.4), "attached_at": attached_at}


def test_nodes_api_shows_the_node_report_as_it_is_now() -> None:
    from datetime import UTC, datetime

    from scout_arena.web import create_app

    report = [_node("east", "10.0.0.1:7000", 3, 4, 1_700_000_000.5),
              _node("west", "10.0.0.2:7000", 0, 8, 1_700_000_100.0, decisions_per_s=0.0)]
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
    assert got == {"nodes": [
        {**n, "attached_at_iso": datetime.fromtimestamp(n["attached_at"], UTC).isoformat()}
        for n in report]}
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


# --- (b) the pages in a real browser --------------------------------------------------------


@contextlib.contextmanager
def _serve(repo: Any, app: Any = None) -> Iterator[str]:
    from scout_arena.web import create_app, make_server
    from scout_ladder.web_source import LadderSource

    port = free_port()
    server = make_server(app or create_app(LadderSource(repo)), "127.0.0.1", port)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the web server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(5)


@pytest.fixture(scope="module")
def ladder_site(ladder_repo: Any) -> Iterator[str]:
    with _serve(ladder_repo) as url:
        yield url


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    if not (os.path.exists(chromium) and os.path.exists(driver_path)):
        pytest.fail("chromium and chromedriver are needed: `make browser` installs them")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1300,1000",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    driver.set_page_load_timeout(20)
    yield driver
    driver.quit()


def _open(driver: Any, url: str, page: str) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    WebDriverWait(driver, 10).until(
        lambda d: d.execute_script(
            "const v = document.getElementById('view');"
            "return v.getAttribute('data-ready') === '1' && v.getAttribute('data-page');")
        == page)


def _attrs(driver: Any, selector: str, attribute: str) -> list[str]:
    """Read one attribute of every matching element in a single script.

    The leaderboard and the match lists redraw themselves on a timer; reading
    element by element can meet a row that was replaced in between.
    """
    return list(driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])]"
        ".map((e) => e.getAttribute(arguments[1]));", selector, attribute))


def _click(driver: Any, selector: str) -> None:
    """Click the element matching *selector* now, as found in the same script."""
    driver.execute_script("document.querySelector(arguments[0]).click();", selector)


def _shot(driver: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))


def test_browser_leaderboard_and_profile(browser: Any, ladder_site: str,
                                         ladder_repo: Any) -> None:
    from selenium.webdriver.common.by import By

    _open(browser, f"{ladder_site}/#/", "leaderboard")
    shown = _attrs(browser, "#leaderboard tbody tr", "data-bot")
    assert shown == [r.bot for r in ladder_repo.leaderboard()]
    _shot(browser, "leaderboard")
    # clicking "Bot" sorts by name, clicking again reverses
    _click(browser, "th[data-key=bot]")
    names = _attrs(browser, "#leaderboard tbody tr", "data-bot")
    assert names == sorted(names)
    _click(browser, "th[data-key=bot]")
    names = _attrs(browser, "#leaderboard tbody tr", "data-bot")
    assert names == sorted(names, reverse=True)

    _open(browser, f"{ladder_site}/#/bot/alpha", "bot")
    chart = browser.find_element(By.CSS_SELECTOR, "#rating-chart")
    assert chart.find_elements(By.CSS_SELECTOR, "polyline.mu")
    assert chart.find_elements(By.CSS_SELECTOR, "polygon.band")
    sizes = [r.text.split()[0] for r in browser.find_elements(By.CSS_SELECTOR,
                                                               "#by-size tbody tr")]
    assert sizes == ["2", "3", "4"]
    _shot(browser, "bot-profile")

    _open(browser, f"{ladder_site}/#/matches?bot=delta", "matches")
    ids = _attrs(browser, "table.matches tbody tr", "data-match")
    assert ids == ["m-0004", "m-0003"]
    _shot(browser, "matches")


def test_browser_leaderboard_refreshes_itself(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    repo = _new_ladder(tmp_path / "fresh.db", [("alpha", "ann"), ("bravo", "bob"),
                                                ("echo", "eve")])
    try:
        _seed_ladder(repo, [("f-1", 21, [("alpha", "greedy"), ("bravo", "random")])])
        with _serve(repo) as url:
            _open(browser, f"{url}/#/", "leaderboard")

            def shown(driver: Any) -> list[str]:
                return _attrs(driver, "#leaderboard tbody tr", "data-bot")

            assert sorted(shown(browser)) == ["alpha", "bravo"]
            _seed_ladder(repo, [("f-2", 22, [("echo", "greedy"), ("bravo", "random")])])
            WebDriverWait(browser, 12).until(lambda d: "echo" in shown(d))
            assert shown(browser) == [r.bot for r in repo.leaderboard()]
    finally:
        repo.close()


def test_browser_replay_steps_through_a_match(browser: Any, ladder_site: str,
                                              ladder_repo: Any) -> None:
    from selenium.webdriver.common.by import By

    record = json.loads(ladder_repo.get_record("m-0003"))
    expected = _engine_frames(record)
    _open(browser, f"{ladder_site}/#/replay/m-0003", "replay")

    def hand(seat: int) -> list[list[int]]:
        cards = browser.find_elements(By.CSS_SELECTOR, f"#hand-{seat} .card")
        return [[int(c.get_attribute("data-face")), int(c.get_attribute("data-other"))]
                for c in cards]

    # frame 0 is the deal, 1 the rotation choices, then one frame per action of round 1
    dealt = record["rounds"][0]["dealt_hands"]
    assert hand(0) == dealt[0]
    nxt = browser.find_element(By.ID, "next")
    nxt.click()
    assert "rotated" in browser.find_element(By.ID, "caption").text \
        or "nobody rotated" in browser.find_element(By.ID, "caption").text
    steps = min(8, len(record["rounds"][0]["actions"]))
    for k in range(steps):
        nxt.click()
        assert browser.find_element(By.ID, "counter").text.startswith(f"step {k + 2} ")
        for seat in range(record["num_players"]):
            assert hand(seat) == expected[k]["hands"][seat], (k, seat)
        # both numbers are drawn on each card
        first = browser.find_element(By.CSS_SELECTOR, f"#hand-{expected[k]['seat']} .card")
        face, other = first.find_element(By.CSS_SELECTOR, ".face"), first.find_element(
            By.CSS_SELECTOR, ".other")
        assert face.text == first.get_attribute("data-face")
        assert other.text == first.get_attribute("data-other")
    _shot(browser, "replay")
    browser.find_element(By.ID, "prev").click()
    assert hand(0) == expected[steps - 2]["hands"][0]
    # the move list jumps; the last frame shows the final scores
    moves = browser.find_elements(By.CSS_SELECTOR, "#moves li")
    assert len(moves) == 2 * len(record["rounds"]) + len(expected)
    browser.find_element(By.ID, "last").click()
    scores = [int(e.text) for e in browser.find_elements(By.CSS_SELECTOR, ".seat .score")]
    assert scores == record["totals"]
    # play advances on its own
    browser.find_element(By.ID, "first").click()
    browser.find_element(By.ID, "play").click()
    time.sleep(1.6)
    browser.find_element(By.ID, "play").click()
    assert not browser.find_element(By.ID, "counter").text.startswith("step 0 ")


# --- the hooks: pages served by the ladder process and by `scout-arena web` -----------------


def test_ladder_serves_the_pages_in_its_own_loop(ladder_repo: Any) -> None:
    import asyncio

    import httpx
    from scout_ladder.service import Ladder, LadderConfig

    async def main() -> tuple[Any, Any]:
        ladder = Ladder(ladder_repo, LadderConfig(port=0, web_port=0))
        await ladder.start()
        try:
            assert ladder.web_address is not None
            async with httpx.AsyncClient(base_url=f"http://{ladder.web_address}") as client:
                board = (await client.get("/api/leaderboard")).json()
                replay = (await client.get("/api/matches/m-0001/replay")).json()
        finally:
            await ladder.stop()
        return board, replay

    board, replay = asyncio.run(main())
    assert {row["bot"] for row in board} == {"alpha", "bravo", "charlie", "delta"}
    assert replay["players"] == ["alpha", "bravo"]


def test_ladder_on_nodes_serves_its_node_report(ladder_repo: Any) -> None:
    import asyncio

    import httpx
    from scout.v1 import nodes_pb2
    from scout_ladder.nodes import NodeSession
    from scout_ladder.service import Ladder, LadderConfig

    async def fetch(config: LadderConfig) -> tuple[Any, Any]:
        ladder = Ladder(ladder_repo, config)
        await ladder.start()
        try:
            assert ladder.web_address is not None
            async with httpx.AsyncClient(base_url=f"http://{ladder.web_address}") as client:
                info = (await client.get("/api/info")).json()
                got = await client.get("/api/nodes")
                if ladder.nodes is not None:
                    assert got.json() == {"nodes": []}
                    # a node attached (full, so the scheduler leaves it alone)
                    ladder.nodes.nodes["10.1.1.1:7000"] = NodeSession(
                        "n-1", "10.1.1.1:7000", "rack-1", 2, "0.9.1", False, time.time(),
                        matches={"x-1", "x-2"}, last_heartbeat=time.monotonic(),
                        heartbeat=nodes_pb2.NodeHeartbeat(
                            running_matches=2, connected_bots=5, rss_bytes=64 * 2**20,
                            cpu_seconds=7.25))
                    report = ladder.node_report()
                    got = await client.get("/api/nodes")
                    return info, (report, got.json())
                return info, got.status_code
        finally:
            await ladder.stop()

    info, status = asyncio.run(fetch(LadderConfig(port=0, web_port=0)))
    assert info["nodes"] is False and status == 404
    info, (report, got) = asyncio.run(fetch(LadderConfig(port=0, web_port=0,
                                                         node_token="secret")))
    assert info["nodes"] is True
    [node] = got["nodes"]
    assert {k: v for k, v in node.items() if k not in ("attached_at_iso", "heartbeat_age_s")} \
        == {k: v for k, v in report[0].items() if k != "heartbeat_age_s"}
    assert (node["name"], node["matches"], node["capacity"], node["connected_bots"],
            node["rss_mb"], node["cpu_s"]) == ("rack-1", 2, 2, 5, 64.0, 7.2)
    assert 0 <= node["heartbeat_age_s"] < 5 and node["attached_at_iso"].endswith("+00:00")


def test_cli_serves_a_tournament_dir(tournament_dir: Path) -> None:
    import httpx

    port = free_port()
    process = subprocess.Popen([str(SCOUT_ARENA), "web", str(tournament_dir), "--port",
                                str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                board = httpx.get(f"http://127.0.0.1:{port}/api/leaderboard").json()
                break
            except httpx.TransportError:
                assert process.poll() is None, process.stdout and process.stdout.read()
                assert time.monotonic() < deadline, "scout-arena web did not start"
                time.sleep(0.1)
        assert [row["bot"] for row in board] == [
            s["bot"] for s in json.loads((tournament_dir / "summary.json").read_text())[
                "standings"]]
    finally:
        process.terminate()
        process.wait(10)


def test_browser_live_page_hides_hands(browser: Any) -> None:
    from scout_arena.web import create_app
    from selenium.webdriver.common.by import By

    state = State.new(3, 5)
    _play_until(state, 4)
    live = [_LiveMatch("m-live", ["alpha", "bravo", "charlie"], state)]
    with _serve(None, create_app(_EmptySource(), live=lambda: live)) as url:
        _open(browser, f"{url}/#/live", "live")
        assert browser.find_element(By.CSS_SELECTOR, "#live-list a").text == "m-live"
        _open(browser, f"{url}/#/live/m-live", "live")
        for seat in range(3):
            backs = browser.find_elements(By.CSS_SELECTOR, f"#hand-{seat} .card")
            assert len(backs) == len(state.hand(seat))
            assert all(b.get_attribute("data-face") is None for b in backs)
        faces = [[int(c.get_attribute("data-face")), int(c.get_attribute("data-other"))]
                 for c in browser.find_elements(By.CSS_SELECTOR, ".card[data-face]")]
        assert faces == [[c.face, c.other] for c in state.active_set]
        # the moves read as in the replay viewer, seats called by their bots' names
        moves = [m.text for m in browser.find_elements(By.CSS_SELECTOR, ".movebox li")]
        assert moves and moves == describe_round(state.history, ["alpha", "bravo", "charlie"])
        assert all(m.split(" ")[0] in ("alpha", "bravo", "charlie") for m in moves)
        _shot(browser, "live")


def test_browser_nodes_page_shows_the_load(browser: Any) -> None:
    from scout_arena.web import create_app
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    now = time.time()
    report = [_node("east", "10.0.0.1:7000", 3, 4, now - 3600, decisions_per_s=41.3),
              _node("west", "10.0.0.2:7000", 0, 8, now - 60, rss_mb=31.0)]
    with _serve(None, create_app(_EmptySource(), title="Scout Arena ladder",
                                 nodes=lambda: report)) as url:
        _open(browser, f"{url}/#/nodes", "nodes")
        assert browser.find_element(By.ID, "nav-nodes").is_displayed()
        assert not browser.find_element(By.ID, "nav-live").is_displayed()

        def rows(driver: Any) -> list[dict[str, str]]:
            # read in one script: the table is redrawn every 2 s
            return list(driver.execute_script(
                "return [...document.querySelectorAll('#nodes tbody tr')].map((r) =>"
                " Object.fromEntries([...r.cells].map((c) =>"
                " [c.className.replace(/^col-/, ''), c.innerText.trim()])));"))

        east, west = rows(browser)
        assert (east["name"], east["address"], east["version"], east["load"]) == (
            "east", "10.0.0.1:7000", "0.9.1", "3 / 4")
        assert (east["running_matches"], east["connected_bots"], east["decisions_per_s"],
                east["rss_mb"], east["cpu_s"], east["heartbeat_age_s"]) == (
            "3", "6", "41.3", "48.2", "3.4", "0.4 s ago")
        assert (west["load"], west["rss_mb"], west["decisions_per_s"]) == ("0 / 8", "31.0",
                                                                          "12.5")
        assert browser.execute_script(
            "return [...document.querySelectorAll('#nodes .load-fill')]"
            ".map((b) => b.style.width);") == ["75%", "0%"]
        assert "3 / 12" in browser.find_element(By.ID, "nodes-summary").text
        _shot(browser, "nodes")
        # the page follows the report by itself: a node leaves, the other fills up
        report[:] = [_node("east", "10.0.0.1:7000", 4, 4, now - 3600, heartbeat_age_s=1.2)]
        WebDriverWait(browser, 8).until(lambda d: len(rows(d)) == 1)
        [east] = rows(browser)
        assert (east["load"], east["heartbeat_age_s"]) == ("4 / 4", "1.2 s ago")
        assert browser.find_elements(By.CSS_SELECTOR, "#nodes .load-bar.full")
        report.clear()
        WebDriverWait(browser, 8).until(
            lambda d: "No referee node" in d.find_element(By.ID, "nodes").text)


def test_browser_match_list_links_every_id_by_its_state(browser: Any, tmp_path: Path) -> None:
    """A finished match's id opens its replay, a running one's its live view (the same id
    from start to end); a void match says why, and no raw status is shown."""
    from scout_arena.web import create_app
    from scout_ladder.web_source import LadderSource
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    repo = _new_ladder(tmp_path / "list.db", [("alpha", "ann"), ("bravo", "bob")])
    try:
        _seed_ladder(repo, [("m-00000000000000f1", 31, [("alpha", "greedy"),
                                                        ("bravo", "random")])])
        running, void = "m-00000000000000a2", "m-00000000000000c3"
        for match_id in (running, void):
            repo.start_match(match_id, 2, 7, [("alpha", 1), ("bravo", 1)], True)
        repo.void_match(void, "the ladder was stopped")
        state = State.new(2, 7)
        _play_until(state, 3)
        live = [_LiveMatch(running, ["alpha", "bravo"], state)]
        with _serve(repo, create_app(LadderSource(repo), live=lambda: live)) as url:
            _open(browser, f"{url}/#/matches", "matches")
            rows = browser.execute_script(
                "return Object.fromEntries([...document.querySelectorAll("
                "'table.matches tbody tr')].map((r) => [r.dataset.match, {"
                " id: r.querySelector('.col-id a')?.getAttribute('href') ?? null,"
                " when: r.querySelector('.col-when').innerText,"
                " state: r.querySelector('.col-state').innerText,"
                " link: r.querySelector('.col-state a')?.getAttribute('href') ?? null}]));")
            assert rows["m-00000000000000f1"]["id"] == "#/replay/m-00000000000000f1"
            assert rows["m-00000000000000f1"]["state"] == "replay ▸"
            assert rows[running] == {"id": f"#/live/{running}", "when": "playing now",
                                     "state": "watch live ▸", "link": f"#/live/{running}"}
            assert rows[void] == {"id": None, "when": "\u2013", "link": None,
                                  "state": "void: the ladder was stopped"}
            assert "in_flight" not in browser.find_element(By.ID, "view").text
            _click(browser, f"tr[data-match='{running}'] .col-id a")
            _open(browser, f"{url}/#/live/{running}", "live")
            assert len(browser.find_elements(By.CSS_SELECTOR, "#hand-0 .card")) == len(
                state.hand(0))
            # a match not played here has no live view; a finished one points to its replay
            _open(browser, f"{url}/#/live/{void}", "live")
            WebDriverWait(browser, 10).until(
                lambda d: d.find_elements(By.ID, "live-elsewhere"))
            _open(browser, f"{url}/#/live/m-00000000000000f1", "live")
            WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.ID, "live-over"))
    finally:
        repo.close()


def test_tournament_pages_show_what_its_terminal_shows(tournament_dir: Path,
                                                       tmp_path: Path) -> None:
    """Win share, mean score with its interval, mean rank and the head-to-head table, from
    summary.json once the tournament has ended, and computed alike from the records before."""
    from scout_arena.web import TournamentSource, create_app

    summary = json.loads((tournament_dir / "summary.json").read_text())
    client = TestClient(create_app(TournamentSource(tournament_dir)))
    assert client.get("/api/info").json()["crosstable"] is True
    fields = ("win_rate", "mean_score", "mean_score_ci95", "mean_rank", "timeouts",
              "illegal_actions", "forfeits")
    board = client.get("/api/leaderboard").json()
    for row, stand in zip(board, summary["standings"], strict=True):
        assert {k: row[k] for k in fields} == {k: stand[k] for k in fields}
        assert row["owner"] is None and row["command"] == stand["command"]
        assert len(row["recent_table_sizes"]) == len(row["recent_ranks"]) == 2
    cross = client.get("/api/crosstable").json()
    assert cross == {"bots": [s["bot"] for s in summary["standings"]],
                     "shares": summary["head_to_head"]}
    assert client.get("/api/bots/a").json()["command"] == "greedy"

    running = tmp_path / "running"  # the same records, before the summary is written
    shutil.copytree(tournament_dir / "records", running / "records")
    early = TestClient(create_app(TournamentSource(running)))
    for row, stand in zip(early.get("/api/leaderboard").json(), summary["standings"],
                          strict=True):
        assert row["bot"] == stand["bot"]
        assert {k: row[k] for k in fields} == {k: stand[k] for k in fields}
    assert early.get("/api/crosstable").json() == cross

    ladder = TestClient(create_app(_EmptySource()))
    assert ladder.get("/api/info").json()["crosstable"] is False
    assert ladder.get("/api/crosstable").status_code == 404
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg")
    assert 'rel="icon" href="/static/favicon.svg"' in client.get("/").text


def test_browser_tournament_board_crosstable_and_unknown_bot(browser: Any,
                                                            tournament_dir: Path) -> None:
    from scout_arena.web import TournamentSource, create_app
    from selenium.webdriver.common.by import By

    summary = json.loads((tournament_dir / "summary.json").read_text())
    with _serve(None, create_app(TournamentSource(tournament_dir))) as url:
        _open(browser, f"{url}/#/", "leaderboard")
        rows = browser.execute_script(
            "return [...document.querySelectorAll('#leaderboard tbody tr')].map((r) =>"
            " Object.fromEntries([...r.cells].map((c) =>"
            " [c.className.replace(/^col-/, ''), c.innerText.trim()])));")
        heads = _attrs(browser, "#leaderboard th", "data-key")
        assert "owner" not in heads and "command" in heads and "win_rate" in heads
        for row, stand in zip(rows, summary["standings"], strict=True):
            assert row["bot"] == stand["bot"] and row["command"] == stand["command"]
            assert row["win_rate"] == f"{100 * stand['win_rate']:.1f}%"
            assert row["mean_score"] == (f"{stand['mean_score']:+.2f} ± "
                                         f"{stand['mean_score_ci95']:.2f}")
            assert row["mean_rank"] == f"{stand['mean_rank']:.2f}"
        cells = browser.execute_script(
            "return [...document.querySelectorAll('#crosstable tbody tr')].map((r) =>"
            " [r.dataset.bot, [...r.querySelectorAll('td')].map((c) =>"
            " [c.dataset.vs, c.innerText])]);")
        for bot, shares in cells:
            for other, text in shares:
                share = summary["head_to_head"][bot].get(other)
                assert text == ("\u2013" if share is None else f"{100 * share:.0f}%"), (bot, other)
        _shot(browser, "tournament-board")
        # recent form is coloured by the place relative to the table: of 2, 1st green, 2nd red
        colours = browser.execute_script(
            "return [...document.querySelectorAll('.form .rank')].map((b) =>"
            " [b.innerText, getComputedStyle(b).backgroundColor]);")
        assert len(colours) == 4 and {tuple(c) for c in colours} <= {
            ("1", "rgb(42, 138, 74)"), ("2", "rgb(176, 48, 48)")}
        assert browser.execute_script(
            "return document.querySelector('link[rel=icon]').href").endswith("favicon.svg")
        _open(browser, f"{url}/#/bot/nobody", "bot")
        page = browser.find_element(By.ID, "not-found")
        assert "No such bot" in page.text and "“nobody”" in page.text
        assert page.find_element(By.CSS_SELECTOR, "a[href='#/']")
        _open(browser, f"{url}/#/bot/a", "bot")
        assert browser.find_element(By.ID, "command").text == "Command: greedy"


def test_browser_recent_form_is_coloured_by_place_in_the_table(browser: Any, ladder_site: str,
                                                                ladder_repo: Any) -> None:
    _open(browser, f"{ladder_site}/#/", "leaderboard")
    shown = browser.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('#leaderboard tbody tr')]"
        ".map((r) => [r.dataset.bot, [...r.querySelectorAll('.form .rank')].map((b) =>"
        " [b.className, b.title])]));")
    seen = set()
    for row in ladder_repo.leaderboard():
        want = []
        for rank, size in zip(row.recent_ranks, row.recent_table_sizes, strict=True):
            level = 1 + round(4 * (rank - 1) / (size - 1))
            want.append([f"rank rank-{level}", f"rank {rank} of {size}"])
            seen.add((rank, size, level))
        assert shown[row.bot] == want, row.bot
    # a last place is red whatever the table size, a first place green
    assert {(2, 2, 5), (1, 2, 1)} <= seen or {(4, 4, 5), (1, 4, 1)} <= seen, seen
