"""`scout-arena train`: the search bot's value network, trained by self-play on the engine.

Each iteration plays matches on `scout_rules.State` directly (every seat the same player: the
greedy rollout policy in iteration 0, then the search bot with the network so far at its
leaves, mixed with the rollout: AlphaZero-lite), records sampled positions from every seat's
point of view (`search.value.features`) with that seat's reward for the round
(`search.mcts.reward`), fits a features-128-64-1 MLP (scikit-learn's MLPRegressor,
warm-started from the last iteration, on the most recent positions) and measures the network:
the search bot with ``eval=mix`` (or ``net``) against a fixed opponent on a fixed set of
duplicate deals (each deal once with the bot at every seat).
The matches run in ``--workers`` processes; everything is seeded from ``--seed`` so that the
same command writes the same weights. The weights go to ``--out`` (by default the file the bot
ships with) and the learning curve, as JSON, beside them (``*.curve.json``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .clierrors import (
    REFUSED,
    CommandError,
    nonnegative_int,
    positive_int,
    positive_rate,
    share,
)
from .record.model import JSON

if TYPE_CHECKING:
    from multiprocessing.pool import Pool

    from sklearn.neural_network import MLPRegressor

    from .search.value import ValueNet

__all__ = ["add_train_parser", "cmd_train", "evaluate", "self_play"]

Rows = tuple[list[list[float]], list[float]]
_EVAL_SEED = 0x7EA1_0000


def self_play(num_players: int, seed: int, weights: str | None, search_iterations: int,
              epsilon: float, keep: float, net_weight: float = 1.0) -> Rows:
    """One match played by the same player at every seat: greedy (``weights`` None or no
    search iterations) or the search bot's search with the network in ``weights`` at its
    leaves (``net_weight`` of the net, the rest rollout); with probability ``epsilon`` a seat
    plays a random candidate instead. Returns the features of a ``keep`` share of the
    positions, for every seat, and each seat's reward."""
    from scout_rules import InformationSet, Phase, State, more_playable_rotated
    from scout_rules.playout import candidates, greedy_action

    from .search.mcts import reward, search
    from .search.value import load_net, seat_rows

    rng = random.Random(f"self-play:{seed}")
    net = load_net(weights) if weights and search_iterations > 0 else None
    state = State.new(num_players, seed)
    rows: list[list[float]] = []
    labels: list[float] = []
    while not state.is_over:
        for seat in range(num_players):
            rotate = more_playable_rotated(state.hand(seat))
            state.choose_rotation(seat, rotate if rng.random() >= epsilon else not rotate)
        index, start = state.round_index, tuple(state.scores)
        kept: list[list[list[float]]] = []
        while state.phase is Phase.PLAY and state.round_index == index:
            if rng.random() < keep:
                kept.append(seat_rows(state))
            if rng.random() < epsilon:
                action = rng.choice(candidates(state, 2, 4))
            elif net is None:
                action = greedy_action(state)
            else:
                actor = state.current_seat
                assert actor is not None
                info = InformationSet.from_observation(state.observation(actor))
                found = search(info, rng, iterations=search_iterations, deadline=None, net=net,
                               net_weight=net_weight)
                action = found.action if found is not None else greedy_action(state)
            state.apply(action)
        rewards = reward(state.scores, index, start)
        for seat_rows_now in kept:
            for s, row in enumerate(seat_rows_now):
                rows.append(row)
                labels.append(rewards[s])
    return rows, labels


def _self_play_task(task: tuple[int, int, str | None, int, float, float, float]) -> Rows:
    return self_play(*task)


def _duplicate_deal(task: tuple[int, int, str, str]) -> list[tuple[float, float]]:
    """One deal with the candidate at every seat: (win share, score difference) per match."""
    from .local import bot_from_spec, play_match

    num_players, deal, candidate, opponent = task

    out = []
    for position in range(num_players):
        bots = [bot_from_spec(candidate if s == position else opponent, deal * 10 + s)
                for s in range(num_players)]
        state = play_match(bots, _EVAL_SEED + num_players * 1_000_003 + deal,
                           match_id=f"train-{num_players}-{deal}-{position}")
        ranks = state.ranks()
        firsts = ranks.count(1)
        others = [state.scores[s] for s in range(num_players) if s != position]
        out.append((1.0 / firsts if ranks[position] == 1 else 0.0,
                    state.scores[position] - statistics.fmean(others)))
    return out


def evaluate(pool: Pool, num_players: int, deals: int, candidate: str, opponent: str) -> JSON:
    """Win rate and score difference of ``candidate`` against ``opponent`` on ``deals`` fixed
    duplicate deals, with normal 95 % intervals over the per-deal means."""
    results = pool.map(_duplicate_deal, [(num_players, d, candidate, opponent)
                                         for d in range(deals)])
    out: JSON = {"bot": candidate, "opponent": opponent, "players": num_players,
                 "matches": deals * num_players}
    for column, name in ((0, "win_rate"), (1, "score_diff")):
        per_deal = [statistics.fmean(m[column] for m in deal) for deal in results]
        mean = statistics.fmean(per_deal)
        half = 1.96 * statistics.stdev(per_deal) / math.sqrt(len(per_deal)) if deals > 1 else 0.0
        out[name] = round(mean, 4)
        out[f"{name}_ci"] = round(half, 4)
    return out


def _to_net(model: MLPRegressor) -> ValueNet:
    from .search.value import ValueNet

    return ValueNet(model.coefs_, model.intercepts_)


def cmd_train(args: argparse.Namespace) -> int:
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")  # one process a core; and the same sums every run
    import multiprocessing
    import warnings

    import numpy as np
    try:
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.neural_network import MLPRegressor
    except ImportError as exc:
        raise CommandError("scikit-learn is not installed: pip install 'scout-arena[train]'",
                           REFUSED) from exc

    from .search.value import FEATURES

    out = Path(args.out)
    if out.is_dir():
        raise CommandError(f"--out names a folder, not a weights file: {str(out)[:100]}")
    out.parent.mkdir(parents=True, exist_ok=True)
    curve_path = out.with_name(out.stem + ".curve.json")
    work = out.with_name(out.stem + ".iteration.npz")
    players: list[int] = args.players
    leaf = "eval=net" if args.net_weight >= 1 else f"eval=mix,net_weight={args.net_weight}"
    eval_bot = f"search:iterations={args.eval_iterations},{leaf},weights={work}"
    model = MLPRegressor(hidden_layer_sizes=(128, 64), activation="relu", alpha=1e-4,
                         batch_size=256, learning_rate_init=args.learning_rate,
                         shuffle=True, random_state=args.seed)
    settings = {k: v for k, v in vars(args).items() if k != "func"}
    settings["out"] = out.name  # the file, not where on the trainer's disk it was
    curve: JSON = {"settings": settings, "features": FEATURES, "iterations": []}
    data_x: list[list[list[float]]] = []
    data_y: list[list[float]] = []
    held_x: list[list[float]] = []
    held_y: list[float] = []
    split = random.Random(f"split:{args.seed}")
    started = time.perf_counter()
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    with context.Pool(args.workers) as pool:
        if args.baseline:
            base = evaluate(pool, args.eval_players, args.eval_deals,
                            f"search:iterations={args.eval_iterations}", args.opponent)
            curve["baseline"] = base
            print(f"baseline  {base['bot']} vs {args.opponent}: win {base['win_rate']:.1%} "
                  f"± {base['win_rate_ci']:.1%}, score {base['score_diff']:+.2f}", flush=True)
        for iteration in range(args.iterations):
            tick = time.perf_counter()
            searching = iteration > 0 and args.search_iterations > 0
            tasks = [(players[g % len(players)], args.seed * 1_000_003 + iteration * 100_003 + g,
                      str(work) if searching else None,
                      args.search_iterations if searching else 0, args.epsilon, args.keep,
                      args.net_weight)
                     for g in range(args.games if iteration == 0 or not searching
                                    else args.search_games)]
            fresh_x: list[list[float]] = []
            fresh_y: list[float] = []
            for rows, labels in pool.imap(_self_play_task, tasks, chunksize=4):
                for row, label in zip(rows, labels, strict=True):
                    if split.random() < 0.05:
                        held_x.append(row)
                        held_y.append(label)
                    else:
                        fresh_x.append(row)
                        fresh_y.append(label)
            data_x.append(fresh_x)
            data_y.append(fresh_y)
            while len(data_x) > 1 and sum(map(len, data_x)) - len(data_x[0]) >= args.window:
                data_x.pop(0)
                data_y.pop(0)
            played = time.perf_counter() - tick
            x = np.array([r for chunk in data_x for r in chunk], dtype=np.float64)
            y = np.array([v for chunk in data_y for v in chunk], dtype=np.float64)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                for _ in range(args.epochs):  # partial_fit: no early-stopping state across fits
                    model.partial_fit(x, y)
            net = _to_net(model)
            net.save(work)
            held = float(np.mean((net.predict(held_x) - np.array(held_y)) ** 2))
            trained = time.perf_counter() - tick - played
            result = evaluate(pool, args.eval_players, args.eval_deals, eval_bot, args.opponent)
            point: JSON = {"iteration": iteration, "matches": len(tasks),
                           "positions": len(fresh_y), "trained_on": len(y),
                           "train_loss": round(float(model.loss_), 5),
                           "held_out_mse": round(held, 5), **result,
                           "play_s": round(played, 1), "fit_s": round(trained, 1),
                           "elapsed_s": round(time.perf_counter() - started, 1)}
            point["bot"] = point["bot"].split(",weights=")[0]
            curve["iterations"].append(point)
            print(f"iteration {iteration}: {len(tasks)} matches, {len(fresh_y)} positions, "
                  f"loss {point['train_loss']:.4f}, held-out MSE {held:.4f}, win vs "
                  f"{args.opponent} {result['win_rate']:.1%} ± {result['win_rate_ci']:.1%}, "
                  f"score {result['score_diff']:+.2f} ({point['elapsed_s']:.0f} s)", flush=True)
            net.save(out, curve_iteration=iteration)
            curve_path.write_text(json.dumps(curve, indent=1) + "\n")
    work.unlink(missing_ok=True)
    print(f"wrote {out} and {curve_path}")
    return 0


def _player_counts(text: str) -> list[int]:
    """Comma-separated player counts, each 2 to 5."""
    try:
        counts = [int(p) for p in text.split(",")]
    except ValueError:
        counts = []
    if not counts or not all(2 <= n <= 5 for n in counts):
        raise argparse.ArgumentTypeError(
            f"player counts 2 to 5, comma-separated, got {text[:40]!r}")
    return counts


def _opponent(text: str) -> str:
    from .local import bot_from_spec

    try:
        bot_from_spec(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)[:200]) from None
    return text


def add_train_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from importlib import resources

    shipped = Path(str(resources.files("scout_arena") / "search" / "value_net.npz"))
    p = sub.add_parser("train", help="train the search bot's value network by self-play",
                       description=(__doc__ or "").split("\n\n")[1])
    p.add_argument("--seed", type=int, default=1, help="the whole run follows from it")
    p.add_argument("--iterations", type=positive_int, default=4,
                   help="self-play/fit/measure rounds")
    p.add_argument("--games", type=positive_int, default=2000,
                   help="greedy self-play matches in iteration 0 (spread over --players)")
    p.add_argument("--search-games", type=positive_int, default=200,
                   help="self-play matches of the search bot with the net, later iterations")
    p.add_argument("--search-iterations", type=nonnegative_int, default=30,
                   help="search iterations a decision in self-play (0: greedy throughout)")
    p.add_argument("--players", type=_player_counts, default="2,3,4,5",
                   help="player counts of the self-play matches")
    p.add_argument("--epsilon", type=share, default=0.1, help="random-move rate in self-play")
    p.add_argument("--keep", type=share, default=0.3, help="share of positions recorded")
    p.add_argument("--window", type=positive_int, default=400_000,
                   help="positions fitted on: the most recent iterations that fill it")
    p.add_argument("--epochs", type=positive_int, default=15, help="passes over the window a fit")
    p.add_argument("--learning-rate", type=positive_rate, default=1e-3)
    p.add_argument("--net-weight", type=share, default=0.3,
                   help="the net's share of a leaf's value, the rest greedy rollout (1: net "
                   "only), in self-play and in the measured bot (eval=mix)")
    p.add_argument("--eval-players", type=int, choices=range(2, 6), default=4)
    p.add_argument("--eval-deals", type=positive_int, default=40,
                   help="duplicate deals of the measure (matches: deals x players)")
    p.add_argument("--eval-iterations", type=nonnegative_int, default=50,
                   help="search iterations a decision of the measured bot")
    p.add_argument("--opponent", type=_opponent, default="greedy",
                   help="the fixed opponent: greedy or a search spec such as search:iterations=50")
    p.add_argument("--no-baseline", dest="baseline", action="store_false",
                   help="skip measuring the rollout bot at --eval-iterations first")
    p.add_argument("--workers", type=positive_int, default=os.cpu_count() or 1)
    p.add_argument("--out", default=str(shipped), help=f"weights file (default {shipped})")
    p.set_defaults(func=cmd_train)
