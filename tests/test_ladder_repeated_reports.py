"""A result reported twice at once (a node sends its report again when its link comes back,
while the ladder still stores the first) is rated once, in memory as in the database."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from scout_arena.local import make_bot, play_match
from scout_arena.ratings import Rating
from scout_arena.record import build_record, record_to_json
from scout_ladder.flight import Flight
from scout_ladder.nodes import NodeSession
from scout_ladder.recompute import check
from scout_ladder.repository import Repository
from scout_ladder.service import Ladder, LadderConfig


def test_a_report_sent_again_while_the_first_is_stored_is_rated_once(tmp_path: Path) -> None:
    repo = Repository(f"sqlite:///{tmp_path / 'ladder.db'}")
    repo.migrate()
    for name in ("ann", "bob", "cid"):
        repo.register_bot(name, f"owner-{name}")

    async def main() -> tuple[list[tuple[bool, str]], dict[str, Rating]]:
        ladder = Ladder(repo, LadderConfig(port=0, node_token="nodes", rng_seed=3))
        await ladder.start()
        try:
            names = ["ann", "bob", "cid"]
            seed = await ladder.flights.write_intent("m-twice", names, None)
            assert seed is not None
            state = play_match([make_bot("greedy", i) for i in range(3)], seed % 2**32)
            record_json = json.dumps(record_to_json(build_record(
                state, names, match_id="m-twice", meta={"status": "finished"})))
            node = NodeSession("n-1", "127.0.0.1:7001", "n1", 4, "0", False, time.time())
            node.matches.add("m-twice")
            ladder.flights.flights["m-twice"] = Flight("m-twice", "m-twice", None,
                                                       players=tuple(names), node=node.address)
            answers = await asyncio.gather(
                ladder.node_match_ended(node, "m-twice", record_json, ""),
                ladder.node_match_ended(node, "m-twice", record_json, ""))
            return list(answers), dict(ladder.ratings.ratings)
        finally:
            await ladder.stop()

    answers, in_memory = asyncio.run(main())
    stored = repo.ratings()
    report = check(repo.rating_snapshot())
    repo.close()
    assert answers[0] == (True, "rated")
    assert report.matches == 1 and report.differences == (), report.differences
    assert {n: (r.mu, r.sigma) for n, r in in_memory.items()} == \
        {n: (r.mu, r.sigma) for n, r in stored.items()}
