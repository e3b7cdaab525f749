"""A learned evaluation for the search: a position's value for one seat, by a small MLP in numpy.

`features` encodes a moment of a round in play from one seat's point of view, reading only what
that seat knows at the table: its own hand and the public counters (hand sizes, captured piles,
chips, Scout & Show tokens, match scores, the active set and its owner, who is to act). Inside
the search the state is a determinization; the hidden cards of the other seats never enter the
encoding, so the value of a determinization is the value of its information set.

`ValueNet` is features-128-64-1 with ReLUs, trained by `scout-arena train` (scout_arena.train_cli)
to predict the seat's search reward for the round (`mcts.reward`: about [-1, 1]). Inference is
numpy only: the weights ship in the package as ``value_net.npz``. numpy comes with the ``bots``
extra; without it only ``eval=rollout`` (the default) is available.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scout_rules import State
from scout_rules.moves import legal_shows

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.floating[Any]]  # Any: float32 or float64, numpy's own spelling

__all__ = ["FEATURES", "MAX_SEATS", "ValueNet", "default_weights", "features", "load_net",
           "seat_rows"]

#: Seats a feature vector has room for (2 to 5 players; the missing ones are zeros).
MAX_SEATS = 5
_SEAT_FIELDS = 7
#: Length of a feature vector (`features`); the weights file records it and is checked against it.
FEATURES = 7 + 16 + 3 + MAX_SEATS * _SEAT_FIELDS + 5 + MAX_SEATS + 1
#: The weights the bot ships with, next to this module.
WEIGHTS_NAME = "value_net.npz"


def _hand_shape(faces: Sequence[int], active_key: int) -> list[float]:
    """The own hand: size, counts per value, longest set and run, cards in a group, and what
    it can show against the active set (how many Shows, the longest)."""
    n = len(faces)
    hist = [0.0] * 10
    for f in faces:
        hist[f - 1] += 1 / 3
    longest_set = longest_run = 1 if n else 0
    grouped = 0
    run_set = run_up = run_down = 1
    prev_in = False
    prev = faces[0] if n else 0
    for f in faces[1:]:  # comparisons, not max(): this runs for every seat at every leaf
        d = f - prev
        prev = f
        if d == 0:
            run_set += 1
            run_up = run_down = 1
            if run_set > longest_set:
                longest_set = run_set
        elif d == 1:
            run_up += 1
            run_set = run_down = 1
            if run_up > longest_run:
                longest_run = run_up
        elif d == -1:
            run_down += 1
            run_set = run_up = 1
            if run_down > longest_run:
                longest_run = run_down
        else:
            run_set = run_up = run_down = 1
            prev_in = False
            continue
        grouped += 1 if prev_in else 2
        prev_in = True
    shows = legal_shows(faces, active_key) if n else []
    best = max((s.length for s in shows), default=0)
    return [n / 15, *hist, longest_set / 5, longest_run / 5, grouped / 10,
            len(shows) / 20, best / 10]


def features(state: State, seat: int) -> list[float]:
    """``seat``'s view of ``state`` (a round in play) as `FEATURES` floats.

    Seats are numbered from ``seat`` on (0 = itself, 1 = the next to play, ...); scores are
    relative to the seat's own."""
    n = state.num_players
    rounds = state.rules.rounds
    out = [1.0 if n == p else 0.0 for p in (2, 3, 4, 5)]
    out.append(1.0 if state.round_index + 1 >= rounds else 0.0)
    out.append((rounds - 1 - state.round_index) / 4)
    out.append(1.0)
    out.extend(_hand_shape(state.faces[seat], state.active_key))
    active = state.active_faces
    key = state.active_key
    out.append(len(active) / 10)
    out.append((key & 15) / 10 if active else 0.0)
    out.append(1.0 if active and key & 16 else 0.0)
    hands = state.hands
    captured = state.captured
    chips = state.scout_chips
    tokens = state.scout_show_tokens
    scores = state.scores
    mine = scores[seat]
    owner = state.last_shower if active else None
    for k in range(MAX_SEATS):
        if k >= n:
            out.extend((0.0,) * _SEAT_FIELDS)
            continue
        s = (seat + k) % n
        out.extend((1.0, len(hands[s]) / 15, len(captured[s]) / 20, chips[s] / 10,
                    1.0 if tokens[s] else 0.0, (scores[s] - mine) / 20,
                    1.0 if s == owner else 0.0))
    out.append(state.scouts_since_show / 4)
    out.append(1.0 if state.current_seat == seat else 0.0)
    out.append(1.0 if owner == seat else 0.0)
    out.append(min(state.round_actions, 200) / 200)
    out.append(1.0 if len(hands[seat]) <= 2 else 0.0)
    current = state.current_seat
    for k in range(MAX_SEATS):
        out.append(1.0 if current is not None and k < n and (seat + k) % n == current else 0.0)
    out.append(1.0 if n == 2 else 0.0)
    return out


def seat_rows(state: State) -> list[list[float]]:
    """`features` of ``state`` for every seat, seat 0 first."""
    return [features(state, s) for s in range(state.num_players)]


def default_weights() -> Path:
    """The shipped weights file (it may be missing in a checkout that never trained)."""
    return Path(str(resources.files(__package__ or "scout_arena.search") / WEIGHTS_NAME))


def load_net(path: str | Path | None = None) -> ValueNet:
    """`ValueNet.load`, once per file version and process (bots are made per match)."""
    file = Path(path) if path else default_weights()
    stat = file.stat()
    return _load(str(file), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _load(path: str, mtime_ns: int, size: int) -> ValueNet:
    return ValueNet.load(path)


class ValueNet:
    """features-H1-H2-1 with ReLUs, evaluated with numpy; `load` reads an ``.npz`` written by
    `save` (``w0``, ``b0``, ... and the feature count)."""

    def __init__(self, weights: Sequence[FloatArray], biases: Sequence[FloatArray]) -> None:
        import numpy as np

        self._np = np
        # float32: half the matmul time of float64 at these sizes, well within the fit's noise.
        self.weights = [np.ascontiguousarray(w, dtype=np.float32) for w in weights]
        self.biases = [np.ascontiguousarray(b, dtype=np.float32).ravel() for b in biases]
        if self.weights[0].shape[0] != FEATURES or self.weights[-1].shape[1] != 1:
            raise ValueError(f"a value network takes {FEATURES} features to one value, not "
                             f"{self.weights[0].shape[0]} to {self.weights[-1].shape[1]}")

    @classmethod
    def load(cls, path: str | Path | None = None) -> ValueNet:
        """The network in ``path`` (default: the shipped `default_weights`)."""
        try:
            import numpy as np
        except ImportError as error:  # pragma: no cover - numpy comes with the bots extra
            raise ImportError("the learned evaluation needs numpy (pip install "
                              "'scout-arena[bots]')") from error
        with np.load(path or default_weights()) as data:
            layers = sum(1 for name in data.files if name.startswith("w"))
            return cls([data[f"w{i}"] for i in range(layers)],
                       [data[f"b{i}"] for i in range(layers)])

    def save(self, path: str | Path, **extra: int) -> None:
        arrays: dict[str, FloatArray | int] = {f"w{i}": w for i, w in enumerate(self.weights)}
        arrays.update({f"b{i}": b for i, b in enumerate(self.biases)})
        arrays.update(extra, features=FEATURES)
        with open(path, "wb") as file:  # savez would add ".npz" to a name without it
            self._np.savez(file, allow_pickle=False, **arrays)

    def predict(self, rows: Sequence[Sequence[float]] | FloatArray) -> FloatArray:
        """One value per row of features."""
        np = self._np
        x = np.asarray(rows, dtype=np.float32)
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            x = x @ w
            x += b
            if i < last:
                np.maximum(x, 0.0, out=x)
        result: FloatArray = x[:, 0]
        return result

    def seat_values(self, state: State) -> list[float]:
        """Every seat's value of ``state`` (a round in play), in one batch."""
        values: list[float] = self.predict(seat_rows(state)).tolist()
        return values
