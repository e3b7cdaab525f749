"""What the web tests share: a real tournament output directory, a seeded ladder database, the
engine's replay frames to check against, and a headless browser with its helpers."""

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
from scout_arena.record import action_from_json, build_record, record_to_json
from scout_rules import Card, Hand, SpectatorView, State, deal_match, spectator_view

from support.ports import free_port

with warnings.catch_warnings():
    # Starlette 1.x would rather use the httpx2 fork; plain httpx works the same here.
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient as TestClient


ROOT = Path(__file__).resolve().parents[2]


SCREENSHOTS = Path(
    os.environ.get("SCOUT_SCREENSHOTS")
    or Path(tempfile.gettempdir()) / f"scout-arena-screenshots-{os.getpid()}"
)


SCOUT_ARENA = Path(sys.executable).parent / "scout-arena"


@pytest.fixture(scope="module", name="tournament_dir")
def tournament_dir_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tournament") / "out"
    subprocess.run(
        [
            str(SCOUT_ARENA),
            "tournament",
            "--bot",
            "a=greedy",
            "--bot",
            "b=random",
            "--players",
            "2",
            "--games",
            "1",
            "--out",
            str(out),
            "--no-progress",
        ],
        check=True,
        capture_output=True,
        timeout=60,
        cwd=ROOT,
    )
    return out


SEEDED = [  # (match id, seed, bots by seat as (name, kind))
    ("m-0001", 11, [("alpha", "greedy"), ("bravo", "random")]),
    ("m-0002", 12, [("bravo", "random"), ("charlie", "greedy"), ("alpha", "greedy")]),
    (
        "m-0003",
        13,
        [("charlie", "greedy"), ("alpha", "greedy"), ("delta", "random"), ("bravo", "random")],
    ),
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
            match_id,
            json.dumps(record),
            [
                SeatResult(
                    seat, n, record["totals"][seat], ranks[seat], timeouts=1 if n == "delta" else 0
                )
                for seat, n in enumerate(names)
            ],
            {n: (ratings[n].mu, ratings[n].sigma) for n in names},
        )


def _new_ladder(path: Path, bots: list[tuple[str, str]]) -> Any:
    from scout_ladder.repository import Repository

    repo = Repository(f"sqlite:///{path}")
    repo.migrate()
    for name, owner in bots:
        repo.register_bot(name, owner)
    return repo


@pytest.fixture(scope="module", name="ladder_repo")
def ladder_repo_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A SQLite ladder with four bots and four finished, rated matches of real play."""
    repo = _new_ladder(
        tmp_path_factory.mktemp("ladder") / "ladder.db",
        [("alpha", "ann"), ("bravo", "bob"), ("charlie", "cid"), ("delta", "dee")],
    )
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
            out.append(
                {
                    "round": i,
                    "seat": item["seat"],
                    "hands": [[[c.face, c.other] for c in h] for h in hands],
                    "captured": None
                    if len(state.round_results) > i
                    else [len(c) for c in state.captured],
                }
            )
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


def _node(
    name: str, address: str, matches: int, capacity: int, attached_at: float, **load: Any
) -> dict[str, Any]:
    """One node as `Ladder.node_report` gives it."""
    return {
        "node_id": f"n-{name}",
        "name": name,
        "address": address,
        "version": "0.9.1",
        "capacity": capacity,
        "matches": matches,
        "running_matches": load.get("running_matches", matches),
        "connected_bots": load.get("connected_bots", 2 * matches),
        "decisions_per_s": load.get("decisions_per_s", 12.5),
        "rss_mb": load.get("rss_mb", 48.2),
        "cpu_s": load.get("cpu_s", 3.4),
        "heartbeat_age_s": load.get("heartbeat_age_s", 0.4),
        "attached_at": attached_at,
    }


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


@pytest.fixture(scope="module", name="ladder_site")
def ladder_site_fixture(ladder_repo: Any) -> Iterator[str]:
    with _serve(ladder_repo) as url:
        yield url


@pytest.fixture(scope="module", name="browser")
def browser_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    if not (os.path.exists(chromium) and os.path.exists(driver_path)):
        pytest.fail("chromium and chromedriver are needed: `make browser` installs them")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1300,1000",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    driver.set_page_load_timeout(20)
    yield driver
    driver.quit()


def _open(driver: Any, url: str, page: str) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    WebDriverWait(driver, 10).until(
        lambda d: (
            d.execute_script(
                "const v = document.getElementById('view');"
                "return v.getAttribute('data-ready') === '1' && v.getAttribute('data-page');"
            )
            == page
        )
    )


def _attrs(driver: Any, selector: str, attribute: str) -> list[str]:
    """Read one attribute of every matching element in a single script.

    The leaderboard and the match lists redraw themselves on a timer; reading
    element by element can meet a row that was replaced in between.
    """
    return list(
        driver.execute_script(
            "return [...document.querySelectorAll(arguments[0])]"
            ".map((e) => e.getAttribute(arguments[1]));",
            selector,
            attribute,
        )
    )


def _click(driver: Any, selector: str) -> None:
    """Click the element matching *selector* now, as found in the same script."""
    driver.execute_script("document.querySelector(arguments[0]).click();", selector)


def _shot(driver: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))
