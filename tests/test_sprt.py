"""`scout-arena sprt`: the statistics as statistics, the duplicate-deal design, and the command
end to end (in process, and with bot subprocesses on a loopback referee).

Error rates are checked on many repeated small runs. A run's false decisions are Bernoulli
trials, so a count is compared with the binomial distribution of the nominal rate: a test fails
when the count of wrong decisions is above the 99 % quantile of Binomial(runs, alpha) (or beta),
i.e. when the observed rate is too high to be the nominal one by luck more than 1 % of the time.
Many runs need a fast game, so most use a synthetic game (scores drawn from known strengths,
through the very pairing and folding code); the bundled bots on the engine check the same
behaviour on real games.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from scout_arena.sprt import (
    SprtConfig,
    SprtError,
    SprtRun,
    deal_group,
    group_value,
    play_in_process,
    play_on_nodes,
    run_sprt,
)
from scout_arena.sprt import run as sprt_run
from scout_arena.sprt.design import BASE, NEW, GameResult
from scout_arena.sprt.stats import SequentialTest, bounds, chi2_quantile, t_quantile

CLI = [sys.executable, "-m", "scout_arena.cli", "sprt", "--no-progress"]
ALPHA = BETA = 0.05


def binomial_quantile(n: int, p: float, q: float) -> int:
    """The smallest k with P(Binomial(n, p) <= k) >= q."""
    total = 0.0
    for k in range(n + 1):
        total += math.comb(n, k) * p ** k * (1 - p) ** (n - k)
        if total >= q:
            return k
    return n


# ----- the formulas, by hand --------------------------------------------------------------------

def test_bounds_are_walds() -> None:
    lower, upper = bounds(0.05, 0.05)
    assert lower == pytest.approx(math.log(0.05 / 0.95)) == pytest.approx(-2.944439)
    assert upper == pytest.approx(math.log(0.95 / 0.05)) == pytest.approx(2.944439)
    lower, upper = bounds(0.05, 0.10)
    assert lower == pytest.approx(math.log(0.10 / 0.95))  # -2.251292
    assert upper == pytest.approx(math.log(0.90 / 0.05))  # 2.890372


def test_quantiles_match_the_tables() -> None:
    assert chi2_quantile(1, 0.10) == pytest.approx(0.01579, abs=1e-5)
    assert chi2_quantile(3, 0.10) == pytest.approx(0.5844, abs=1e-4)
    assert chi2_quantile(10, 0.10) == pytest.approx(4.865, abs=1e-3)
    assert chi2_quantile(100, 0.10) == pytest.approx(82.358, abs=1e-3)
    assert t_quantile(1, 0.975) == pytest.approx(12.706, abs=1e-3)
    assert t_quantile(3, 0.975) == pytest.approx(3.182, abs=1e-3)
    assert t_quantile(30, 0.975) == pytest.approx(2.042, abs=1e-3)


def test_llr_of_a_hand_computed_example() -> None:
    """Four deals with paired differences 2, -1, 3, 0.5 points; H0 0, H1 1.

    n = 4, sum = 4.5, mean = 1.125
    deviations 0.875, -2.125, 1.875, -0.625; squares 0.765625 + 4.515625 + 3.515625 + 0.390625
      = 9.1875 (sum of squares), ML variance 9.1875 / 4 = 2.296875, sd (n - 1) sqrt(3.0625) = 1.75
    fishtest's LLR_alt2: (h1 - h0) / var * (sum - n (h0 + h1) / 2) = 1 / 2.296875 * (4.5 - 2)
      = 1.0884354
    variance used: 9.1875 / chi2_3(0.10) = 9.1875 / 0.5843744 = 15.721942 (floor 1/16 unused)
    LLR = 2.5 / 15.721942 = 0.1590134: inside (-2.944, 2.944), go on
    95 % interval: 1.125 -+ t_3(0.975) * 1.75 / sqrt(4) = 1.125 -+ 3.182446 * 0.875
      = [-1.659640, 3.909641]
    """
    test = SequentialTest(0.0, 1.0, ALPHA, BETA)
    for x in (2, -1, 3, 0.5):
        test.add(x)
    assert test.n == 4 and test.total == pytest.approx(4.5) and test.mean == pytest.approx(1.125)
    assert test.m2 == pytest.approx(9.1875)
    assert test.variance_ml == pytest.approx(2.296875)
    assert test.sd == pytest.approx(1.75)
    assert test.llr_plain == pytest.approx(1.0884354, abs=1e-7)
    assert test.variance_used == pytest.approx(15.721942, abs=1e-6)
    assert test.llr == pytest.approx(0.1590134, abs=1e-7)
    assert test.decision is None
    low, high = test.interval()
    assert low == pytest.approx(-1.659640, abs=1e-6)
    assert high == pytest.approx(3.909641, abs=1e-6)


def test_llr_accepts_h1_and_h0_where_the_numbers_say_so() -> None:
    """Ten deals, all 5 points (sum of squares 0): variance = floor (1 / 4)^2 = 0.0625 for
    H0 0 / H1 1; LLR = 1 / 0.0625 * (50 - 10 * 0.5) = 720 >= 2.944: H1.
    Then differences alternating -1, +1 around 0 (n = 10, sum 0, sum of squares 10):
    variance 10 / chi2_9(0.10) = 10 / 4.168159 = 2.399141; LLR = (0 - 5) / 2.399141 = -2.084080:
    not yet; twenty of them (sum of squares 20, chi2_19(0.10) = 11.650910): variance 1.716604,
    LLR = -10 / 1.716604 = -5.825455 <= -2.944: H0."""
    test = SequentialTest(0.0, 1.0)
    for _ in range(10):
        test.add(5.0)
    assert test.variance_used == pytest.approx(0.0625)
    assert test.llr == pytest.approx(720.0)
    assert test.decision == "H1"

    test = SequentialTest(0.0, 1.0)
    for i in range(10):
        test.add(-1.0 if i % 2 else 1.0)
    assert chi2_quantile(9, 0.10) == pytest.approx(4.168159, abs=1e-6)
    assert test.llr == pytest.approx(-5 / (10 / 4.168159), abs=1e-5)
    assert test.decision is None
    for i in range(10):
        test.add(-1.0 if i % 2 else 1.0)
    assert chi2_quantile(19, 0.10) == pytest.approx(11.650910, abs=1e-6)
    assert test.llr == pytest.approx(-10 / (20 / 11.650910), abs=1e-5)
    assert test.decision == "H0"


def test_one_observation_is_no_evidence() -> None:
    test = SequentialTest(0.0, 1.0)
    test.add(100.0)
    assert test.llr == 0.0 and test.decision is None
    assert test.interval() == (-math.inf, math.inf)


def test_hypotheses_are_checked() -> None:
    with pytest.raises(ValueError, match="H1 must be above H0"):
        SequentialTest(1.0, 1.0)
    with pytest.raises(ValueError):
        SequentialTest(0.0, 1.0, alpha=0.7)
    with pytest.raises(ValueError, match="--max-games"):
        SprtConfig("a", "b", players=4, field=("c",), max_games=7).validate()


# ----- the design: who sits where ----------------------------------------------------------------

def test_head_to_head_is_new_base_and_base_new_on_one_deal() -> None:
    group = deal_group(SprtConfig("a", "b"), 3)
    assert [g.seats for g in group.games] == [(NEW, BASE), (BASE, NEW)]
    assert len({g.seed for g in group.games}) == 1
    # seat 0: NEW's score in the first game against BASE's in the second; seat 1 the other way
    results = {group.games[0].key: GameResult((10, -3), (1, 2)),
               group.games[1].key: GameResult((4, 6), (2, 1))}
    # (10 - 4) and (6 - (-3)): NEW's margin over BASE in both seatings, (13 + 2) / 2
    assert group_value("score", group, results) == pytest.approx(((10 - 4) + (6 + 3)) / 2)
    # win shares: NEW won game 1 (seat 0: 1 - 0) and game 2 (seat 1: 1 - 0)
    assert group_value("winrate", group, results) == pytest.approx(1.0)


@pytest.mark.parametrize(("players", "field"), [(3, ("f",)), (4, ("f", "g")), (3, ()),
                                                (2, ("f",)), (5, ("f", "g", "h", "i", "j"))])
def test_each_pair_differs_only_in_the_tested_seat(players: int, field: tuple[str, ...]) -> None:
    config = SprtConfig("a", "b", players=players, field=field)
    for deal in range(4):
        group = deal_group(config, deal)
        games = {g.key: g for g in group.games}
        assert len(group.games) == 2 * players == config.group_games
        assert sorted(p.seat for p in group.pairs) == list(range(players))  # every seat tested
        for pair in group.pairs:
            new, base = games[pair.new_game].seats, games[pair.base_game].seats
            assert new[pair.seat] == NEW and base[pair.seat] == BASE
            others = [s for s in range(players) if s != pair.seat]
            assert [new[s] for s in others] == [base[s] for s in others]
            assert all(new[s].startswith("field") for s in others)
        assert len(set(config.programs())) >= players  # distinct names: one seat each


def test_the_field_defaults_to_copies_of_base_and_win_shares_split() -> None:
    config = SprtConfig("a", "b", players=3)
    assert config.programs() == {NEW: "a", BASE: "b", "field1": "b", "field1-2": "b"}
    group = deal_group(config, 0)
    results = {g.key: GameResult((5, 5, 1), (1, 1, 3)) for g in group.games}
    assert group_value("winrate", group, results) == 0.0
    first = group.pairs[0]
    results[first.new_game] = GameResult((5, 5, 1), (1, 1, 3))  # NEW shares first: 1/2
    results[first.base_game] = GameResult((0, 5, 1), (3, 1, 2))  # BASE last: 0
    assert group_value("winrate", group, results) == pytest.approx(0.5 / 3)


def test_results_fold_in_deal_order_whatever_order_they_come_in() -> None:
    config = SprtConfig("a", "b", h1=1.0, max_games=40)
    run = SprtRun(config, stop_on_decision=False)
    late = run.group(1).games
    for game in late:
        assert not run.record(game.key, GameResult((3, 0), (1, 2)))
    assert run.deals == 0  # deal 1 waits for deal 0
    for game in run.group(0).games:
        run.record(game.key, GameResult((1, 0), (1, 2)))
    assert run.deals == 2 and [p.value for p in run.history] == [0.0, 0.0]
    assert not run.record("no-such-game", GameResult((1, 0), (1, 2)))


# ----- error rates on a synthetic game -----------------------------------------------------------

class SyntheticGame:
    """Scores of a fake SCOUT: each seat's bot skill + the deal's luck for that seat (the same
    for every game of a deal, as the cards are) + the bot's own noise, rounded to points."""

    def __init__(self, skills: dict[str, float], luck: float = 6.0, noise: float = 4.0,
                 seed: int = 0) -> None:
        self.skills = skills
        self.luck = luck
        self.noise = noise
        self.rng = random.Random(seed)

    def play(self, seats: tuple[str, ...], deal_seed: int) -> GameResult:
        cards = random.Random(deal_seed)
        totals = tuple(round(self.skills[name] + cards.gauss(0, self.luck)
                             + self.rng.gauss(0, self.noise)) for name in seats)
        ranks = tuple(1 + sum(1 for other in totals if other > mine) for mine in totals)
        return GameResult(totals, ranks)


def synthetic_run(config: SprtConfig, game: SyntheticGame, *, stop: bool = True) -> SprtRun:
    run = SprtRun(config, stop_on_decision=stop)
    skills = {NEW: game.skills[NEW], BASE: game.skills[BASE]}
    game.skills = {**skills, **{name: 0.0 for name in config.programs()
                                if name not in skills}}
    for item in run.schedule():
        if run.record(item.key, game.play(item.seats, item.seed)):
            break
    return run


def plain_decision(run: SprtRun) -> str | None:
    """Where fishtest's plain formula (plug-in variance) would have stopped on these deals."""
    lower, upper = run.test.bounds
    replay = SequentialTest(run.config.h0, run.config.h1)
    for point in run.history:
        replay.add(point.value)
        if replay.llr_plain >= upper:
            return "H1"
        if replay.llr_plain <= lower:
            return "H0"
    return None


def error_count(runs: int, decision: str, skills: dict[str, float], h1: float,
                players: int = 2, plain: bool = False) -> tuple[int, float]:
    """Of ``runs`` small synthetic runs, how many took the wrong decision (the other one than
    ``decision``); and the mean games a run used."""
    other = {"H0": "H1", "H1": "H0"}[decision]
    wrong = 0
    games = 0
    for i in range(runs):
        config = SprtConfig("a", "b", players=players, h1=h1,
                            max_games=160 if plain else 4000, seed=i + 1)
        run = synthetic_run(config, SyntheticGame(dict(skills), seed=i), stop=not plain)
        made = plain_decision(run) if plain else run.decision
        assert made is not None or plain, "a small run must decide within its games"
        wrong += made == other
        games += run.games_used
    return wrong, games / runs


RUNS = 1000


def test_a_bot_against_itself_accepts_h0_in_small_runs() -> None:
    """Equal skills (H0 true), H1 = 3 points with a pair difference of sd ~ 4-5: about a
    dozen deals a run. Wrong (H1) decisions at most the 99 % quantile of Binomial(1000, 0.05)
    (= 67, i.e. 6.7 %)."""
    wrong, mean_games = error_count(RUNS, "H0", {NEW: 0.0, BASE: 0.0}, h1=3.0)
    limit = binomial_quantile(RUNS, ALPHA, 0.99)
    assert wrong <= limit, f"{wrong}/{RUNS} runs accepted H1 for equal bots (limit {limit})"
    assert mean_games < 60


def test_the_plain_plug_in_formula_fails_that_check() -> None:
    """Why the variance in the LLR is an upper confidence limit: with the plug-in variance the
    same runs accept H1 far more often than alpha."""
    wrong, _ = error_count(300, "H0", {NEW: 0.0, BASE: 0.0}, h1=3.0, plain=True)
    assert wrong > binomial_quantile(300, ALPHA, 0.99)


def test_a_bot_better_by_h1_accepts_h1_in_small_runs() -> None:
    """NEW 3 points better (H1 true): wrong (H0) decisions at most the 99 % quantile of
    Binomial(1000, beta)."""
    wrong, _ = error_count(RUNS, "H1", {NEW: 3.0, BASE: 0.0}, h1=3.0)
    limit = binomial_quantile(RUNS, BETA, 0.99)
    assert wrong <= limit, f"{wrong}/{RUNS} runs accepted H0 for a better bot (limit {limit})"


def test_four_player_tables_with_a_field_keep_the_error_rate() -> None:
    wrong, _ = error_count(300, "H0", {NEW: 0.0, BASE: 0.0}, h1=2.0, players=4)
    assert wrong <= binomial_quantile(300, ALPHA, 0.99)


# ----- real games on the engine ------------------------------------------------------------------

def test_greedy_against_random_accepts_h1_in_a_few_games() -> None:
    for seed in (1, 2, 3):
        run = SprtRun(SprtConfig("greedy", "random", seed=seed))
        play_in_process(run)
        assert run.decision == "H1", run.summary()
        assert run.games_used <= 20
        low, high = run.test.interval()
        assert 5 < low < run.test.mean < high


def test_random_against_itself_accepts_h0_on_the_engine() -> None:
    """The bundled random bot as NEW and as BASE (its own random stream per game): 40 small
    runs (H1 = 8 points, pair sd ~ 8); wrong decisions at most the 99 % quantile of
    Binomial(40, 0.05) = 6."""
    runs, wrong = 40, 0
    for i in range(runs):
        run = SprtRun(SprtConfig("random", "random", h1=8.0, seed=100 + i, max_games=400))
        play_in_process(run)
        assert run.decision is not None
        wrong += run.decision != "H0"
    assert wrong <= binomial_quantile(runs, ALPHA, 0.99)


def test_identical_deterministic_bots_accept_h0_at_once() -> None:
    run = SprtRun(SprtConfig("greedy", "greedy", metric="winrate", h1=0.05))
    play_in_process(run)
    assert run.decision == "H0" and run.deals == 2
    assert all(point.value == 0.0 for point in run.history)


def test_a_three_player_field_in_process_with_a_module_class() -> None:
    run = SprtRun(SprtConfig("scout_client:GreedyBot", "random", field=("random",), players=3,
                             h1=2.0, max_games=120))
    play_in_process(run)
    assert run.decision == "H1"
    assert run.games_used % 6 == 0


def test_the_verdict_names_the_winner_and_the_measured_difference_with_its_interval() -> None:
    """An H0 verdict once read "(NEW - BASE = +0.00 rather than +1.00)" beside a measured
    -5.13, and the games column showed 9,996 for --max-games 10000."""
    from rich.console import Console
    from scout_arena.sprt.report import render_result, verdict

    run = SprtRun(SprtConfig("random", "greedy", players=3, h1=1.0))
    play_in_process(run)
    summary = run.summary()
    assert run.decision == "H0" and summary["estimate"] < 0
    low, high = summary["ci95"]
    text = verdict(summary)
    assert text.startswith("H0 accepted: NEW is not +1.00 points better than BASE; "
                           f"measured NEW - BASE = {summary['estimate']:+.2f} points, "
                           f"95% CI [{low:+.2f}, {high:+.2f}]")
    assert text.endswith("(tested H0: NEW - BASE = +0.00 against H1: +1.00)")
    console = Console(record=True, width=200)
    render_result(summary, console)
    shown = console.export_text()
    assert f"{summary['games_used']} of {summary['games_played']} played (at most 9996: " \
           "--max-games 10000 in whole deals of 6)" in shown


def test_a_bad_bot_spec_is_an_sprt_error() -> None:
    with pytest.raises(SprtError, match="no module"):
        play_in_process(SprtRun(SprtConfig("no_such_module_xyz:Bot", "random")))


# ----- other machines ----------------------------------------------------------------------------

def test_without_the_distributed_module_nodes_say_so(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    monkeypatch.setattr(sprt_run, "DISTRIBUTED_MODULE", "scout_arena.tournament.no_such_module")
    with pytest.raises(SprtError, match="no_such_module, which this installation does not"):
        play_on_nodes(SprtRun(SprtConfig("greedy", "random")), tmp_path, nodes=2)


def _fake_distributed(monkeypatch: pytest.MonkeyPatch, with_stop: bool) -> list[int]:
    """A stand-in `play_distributed` that plays its items on the synthetic game."""
    calls: list[int] = []
    game = SyntheticGame({NEW: 5.0, BASE: 0.0})

    def finish(item: Any, on_record: Any) -> None:
        result = game.play(item.seats, item.seed)
        record = types.SimpleNamespace(
            match_id=f"m-{item.key}", tournament_key=item.key,
            outcome=types.SimpleNamespace(totals=result.totals, ranks=result.ranks,
                                          forfeits=frozenset(), players=item.seats))
        on_record(record)

    if with_stop:
        async def play(config: Any, items: Any, *, nodes: Any, ray_address: Any,
                       on_record: Any, stop: Any) -> None:
            calls.append(len(items))
            for item in items:
                if stop.is_set():
                    return
                finish(item, on_record)
    else:
        def play(config: Any, items: Any, *, nodes: Any, ray_address: Any,  # type: ignore[misc]
                 on_record: Any) -> None:
            calls.append(len(items))
            for item in items:
                finish(item, on_record)

    module = types.ModuleType("fake_distributed")
    module.play_distributed = play  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_distributed", module)
    monkeypatch.setattr(sprt_run, "DISTRIBUTED_MODULE", "fake_distributed")
    monkeypatch.setattr(sprt_run, "dump_record", lambda record, path: None)
    return calls


@pytest.mark.parametrize("with_stop", [True, False])
def test_nodes_delegate_to_play_distributed_and_stop(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path, with_stop: bool) -> None:
    calls = _fake_distributed(monkeypatch, with_stop)
    run = SprtRun(SprtConfig("a", "b", h1=1.0, max_games=2000))
    play_on_nodes(run, tmp_path, nodes=2)
    assert run.decision == "H1"
    if with_stop:
        assert calls == [2000]  # the whole schedule, stopped early
    else:
        assert calls[0] == 2 * 8 * 2  # a first batch of 8 deals per node
    assert run.games_played < 100


# ----- the command -------------------------------------------------------------------------------

def _check_outputs(out: Path) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((out / "sprt.json").read_text())
    assert (out / "llr.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert summary["decision"] in ("H0", "H1", None)
    assert len(summary["history"]) == summary["deals"]
    assert summary["history"][-1]["games"] == summary["games_used"]
    return summary


def test_cli_in_process(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run([*CLI, "--new", "greedy", "--base", "random", "--in-process",
                           "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "H1 accepted" in done.stdout
    summary = _check_outputs(out)
    assert summary["decision"] == "H1" and summary["path"] == "in-process"
    assert summary["ci95"][0] < summary["estimate"] < summary["ci95"][1]
    assert not (out / "games").exists()  # nothing but the two files


def test_cli_with_bot_subprocesses(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run([*CLI, "--new", "greedy", "--base", "random", "--max-games", "12",
                           "--out", str(out)], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr + done.stdout
    summary = _check_outputs(out)
    assert summary["path"] == "processes" and summary["games_used"] <= 12
    assert summary["decision"] in ("H1", None)
    assert {b["status"] for b in summary["bots"].values()} == {"connected"}
    records = list((out / "games" / "records").glob("*.json"))
    assert len(records) >= summary["games_used"]
    again = subprocess.run([*CLI, "--new", "greedy", "--base", "random", "--out", str(out)],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "earlier test" in again.stderr


def test_cli_rejects_what_it_cannot_do(tmp_path: Path) -> None:
    done = subprocess.run([*CLI, "--new", "greedy", "--base", "random", "--h0", "1", "--h1",
                           "0", "--in-process", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "--h1 must be above --h0" in done.stderr


def test_run_sprt_writes_the_summary(tmp_path: Path) -> None:
    summary = run_sprt(SprtConfig("greedy", "random", metric="winrate", h1=0.2), tmp_path,
                       in_process=True, plot=False)
    assert summary["decision"] == "H1"
    assert json.loads((tmp_path / "sprt.json").read_text())["llr"] == summary["llr"]
