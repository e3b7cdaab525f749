"""The web pages in a real browser: headless Chromium (Debian's ``chromium`` + ``chromedriver``,
driven by Selenium), served by uvicorn on a free port. They save a screenshot of each page in
``$SCOUT_SCREENSHOTS`` (``make screenshots`` points it at docs/screenshots/), else in a
temporary directory: a test run leaves the checkout as it was."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from scout_arena.record import describe_round
from scout_rules import State
from support.web_site import (  # noqa: F401  (the *_fixture names: pytest fixtures)
    TestClient,
    _attrs,
    _click,
    _EmptySource,
    _engine_frames,
    _LiveMatch,
    _new_ladder,
    _node,
    _open,
    _play_until,
    _seed_ladder,
    _serve,
    _shot,
    browser_fixture,
    ladder_repo_fixture,
    ladder_site_fixture,
    tournament_dir_fixture,
)


def test_browser_leaderboard_and_profile(browser: Any, ladder_site: str, ladder_repo: Any) -> None:
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
    sizes = [r.text.split()[0] for r in browser.find_elements(By.CSS_SELECTOR, "#by-size tbody tr")]
    assert sizes == ["2", "3", "4"]
    _shot(browser, "bot-profile")

    _open(browser, f"{ladder_site}/#/matches?bot=delta", "matches")
    ids = _attrs(browser, "table.matches tbody tr", "data-match")
    assert ids == ["m-0004", "m-0003"]
    _shot(browser, "matches")


def test_browser_leaderboard_refreshes_itself(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    repo = _new_ladder(tmp_path / "fresh.db", [("alpha", "ann"), ("bravo", "bob"), ("echo", "eve")])
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


def test_browser_replay_steps_through_a_match(
    browser: Any, ladder_site: str, ladder_repo: Any
) -> None:
    from selenium.webdriver.common.by import By

    record = json.loads(ladder_repo.get_record("m-0003"))
    expected = _engine_frames(record)
    _open(browser, f"{ladder_site}/#/replay/m-0003", "replay")

    def hand(seat: int) -> list[list[int]]:
        cards = browser.find_elements(By.CSS_SELECTOR, f"#hand-{seat} .card")
        return [
            [int(c.get_attribute("data-face")), int(c.get_attribute("data-other"))] for c in cards
        ]

    # frame 0 is the deal, 1 the rotation choices, then one frame per action of round 1
    dealt = record["rounds"][0]["dealt_hands"]
    assert hand(0) == dealt[0]
    nxt = browser.find_element(By.ID, "next")
    nxt.click()
    assert (
        "rotated" in browser.find_element(By.ID, "caption").text
        or "nobody rotated" in browser.find_element(By.ID, "caption").text
    )
    steps = min(8, len(record["rounds"][0]["actions"]))
    for k in range(steps):
        nxt.click()
        assert browser.find_element(By.ID, "counter").text.startswith(f"step {k + 2} ")
        for seat in range(record["num_players"]):
            assert hand(seat) == expected[k]["hands"][seat], (k, seat)
        # both numbers are drawn on each card
        first = browser.find_element(By.CSS_SELECTOR, f"#hand-{expected[k]['seat']} .card")
        face, other = (
            first.find_element(By.CSS_SELECTOR, ".face"),
            first.find_element(By.CSS_SELECTOR, ".other"),
        )
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
        faces = [
            [int(c.get_attribute("data-face")), int(c.get_attribute("data-other"))]
            for c in browser.find_elements(By.CSS_SELECTOR, ".card[data-face]")
        ]
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
    report = [
        _node("east", "10.0.0.1:7000", 3, 4, now - 3600, decisions_per_s=41.3),
        _node("west", "10.0.0.2:7000", 0, 8, now - 60, rss_mb=31.0),
    ]
    with _serve(
        None, create_app(_EmptySource(), title="Scout Arena ladder", nodes=lambda: report)
    ) as url:
        _open(browser, f"{url}/#/nodes", "nodes")
        assert browser.find_element(By.ID, "nav-nodes").is_displayed()
        assert not browser.find_element(By.ID, "nav-live").is_displayed()

        def rows(driver: Any) -> list[dict[str, str]]:
            # read in one script: the table is redrawn every 2 s
            return list(
                driver.execute_script(
                    "return [...document.querySelectorAll('#nodes tbody tr')].map((r) =>"
                    " Object.fromEntries([...r.cells].map((c) =>"
                    " [c.className.replace(/^col-/, ''), c.innerText.trim()])));"
                )
            )

        east, west = rows(browser)
        assert (east["name"], east["address"], east["version"], east["load"]) == (
            "east",
            "10.0.0.1:7000",
            "0.9.1",
            "3 / 4",
        )
        assert (
            east["running_matches"],
            east["connected_bots"],
            east["decisions_per_s"],
            east["rss_mb"],
            east["cpu_s"],
            east["heartbeat_age_s"],
        ) == ("3", "6", "41.3", "48.2", "3.4", "0.4 s ago")
        assert (west["load"], west["rss_mb"], west["decisions_per_s"]) == ("0 / 8", "31.0", "12.5")
        assert browser.execute_script(
            "return [...document.querySelectorAll('#nodes .load-fill')].map((b) => b.style.width);"
        ) == ["75%", "0%"]
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
            lambda d: "No referee node" in d.find_element(By.ID, "nodes").text
        )


def test_browser_match_list_links_every_id_by_its_state(browser: Any, tmp_path: Path) -> None:
    """A finished match's id opens its replay, a running one's its live view (the same id
    from start to end); a void match says why, and no raw status is shown."""
    from scout_arena.web import create_app
    from scout_ladder.web_source import LadderSource
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    repo = _new_ladder(tmp_path / "list.db", [("alpha", "ann"), ("bravo", "bob")])
    try:
        _seed_ladder(repo, [("m-00000000000000f1", 31, [("alpha", "greedy"), ("bravo", "random")])])
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
                " link: r.querySelector('.col-state a')?.getAttribute('href') ?? null}]));"
            )
            assert rows["m-00000000000000f1"]["id"] == "#/replay/m-00000000000000f1"
            assert rows["m-00000000000000f1"]["state"] == "replay ▸"
            assert rows[running] == {
                "id": f"#/live/{running}",
                "when": "playing now",
                "state": "watch live ▸",
                "link": f"#/live/{running}",
            }
            assert rows[void] == {
                "id": None,
                "when": "\u2013",
                "link": None,
                "state": "void: the ladder was stopped",
            }
            assert "in_flight" not in browser.find_element(By.ID, "view").text
            _click(browser, f"tr[data-match='{running}'] .col-id a")
            _open(browser, f"{url}/#/live/{running}", "live")
            assert len(browser.find_elements(By.CSS_SELECTOR, "#hand-0 .card")) == len(
                state.hand(0)
            )
            # a match not played here has no live view; a finished one points to its replay
            _open(browser, f"{url}/#/live/{void}", "live")
            WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.ID, "live-elsewhere"))
            _open(browser, f"{url}/#/live/m-00000000000000f1", "live")
            WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.ID, "live-over"))
    finally:
        repo.close()


def test_tournament_pages_show_what_its_terminal_shows(
    tournament_dir: Path, tmp_path: Path
) -> None:
    """Win share, mean score with its interval, mean rank and the head-to-head table, from
    summary.json once the tournament has ended, and computed alike from the records before."""
    from scout_arena.web import TournamentSource, create_app

    summary = json.loads((tournament_dir / "summary.json").read_text())
    client = TestClient(create_app(TournamentSource(tournament_dir)))
    assert client.get("/api/info").json()["crosstable"] is True
    fields = (
        "win_rate",
        "mean_score",
        "mean_score_ci95",
        "mean_rank",
        "timeouts",
        "illegal_actions",
        "forfeits",
    )
    board = client.get("/api/leaderboard").json()
    for row, stand in zip(board, summary["standings"], strict=True):
        assert {k: row[k] for k in fields} == {k: stand[k] for k in fields}
        assert row["owner"] is None and row["command"] == stand["command"]
        assert len(row["recent_table_sizes"]) == len(row["recent_ranks"]) == 2
    cross = client.get("/api/crosstable").json()
    assert cross == {
        "bots": [s["bot"] for s in summary["standings"]],
        "shares": summary["head_to_head"],
    }
    assert client.get("/api/bots/a").json()["command"] == "greedy"

    running = tmp_path / "running"  # the same records, before the summary is written
    shutil.copytree(tournament_dir / "records", running / "records")
    early = TestClient(create_app(TournamentSource(running)))
    for row, stand in zip(early.get("/api/leaderboard").json(), summary["standings"], strict=True):
        assert row["bot"] == stand["bot"]
        assert {k: row[k] for k in fields} == {k: stand[k] for k in fields}
    assert early.get("/api/crosstable").json() == cross

    ladder = TestClient(create_app(_EmptySource()))
    assert ladder.get("/api/info").json()["crosstable"] is False
    assert ladder.get("/api/crosstable").status_code == 404
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg")
    assert 'rel="icon" href="/static/favicon.svg"' in client.get("/").text


def test_browser_tournament_board_crosstable_and_unknown_bot(
    browser: Any, tournament_dir: Path
) -> None:
    from scout_arena.web import TournamentSource, create_app
    from selenium.webdriver.common.by import By

    summary = json.loads((tournament_dir / "summary.json").read_text())
    with _serve(None, create_app(TournamentSource(tournament_dir))) as url:
        _open(browser, f"{url}/#/", "leaderboard")
        rows = browser.execute_script(
            "return [...document.querySelectorAll('#leaderboard tbody tr')].map((r) =>"
            " Object.fromEntries([...r.cells].map((c) =>"
            " [c.className.replace(/^col-/, ''), c.innerText.trim()])));"
        )
        heads = _attrs(browser, "#leaderboard th", "data-key")
        assert "owner" not in heads and "command" in heads and "win_rate" in heads
        for row, stand in zip(rows, summary["standings"], strict=True):
            assert row["bot"] == stand["bot"] and row["command"] == stand["command"]
            assert row["win_rate"] == f"{100 * stand['win_rate']:.1f}%"
            assert row["mean_score"] == (
                f"{stand['mean_score']:+.2f} ± {stand['mean_score_ci95']:.2f}"
            )
            assert row["mean_rank"] == f"{stand['mean_rank']:.2f}"
        cells = browser.execute_script(
            "return [...document.querySelectorAll('#crosstable tbody tr')].map((r) =>"
            " [r.dataset.bot, [...r.querySelectorAll('td')].map((c) =>"
            " [c.dataset.vs, c.innerText])]);"
        )
        for bot, shares in cells:
            for other, text in shares:
                share = summary["head_to_head"][bot].get(other)
                assert text == ("\u2013" if share is None else f"{100 * share:.0f}%"), (bot, other)
        _shot(browser, "tournament-board")
        # recent form is coloured by the place relative to the table: of 2, 1st green, 2nd red
        colours = browser.execute_script(
            "return [...document.querySelectorAll('.form .rank')].map((b) =>"
            " [b.innerText, getComputedStyle(b).backgroundColor]);"
        )
        assert len(colours) == 4 and {tuple(c) for c in colours} <= {
            ("1", "rgb(42, 138, 74)"),
            ("2", "rgb(176, 48, 48)"),
        }
        assert browser.execute_script(
            "return document.querySelector('link[rel=icon]').href"
        ).endswith("favicon.svg")
        _open(browser, f"{url}/#/bot/nobody", "bot")
        page = browser.find_element(By.ID, "not-found")
        assert "No such bot" in page.text and "“nobody”" in page.text
        assert page.find_element(By.CSS_SELECTOR, "a[href='#/']")
        _open(browser, f"{url}/#/bot/a", "bot")
        assert browser.find_element(By.ID, "command").text == "Command: greedy"


def test_browser_recent_form_is_coloured_by_place_in_the_table(
    browser: Any, ladder_site: str, ladder_repo: Any
) -> None:
    _open(browser, f"{ladder_site}/#/", "leaderboard")
    shown = browser.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('#leaderboard tbody tr')]"
        ".map((r) => [r.dataset.bot, [...r.querySelectorAll('.form .rank')].map((b) =>"
        " [b.className, b.title])]));"
    )
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
