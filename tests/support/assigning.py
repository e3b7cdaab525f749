"""A main referee and a node referee in one process, for testing bots that follow assignments.

``python tests/support/assigning.py TOKENS_JSON`` starts a main referee (the bots' one address,
with the tokens given) and a node referee (which knows no token: bots reach it only with a
ticket), prints ``{"main": ADDRESS, "node": ADDRESS}`` and then obeys JSON lines on stdin:

- ``{"assign": ID, "bots": [names by seat], "seed": N}``: the node holds match ID with a fresh
  ticket per seat, and each bot is sent its MatchAssignment on its main stream (PROTOCOL.md
  §3.8), naming the node's address or ``"address"`` (a proxy in front of it). As it ends,
  ``{"ended": ID, "record": RECORD_JSON}`` is printed.
- ``{"connected": true}``: prints ``{"connected_main": [...], "connected_node": [...]}``.
- end of input: both referees stop (FINISHED goodbye) and the process exits.

This is the ladder's hand-off without the ladder, so each kit's conformance test needs no
database; the ladder's own tests (tests/test_ladder_nodes.py) cover the rest.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
from typing import Any

from scout_arena.record import MatchRecord, record_to_json
from scout_arena.server import RefereeFacade
from scout_rules.protocol import TimeControl


def emit(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def main(tokens: dict[str, str]) -> None:
    main_ref = RefereeFacade(tokens, reconnect_grace_s=15.0)
    node = RefereeFacade({}, reconnect_grace_s=15.0)

    def ended(record: MatchRecord) -> None:
        emit({"ended": record.match_id, "record": record_to_json(record)})

    node.on_match_finished(ended)
    node.on_hosting_failed(lambda match_id, why: emit({"failed": match_id, "why": why}))
    await main_ref.start()
    await node.start()
    emit({"main": main_ref.address, "node": node.address})
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        command = json.loads(line)
        if "assign" in command:
            match_id = command["assign"]
            seats = [(name, f"ticket-{secrets.token_urlsafe(12)}") for name in command["bots"]]
            node.host_match(match_id, seats, int(command.get("seed", 1)),
                            TimeControl(decision_ms=int(command.get("decision_ms", 1000)),
                                        time_bank_ms=int(command.get("time_bank_ms", 10_000))),
                            join_timeout_s=float(command.get("join_timeout_s", 15.0)))
            address = command.get("address", node.address)
            for name, ticket in seats:
                main_ref.send_assignment(name, match_id, address, ticket)
        elif "connected" in command:
            emit({"connected_main": sorted(main_ref.connected_bots()),
                  "connected_node": sorted(node.connected_bots())})
    await node.stop(finished=True)
    await main_ref.stop(finished=True)


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
