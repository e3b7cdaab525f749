"""Local tournaments: schedule, standings, and real bot subprocesses that misbehave."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from scout_arena.record import MatchOutcome, SeatStats, read_record_json, replay
from scout_arena.tournament import (
    BotSpec,
    TournamentConfig,
    compute_standings,
    schedule,
)
from scout_rules import deal_match

RAWBOT = Path(__file__).parent / "bots" / "rawbot.py"
CLI = [sys.executable, "-m", "scout_arena.cli", "tournament", "--no-progress"]


def raw(mode: str) -> str:
    return f"{sys.executable} {RAWBOT} {mode}"


def config(*names: str, **kw: Any) -> TournamentConfig:
    return TournamentConfig(tuple(BotSpec(n, "greedy") for n in names), **kw)


def test_round_robin_schedule_seats_every_lineup_in_every_rotation() -> None:
    items = schedule(config("a", "b", "c", "d", players=3, games=2))
    lineups = Counter(frozenset(m.seats) for m in items)
    assert set(lineups) == {frozenset(t) for t in itertools.combinations("abcd", 3)}
    assert all(count == 2 * 3 for count in lineups.values())
    assert len({m.key for m in items}) == len(items)


def test_duplicate_deals_give_every_bot_of_the_table_every_hand() -> None:
    items = schedule(config("a", "b", "c", "d", players=4, games=3))
    by_seed: dict[int, list[tuple[str, ...]]] = {}
    for m in items:
        by_seed.setdefault(m.seed, []).append(m.seats)
    assert len(by_seed) == 3
    for seatings in by_seed.values():
        for seat in range(4):
            assert sorted(s[seat] for s in seatings) == ["a", "b", "c", "d"]


def test_without_duplicate_deals_each_deal_is_played_once() -> None:
    items = schedule(config("a", "b", "c", players=2, games=4, duplicate=False))
    assert len(items) == 3 * 4
    assert len({m.seed for m in items}) == len(items)


def test_gauntlet_puts_the_candidate_at_every_table_against_every_field_lineup() -> None:
    items = schedule(config("new", "x", "y", "z", players=3, games=1, gauntlet="new"))
    assert all("new" in m.seats for m in items)
    assert {frozenset(m.seats) - {"new"} for m in items} == {
        frozenset(p) for p in itertools.combinations("xyz", 2)}


def test_schedule_is_a_pure_function_of_the_configuration() -> None:
    assert schedule(config("a", "b", "c", seed=5)) == schedule(config("a", "b", "c", seed=5))
    assert schedule(config("a", "b", seed=5)) != schedule(config("a", "b", seed=6))


def _record(names: list[str], totals: list[int], ranks: list[int],
            forfeits: list[int] | None = None) -> MatchOutcome:
    gone = set(forfeits or [])
    return MatchOutcome(None, tuple(names), tuple(totals), tuple(ranks), frozenset(gone),
                        tuple(SeatStats(timeouts=int(i in gone), forfeited=i in gone)
                              for i in range(len(names))))


def test_standings_count_shared_wins_as_shares_and_head_to_head_as_finishing_ahead() -> None:
    records = [
        _record(["a", "b", "c"], [10, 10, -5], [1, 1, 3]),
        _record(["b", "c", "a"], [3, 4, 5], [3, 2, 1]),
        _record(["c", "a", "b"], [9, -1, 0], [3, 1, 2], forfeits=[0]),
    ]
    stats, share = compute_standings(records, ["a", "b", "c"])
    assert stats["a"].wins == 0.5 + 1 + 1
    assert stats["b"].wins == 0.5
    assert stats["a"].scores == [10, 5, -1]
    assert stats["c"].forfeits == 1 and stats["c"].timeouts == 1
    assert share["a"]["b"] == (0.5 + 1 + 1) / 3
    assert share["b"]["a"] == (0.5 + 0 + 0) / 3
    assert stats["a"].mu > stats["b"].mu > stats["c"].mu
    mean, half = stats["a"].mean_score_ci()
    assert mean == (10 + 5 - 1) / 3 and half > 0


def _run(args: list[str], out: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args, "--out", str(out)], capture_output=True, text=True,
                          timeout=timeout)


def _records(out: Path) -> list[dict[str, Any]]:
    return [read_record_json(p) for p in sorted((out / "records").glob("*.json"))]


def test_crashing_hanging_illegal_and_absent_bots_forfeit_and_the_tournament_goes_on(
        tmp_path: Path) -> None:
    out = tmp_path / "t"
    result = _run(["--bot", "good=greedy", "--bot", f"hang={raw('hang')}",
                   "--bot", f"illegal={raw('illegal')}", "--bot", f"crash={raw('crash')}",
                   "--bot", "ghost=/bin/sleep 60", "--players", "3", "--games", "1",
                   "--concurrency", "3", "--seed", "4", "--decision-ms", "300",
                   "--time-bank-ms", "300", "--connect-timeout", "5", "--keep-going"], out)
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["matches_finished"] == summary["matches_total"] == 10 * 3
    rows = {row["bot"]: row for row in summary["standings"]}
    assert summary["standings"][0]["bot"] == "good"
    assert rows["good"]["forfeits"] == 0
    assert rows["ghost"]["status"] == "never connected"
    assert rows["crash"]["status"] == "crashed"
    [crashed] = [n for n in rows["crash"]["notes"] if "exited with status 3" in n]
    log = out / "logs" / "crash.stderr.log"
    assert f"its stderr is in {log}, ending:\n    rawbot: crashing on purpose" in crashed
    assert rows["hang"]["timeouts"] >= 3
    assert rows["illegal"]["illegal_actions"] >= 3
    for name in ("hang", "illegal", "crash", "ghost"):
        assert rows[name]["forfeits"] == rows[name]["matches"] == 18, name
    records = _records(out)
    assert len(records) == 30
    for record in records:
        replay(record)
        seats = [p["name"] for p in record["players"]]
        if "good" in seats:
            assert record["ranks"][seats.index("good")] == 1
    assert (out / "logs" / "crash.stderr.log").exists()
    assert "good" in result.stdout and "Head to head" in result.stdout


def test_a_bot_that_cannot_start_stops_the_tournament_with_its_stderr(tmp_path: Path) -> None:
    """As cutechess does: no schedule of forfeits for a bot that never played a move."""
    out = tmp_path / "t"
    broken = (f"{sys.executable} -c \"import sys; print('Traceback: no module named "
              f"mybot_helpers', file=sys.stderr); sys.exit(1)\"")
    args = ["--bot", "good=greedy", "--bot", f"broken={broken}", "--players", "2",
            "--games", "3", "--connect-timeout", "20"]
    result = _run(args, out)
    assert result.returncode == 1
    log = out / "logs" / "broken.stderr.log"
    assert "broken (" in result.stderr and "crashed: exited with status 1 before it " \
        f"connected; its stderr is in {log}, ending:\n    Traceback: no module named " \
        "mybot_helpers" in result.stderr
    assert f"--resume {out}, or pass --keep-going" in result.stderr
    assert not list((out / "records").glob("*.json"))
    going = _run([*args, "--keep-going"], out)
    assert going.returncode == 0, going.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["matches_finished"] == summary["matches_total"] == 6
    assert {s["bot"]: s["forfeits"] for s in summary["standings"]} == {"good": 0, "broken": 6}


def test_interrupted_tournament_keeps_finished_records_and_resume_completes_it(
        tmp_path: Path) -> None:
    out = tmp_path / "t"
    args = [*CLI, "--bot", "a=greedy", "--bot", "b=random", "--players", "2", "--games", "40",
            "--concurrency", "2", "--seed", "9", "--out", str(out)]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list((out / "records").glob("*.json"))) < 6:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=30)
    assert process.returncode == 130
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True
    finished_before = {p.name: p.read_bytes() for p in (out / "records").glob("*.json")
                       if json.loads(p.read_bytes())["finished"]}
    assert 0 < summary["matches_finished"] == len(finished_before) < summary["matches_total"]

    resumed = subprocess.run([*CLI, "--resume", str(out)], capture_output=True, text=True,
                             timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is False
    assert summary["matches_finished"] == summary["matches_total"] == 80
    for name, content in finished_before.items():
        assert (out / "records" / name).read_bytes() == content
    finished = [r for r in _records(out) if r["finished"]]
    keys = [r["meta"]["tournament_key"] for r in finished]
    assert len(keys) == len(set(keys)) == 80


def test_same_seed_reproduces_the_results_of_every_bundled_bot(tmp_path: Path) -> None:
    """random and search key their generators on the match id and their --seed: both come
    from the tournament's seed (and the schedule key, the bot's name), never from the
    referee's randomness, so two runs play the same moves. search with --iterations: in
    time mode its decisions depend on the machine's speed."""
    outcomes = []
    for run in range(2):
        out = tmp_path / f"run{run}"
        result = _run(["--bot", "g=greedy", "--bot", "r1=random", "--bot", "r2=random",
                       "--bot", "s=search --iterations 30", "--players", "3", "--games", "1",
                       "--concurrency", "3", "--seed", "21", "--decision-ms", "10000"], out)
        assert result.returncode == 0, result.stderr
        by_key = {r["meta"]["tournament_key"]: (r["match_id"], r["seed"], r["totals"],
                                                r["rounds"])
                  for r in _records(out)}
        summary = json.loads((out / "summary.json").read_text())
        outcomes.append((by_key, [(s["bot"], s["mu"], s["sigma"]) for s in summary["standings"]]))
    assert len(outcomes[0][0]) == 4 * 3  # 4 lineups, 1 deal each, 3 rotations
    assert outcomes[0] == outcomes[1]
    seeds = {seed for _, seed, _, _ in outcomes[0][0].values()}
    assert all(deal_match(3, s) for s in seeds)


def test_an_output_folder_of_another_tournament_is_refused_not_mixed_in(tmp_path: Path) -> None:
    out = tmp_path / "t"
    first = _run(["--bot", "a=greedy", "--bot", "b=random", "--players", "2", "--games", "1",
                  "--seed", "3"], out)
    assert first.returncode == 0, first.stderr
    before = sorted(p.name for p in (out / "records").glob("*.json"))
    other = _run(["--bot", "a=greedy", "--bot", "c=random", "--players", "2", "--games", "1",
                  "--seed", "3"], out)
    assert other.returncode == 2
    assert "holds a different tournament" in other.stderr
    assert sorted(p.name for p in (out / "records").glob("*.json")) == before
    again = _run(["--bot", "a=greedy", "--bot", "b=random", "--players", "2", "--games", "1",
                  "--seed", "3"], out)
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in (out / "records").glob("*.json")) == before


def test_every_bundled_bot_runs_with_the_runners_interpreter_others_as_given() -> None:
    from scout_arena.local import BUNDLED_BOTS
    from scout_arena.tournament import BUNDLED, BotSpec

    assert set(BUNDLED_BOTS) == BUNDLED  # a bot `play` knows, a tournament knows too
    for name in sorted(BUNDLED):
        assert BotSpec("x", name).argv() == [sys.executable, "-m", "scout_arena.cli", "bot",
                                             "run", name]
    assert BotSpec("x", "python my bot.py").argv() == ["python", "my", "bot.py"]
    assert BotSpec("x", "search --iterations 9").argv(5) == [
        sys.executable, "-m", "scout_arena.cli", "bot", "run", "search", "--iterations", "9",
        "--seed", "5"]
    assert BotSpec("x", "python bot.py").argv(5) == ["python", "bot.py"]
    for spec in ("my_bot.py:MyBot", "bots/my_bot.py:MyBot", "my_bot:MyBot", "pkg.bot:Bot"):
        assert BotSpec("x", spec).argv() == [sys.executable, "-m", "scout_arena.cli", "bot",
                                             "run", spec]
    assert BotSpec("x", "./bot:v2 --fast").argv() == ["./bot:v2", "--fast"]
