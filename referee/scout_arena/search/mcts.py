"""Information-set Monte Carlo tree search (single-observer ISMCTS, Cowling, Powley and Whitehouse
2012) over the engine, to the end of the round in progress.

Each iteration draws one determinization of the hidden hands (`InformationSet.determinize`,
preferring fills in which every opponent holds its hand the more playable way up, as it chose
at the deal: `knowledge.Reads`), walks the one shared tree from the root choosing among the
children whose actions are legal in that determinization by UCB1 with availability counts,
adds one child, plays the round out with the greedy rollout policy and backs up one reward per
seat: every seat's node statistics are from its own point of view, so opponents are searched
as maximising their own result. Below an opponent's Show the tree branches on the faces shown,
what the searching seat would see, rather than on the hand positions alone.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scout_rules import Action, InformationSet, Scout, State
from scout_rules.playout import candidates, greedy_action, round_scores

from .knowledge import Reads

if TYPE_CHECKING:
    from .value import ValueNet

__all__ = ["DEFAULT_SAMPLE_TRIES", "SearchResult", "TreeNode", "Width", "reward", "rollout",
           "search"]

#: Fills drawn per determinization, keeping the first that agrees with the reads.
DEFAULT_SAMPLE_TRIES = 4


class TreeNode:
    """One node of the tree: the statistics of the action that led here, for its actor."""

    __slots__ = ("avail", "children", "seen", "total", "visits")

    def __init__(self) -> None:
        self.children: dict[Action, TreeNode] = {}
        self.seen: dict[tuple[int, ...], TreeNode] | None = None
        self.visits = 0
        self.avail = 0
        self.total = 0.0

    def after_show(self, faces: tuple[int, ...]) -> TreeNode:
        """The node that follows this opponent's Show when it showed ``faces``: the tree below
        it is keyed by what the searching seat sees, not by the hand position shown, which
        holds different cards in different determinizations."""
        if self.seen is None:
            self.seen = {}
        node = self.seen.get(faces)
        if node is None:
            node = self.seen[faces] = TreeNode()
        return node


@dataclass(frozen=True, slots=True)
class Width:
    """How many Scouts (per end and way up) and Scout & Shows the tree tries at a node, at the
    root and below it (`scout_rules.playout.candidates`); every legal Show is always tried."""

    root_scouts: int = 3
    root_combos: int = 6
    scouts: int = 2
    combos: int = 4

    @classmethod
    def for_players(cls, num_players: int) -> Width:
        """The default at each table size: with 2 and 3 players one Scout per end and way up
        below the root (a narrower tree, searched deeper) did better than two; with 4 and 5
        it did not (see the search README)."""
        return cls(scouts=1) if num_players <= 3 else cls()


@dataclass(frozen=True, slots=True)
class SearchResult:
    """The action chosen, how many iterations chose it, each root action's statistics, and
    the tree itself (for analysis)."""

    action: Action
    iterations: int
    stats: tuple[tuple[Action, int, float], ...]  # action, visits, mean reward
    root: TreeNode = field(repr=False, compare=False)


def reward(scores: Sequence[int], round_index: int, round_start_scores: Sequence[int]
           ) -> list[float]:
    """Each seat's reward for round ``round_index`` ended with match ``scores``, in about
    [-1, 1]: its round score against the others' (half against their mean, half against the
    best of them), over 10 points; in the match's last round also +-0.5 for finishing first or
    not (a win is what counts there)."""
    n = len(scores)
    rs = [scores[s] - round_start_scores[s] for s in range(n)]
    total = sum(rs)
    best_rs = _best_others(rs)
    last = round_index + 1 >= n  # rounds in a match: one per player
    best_scores = _best_others(scores) if last else best_rs
    out = []
    for s in range(n):
        mine = rs[s]
        value = 0.05 * (mine - (total - mine) / (n - 1)) + 0.05 * (mine - best_rs[s])
        if last:
            best_other = best_scores[s]
            value = 0.5 * value + (0.5 if scores[s] > best_other else
                                   (0.0 if scores[s] == best_other else -0.5))
        out.append(value)
    return out


def _best_others(values: Sequence[int]) -> list[int]:
    """For each seat, the highest value among the other seats'."""
    top = max(values)
    first = values.index(top)
    second = max(v for i, v in enumerate(values) if i != first)
    return [second if i == first else top for i in range(len(values))]


def rollout(state: State, round_start_scores: Sequence[int]) -> list[float]:
    """Every seat's `reward` once the round is played out by the greedy policy (``state`` is
    used up; see `round_scores`)."""
    index = state.round_index
    return reward(round_scores(state), index, round_start_scores)


def _root_prior(state: State, actions: Sequence[Action], net: ValueNet,
                start_scores: Sequence[int], weight: float) -> dict[Action, float]:
    """``weight`` x the net's value, for the seat to act, of the position after each action
    (the round's exact reward when the action ends it). Only the seat's own hand and public
    counters enter the features, so the determinization's hidden cards do not matter."""
    from .value import features

    seat = state.current_seat
    assert seat is not None
    rows: list[list[float]] = []
    exact: dict[int, float] = {}
    for i, action in enumerate(actions):
        after = state.clone()
        after.apply(action)
        if after.is_over:
            exact[i] = rollout(after, start_scores)[seat]
            rows.append(features(state, seat))  # a placeholder row, replaced below
        else:
            rows.append(features(after, seat))
    values = net.predict(rows).tolist()
    return {a: weight * exact.get(i, values[i]) for i, a in enumerate(actions)}


def search(info: InformationSet, rng: random.Random, *, iterations: int | None,
           deadline: float | None, exploration: float = 0.7,
           clock: Callable[[], float] = time.perf_counter,
           root_actions: Sequence[Action] | None = None,
           opponents_search: bool = True, sample_tries: int = DEFAULT_SAMPLE_TRIES,
           min_iterations: int = 0, hard_deadline: float | None = None,
           width: Width | None = None, net: ValueNet | None = None,
           net_weight: float = 1.0, prior: float = 0.0, observe: bool = True,
           read_scouts: bool = False, read_rotations: bool = True
           ) -> SearchResult | None:
    """Search from ``info`` until ``iterations`` are done or ``clock()`` passes
    ``deadline`` (whichever comes first; at least one must be given). None when not even one
    iteration fit in the time. ``min_iterations``: go on past ``deadline`` until this many are
    done, but never past ``hard_deadline``.

    ``opponents_search`` (default): every seat chooses in the tree by its own statistics
    (multi-player ISMCTS); False: the other seats play the rollout policy inside the tree too,
    so the tree holds only this seat's decisions (cheaper, but measured weaker against greedy).
    ``sample_tries``: draws per determinization to find hands that agree with the opponents'
    rotation choices (``read_rotations``, default) and Scouts (``read_scouts``; see
    `knowledge.Reads`); 1: uniform fills. ``width``: the actions tried at a node (`Width`).
    ``observe`` (default): below an opponent's Show the tree branches on the faces it showed
    (`TreeNode.after_show`); False: on the hand positions alone, as in plain SO-ISMCTS.

    ``net`` (`value.ValueNet`): a learned evaluation. At a leaf its values for every seat count
    ``net_weight`` and the greedy rollout's the rest (1: no rollout at all). ``prior`` > 0:
    the root's actions are ranked by the net's value of the position after them (for this
    seat, on the first determinization), tried in that order, and that value, times ``prior``
    and shrinking as 1 / (1 + visits), is added to their UCB1 score (progressive bias)."""
    if iterations is None and deadline is None:
        raise ValueError("search needs an iteration count or a deadline")
    root = TreeNode()
    seat = info.seat
    start_scores = info.scores
    reads = (Reads.of(info, scouts=read_scouts, rotations=read_rotations)
             if sample_tries > 1 and (read_scouts or read_rotations) else None)
    shape = width or Width()
    done = 0
    fixed_root: list[Action] | None = list(root_actions) if root_actions is not None else None
    bias: dict[Action, float] | None = None
    leaf_net = net if net_weight > 0 else None
    while iterations is None or done < iterations:
        if deadline is not None or hard_deadline is not None:
            now = clock()
            if hard_deadline is not None and now >= hard_deadline:
                break
            if deadline is not None and now >= deadline and done >= min_iterations:
                break
        state = (info.determinize(rng) if reads is None
                 else info.determinize(rng, tries=sample_tries, misfits=reads.misfits))
        if fixed_root is None:
            fixed_root = candidates(state, shape.root_scouts, shape.root_combos)
        if prior > 0 and net is not None and bias is None:
            bias = ranked = _root_prior(state, fixed_root, net, start_scores, prior)
            fixed_root.sort(key=lambda a: -ranked[a])
        node = root
        path: list[tuple[TreeNode, int]] = []
        while not state.is_over:
            actor = state.current_seat
            assert actor is not None
            if actor != seat and not opponents_search:
                state.apply(greedy_action(state))
                continue
            actions = (fixed_root if node is root
                       else candidates(state, shape.scouts, shape.combos))
            untried: Action | None = None
            best: TreeNode | None = None
            best_action: Action | None = None
            best_value = -math.inf
            children = node.children
            for action in actions:
                child = children.get(action)
                if child is None:
                    if untried is None:
                        untried = action
                    continue
                child.avail += 1
                if untried is None:
                    value = (child.total / child.visits
                             + exploration * math.sqrt(math.log(child.avail) / child.visits))
                    if bias is not None and node is root:
                        value += bias[action] / (1 + child.visits)
                    if value > best_value:
                        best, best_action, best_value = child, action, value
            if untried is not None:
                child = TreeNode()
                child.avail = 1
                children[untried] = child
                state.apply(untried)
                path.append((child, actor))
                break
            assert best is not None and best_action is not None
            state.apply(best_action)
            path.append((best, actor))
            node = best
            if observe and actor != seat and not isinstance(best_action, Scout):
                node = node.after_show(tuple(c.face for c in state.active))
        if leaf_net is None or state.is_over:
            rewards = rollout(state, start_scores)
        else:
            rewards = leaf_net.seat_values(state)
            if net_weight < 1:
                played = rollout(state, start_scores)
                rewards = [net_weight * v + (1 - net_weight) * r
                           for v, r in zip(rewards, played, strict=True)]
        for child, actor in path:
            child.visits += 1
            child.total += rewards[actor]
        done += 1
    if not root.children:
        return None
    stats = tuple(sorted(((a, c.visits, c.total / c.visits) for a, c in root.children.items()),
                         key=lambda t: (-t[1], -t[2])))
    return SearchResult(stats[0][0], done, stats, root)
