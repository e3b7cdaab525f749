"""The search bot's learned evaluation (`scout_arena.search.value`) and `scout-arena train`.

Whether the network makes the bot stronger is measured by bench/strength.py and reported in
referee/scout_arena/search/README.md, not here.
"""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scout_arena.local import play_match
from scout_arena.search import SearchBot
from scout_arena.search.value import FEATURES, ValueNet, default_weights, features, load_net
from scout_rules import InformationSet, Phase, State
from scout_rules.playout import greedy_action

SCOUT_ARENA = str(Path(sys.executable).with_name("scout-arena"))
TINY = ["--iterations", "2", "--games", "12", "--search-games", "4", "--search-iterations",
        "4", "--eval-deals", "2", "--eval-iterations", "4", "--epochs", "3", "--workers", "2",
        "--players", "3,4"]


def train(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SCOUT_ARENA, "train", *TINY, "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=240, check=True)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("train") / "net.npz"
    train(out, "--seed", "5")
    return out


def mid_round(num_players: int, seed: int, moves: int) -> State:
    """A match of greedy play, up to ``moves`` actions into its first round (never past it)."""
    state = State.new(num_players, seed)
    for seat in range(num_players):
        state.choose_rotation(seat, False)
    for _ in range(moves):
        after = state.clone()
        after.apply(greedy_action(after))
        if after.phase is not Phase.PLAY or after.round_index:
            break
        state = after
    return state


def random_net(seed: int = 3) -> ValueNet:
    rng = np.random.default_rng(seed)
    sizes = [FEATURES, 16, 8, 1]
    return ValueNet([rng.normal(0, 0.3, (a, b)) for a, b in itertools.pairwise(sizes)],
                    [rng.normal(0, 0.1, b) for b in sizes[1:]])


def test_train_writes_loadable_weights_and_a_learning_curve(trained: Path) -> None:
    net = ValueNet.load(trained)
    state = mid_round(4, 11, 5)
    values = net.seat_values(state)
    assert len(values) == 4 and all(np.isfinite(values))
    curve = json.loads(trained.with_name("net.curve.json").read_text())
    assert curve["features"] == FEATURES and curve["settings"]["seed"] == 5
    assert "win_rate" in curve["baseline"]
    points = curve["iterations"]
    assert [p["iteration"] for p in points] == [0, 1]
    for point in points:
        assert 0.0 <= point["win_rate"] <= 1.0 and point["matches"] > 0
        assert point["positions"] > 0 and np.isfinite(point["train_loss"])
        assert point["bot"] == "search:iterations=4,eval=mix,net_weight=0.3"
        assert point["players"] == 4
    assert not trained.with_name("net.iteration.npz").exists()


def test_train_is_deterministic_from_its_seed(trained: Path, tmp_path: Path) -> None:
    again = tmp_path / "again.npz"
    other = tmp_path / "other.npz"
    train(again, "--seed", "5")
    train(other, "--seed", "6", "--iterations", "1", "--no-baseline")
    with np.load(trained) as a, np.load(again) as b, np.load(other) as c:
        assert sorted(a.files) == sorted(b.files)
        for name in a.files:
            assert np.array_equal(a[name], b[name]), name
        assert not np.array_equal(a["w0"], c["w0"])
    first = json.loads(trained.with_name("net.curve.json").read_text())["iterations"]
    second = json.loads(again.with_name("again.curve.json").read_text())["iterations"]
    keys = ("positions", "train_loss", "held_out_mse", "win_rate", "score_diff")
    assert [[p[k] for k in keys] for p in first] == [[p[k] for k in keys] for p in second]


def test_numpy_inference_equals_the_training_library_prediction() -> None:
    from sklearn.neural_network import MLPRegressor

    rows = [features(mid_round(n, seed, moves), seat)
            for n in (2, 3, 4, 5) for seed in range(6) for moves in (0, 4, 9)
            for seat in range(n)]
    x = np.array(rows)
    y = np.random.default_rng(0).uniform(-1, 1, len(rows))
    model = MLPRegressor(hidden_layer_sizes=(32, 16), max_iter=30, random_state=0).fit(x, y)
    net = ValueNet(model.coefs_, model.intercepts_)
    np.testing.assert_allclose(net.predict(rows), model.predict(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("num_players", [2, 3, 4, 5])
def test_features_ignore_the_hidden_cards_of_other_seats(num_players: int) -> None:
    for seed in range(5):
        state = mid_round(num_players, 100 + seed, 3 + seed)
        seat = state.current_seat
        assert seat is not None and state.phase is Phase.PLAY
        info = InformationSet.from_observation(state.observation(seat))
        rng = random.Random(seed)
        fills = [info.determinize(rng) for _ in range(6)]
        assert len({tuple(tuple(f.faces[s]) for s in range(num_players)) for f in fills}) > 1
        seen = features(state, seat)
        assert len(seen) == FEATURES
        assert all(features(fill, seat) == seen for fill in fills)
        # The seat's own hand is what it knows: another seat's view of the same fills differs.
        other = (seat + 1) % num_players
        assert len({tuple(features(fill, other)) for fill in fills}) > 1


@pytest.mark.parametrize("num_players", [2, 3, 4, 5])
@pytest.mark.parametrize("knobs", [{"eval": "net"}, {"eval": "mix", "prior": 0.5},
                                   {"eval": "rollout", "prior": 1.0}])
def test_net_evaluated_search_bot_plays_whole_legal_matches(
        num_players: int, knobs: dict[str, object], tmp_path: Path) -> None:
    weights = tmp_path / "random.npz"
    random_net().save(weights)
    bots = [SearchBot(seat, iterations=12, weights=str(weights), **knobs)  # type: ignore[arg-type]
            for seat in range(num_players)]
    state = play_match(bots, 40 + num_players)
    assert state.is_over and len(state.round_results) == state.rules.rounds
    assert all(bot.fallbacks == 0 and bot.last_stats.used_search for bot in bots)


def test_net_evaluated_search_bot_is_deterministic_from_its_seed(tmp_path: Path) -> None:
    weights = tmp_path / "random.npz"
    random_net().save(weights)

    def moves(seed: int) -> list[object]:
        bots = [SearchBot(seed, iterations=10, eval="net", prior=0.5, weights=str(weights)),
                *(SearchBot(seed + s, iterations=10) for s in (1, 2))]
        state = play_match(bots, 77)
        return [action for log in state.round_logs for action in log.actions]

    assert moves(1) == moves(1)
    assert moves(1) != moves(2)


def test_an_unknown_evaluation_is_refused() -> None:
    with pytest.raises(ValueError, match="eval is one of"):
        SearchBot(0, iterations=5, eval="oracle")


def test_shipped_weights_fit_the_feature_encoder() -> None:
    net = load_net()
    assert default_weights().is_file()
    assert net.weights[0].shape[0] == FEATURES
    assert len(net.predict([features(mid_round(3, 1, 2), 0)])) == 1
