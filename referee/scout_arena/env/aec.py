"""SCOUT as a PettingZoo AEC environment, 2 to 5 seats, on the rules engine.

``ScoutEnv(num_players=4)`` (or `env()`, the PettingZoo-style factory with the usual wrappers).
Agents are ``seat_0`` .. ``seat_{n-1}``. Each observation is a dict: ``observation``, the seat's
vector (`ObservationLayout`, docs/env.md), and ``action_mask``, int8 over the flat action ids
(`ActionCodec`), all zero for a seat that is not to act. The rotation phase is played as turns
in seat order (seat 0 first), each seat choosing id 0 (keep) or 1 (rotate).

Rewards: each seat's round score as the round ends (the sum over a match is its match score),
or, with ``match_reward_only=True``, nothing until the match ends and then the match score.
``reset(seed=s)`` deals with the engine's seeded deal (`State.new(n, s)`, the deal
``scout-arena play --seed s`` plays); ``reset()`` after that draws the next seed from a
generator seeded by ``s``. A finished (or stopped) episode's `match_record()` is a
`MatchRecord` that `scout_arena.record.replay` accepts.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, ClassVar

import gymnasium
import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv
from pettingzoo.utils import wrappers
from scout_rules import IllegalAction, MalformedAction, OutOfTurn, State
from scout_rules.cards import MASK64

from ..record import MatchRecord, build_record
from .actions import ActionCodec
from .known import KnownCards
from .masks import Mask, apply_decision, legal_mask, seat_to_decide
from .observation import ObservationLayout, Vector
from .render import describe_table

Obs = dict[str, Vector | Mask]
"""An observation: the seat's ``observation`` vector and its ``action_mask``."""


class ScoutEnv(AECEnv[str, Obs, int | None]):  # type: ignore[misc]
    """One SCOUT match per episode; see the module docstring for the conventions."""

    metadata: ClassVar[dict[str, Any]] = {  # Any: pettingzoo's free-form metadata dict
        "name": "scout_v0", "render_modes": ["ansi", "human"], "is_parallelizable": False}

    def __init__(self, num_players: int = 4, render_mode: str | None = None,
                 match_reward_only: bool = False) -> None:
        super().__init__()
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode is one of {self.metadata['render_modes']} or None, "
                             f"not {render_mode!r}")
        self.num_players = num_players
        self.codec = ActionCodec(num_players)
        self.layout = ObservationLayout(num_players)
        self.render_mode = render_mode
        self.match_reward_only = match_reward_only
        self.possible_agents = [f"seat_{s}" for s in range(num_players)]
        self._seat_of = {agent: s for s, agent in enumerate(self.possible_agents)}
        self._observation_space = spaces.Dict({
            "observation": spaces.Box(self.layout.low, self.layout.high, dtype=np.float32),
            "action_mask": spaces.Box(0, 1, (self.codec.size,), dtype=np.int8),
        })
        self._action_space = spaces.Discrete(self.codec.size)
        self._seeds: random.Random | None = None
        self.state_: State | None = None
        self.deal_seed: int | None = None

    # ----- spaces -------------------------------------------------------------------------

    def observation_space(self, agent: str) -> spaces.Dict:
        return self._observation_space

    def action_space(self, agent: str) -> spaces.Discrete:
        return self._action_space

    # ----- episode ------------------------------------------------------------------------

    @property
    def match(self) -> State:
        """The engine state of the current episode (reset() first)."""
        if self.state_ is None:
            raise RuntimeError("call reset() before using the environment")
        return self.state_

    def reset(self, seed: int | None = None, options: dict[str, object] | None = None) -> None:
        if seed is not None:
            if not 0 <= seed <= MASK64:
                raise ValueError(f"a seed is an unsigned 64-bit integer, not {seed}")
            self._seeds = random.Random(seed)
            deal_seed = seed
        else:
            if self._seeds is None:
                self._seeds = random.Random()
            deal_seed = self._seeds.getrandbits(64)
        self.deal_seed = deal_seed
        self.state_ = State.new(self.num_players, deal_seed)
        self._known = KnownCards(self.num_players, self.layout.hand_size)
        self._mask: Mask | None = None
        self.agents = self.possible_agents[:]
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos: dict[str, dict[str, object]] = {agent: {} for agent in self.agents}
        self._select()

    def _select(self) -> None:
        seat = seat_to_decide(self.match)
        if seat is not None:
            self.agent_selection = self.possible_agents[seat]

    def observe(self, agent: str) -> Obs:
        seat = self._seat_of[agent]
        state = self.match
        observation = state.observation(seat)
        self._known.sync(observation, self.layout.hand_size)
        vector: Vector = self.layout.encode(observation, self._known)
        if seat_to_decide(state) == seat:
            mask = self._current_mask()
        else:
            mask = np.zeros(self.codec.size, np.int8)
        return {"observation": vector, "action_mask": mask.copy()}

    def _current_mask(self) -> Mask:
        if self._mask is None:
            self._mask = legal_mask(self.match, self.codec)
        return self._mask

    def step(self, action: int | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        state = self.match
        if action is None or not 0 <= int(action) < self.codec.size \
                or not self._current_mask()[int(action)]:
            raise ValueError(f"{agent} may not take action {action!r}: it is not in the mask")
        decision = self.codec.decode(int(action))
        rounds_done = len(state.round_results)
        try:
            apply_decision(state, decision)
        except (IllegalAction, MalformedAction, OutOfTurn) as exc:  # the mask said legal
            raise AssertionError(f"the engine refused masked action {action}: {exc}") from exc
        self._mask = None
        self._cumulative_rewards[agent] = 0.0
        self._clear_rewards()
        if len(state.round_results) > rounds_done and not self.match_reward_only:
            for seat, score in enumerate(state.round_results[-1].scores):
                self.rewards[self.possible_agents[seat]] = float(score)
        if state.is_over:
            if self.match_reward_only:
                for seat, total in enumerate(state.scores):
                    self.rewards[self.possible_agents[seat]] = float(total)
            self.terminations = dict.fromkeys(self.agents, True)
        self._accumulate_rewards()
        self._select()
        if self.render_mode == "human":
            self.render()

    # ----- output -------------------------------------------------------------------------

    def render(self) -> str | None:
        """The whole table as text (every hand: this is a spectator's debugging view, not an
        observation). "ansi" returns it, "human" prints it."""
        if self.render_mode is None:
            gymnasium.logger.warn("render() was called without a render_mode; set one")
            return None
        text = describe_table(self.match, self.possible_agents)
        if self.render_mode == "ansi":
            return text
        print(text)
        return None

    def match_record(self, players: Sequence[str] | None = None,
                     match_id: str | None = None) -> MatchRecord:
        """The episode as a match record (format v1 via `record_to_json`/`dump_record`),
        finished or not, which `replay()` accepts."""
        names = list(players) if players is not None else self.possible_agents
        return build_record(self.match, names, match_id=match_id,
                            meta={"source": "scout_arena.env", "seed": self.deal_seed})

    def close(self) -> None:
        """Nothing to release: the engine holds no resources."""


def env(num_players: int = 4, render_mode: str | None = None,
        match_reward_only: bool = False) -> AECEnv[str, Obs, int | None]:
    """`ScoutEnv` inside PettingZoo's standard wrappers for discrete, masked games (illegal
    actions end the episode with a penalty instead of raising, order is enforced)."""
    wrapped: AECEnv[str, Obs, int | None] = ScoutEnv(num_players, render_mode,
                                                      match_reward_only)
    wrapped = wrappers.TerminateIllegalWrapper(wrapped, illegal_reward=-1)
    wrapped = wrappers.AssertOutOfBoundsWrapper(wrapped)
    wrapped = wrappers.OrderEnforcingWrapper(wrapped)
    return wrapped

