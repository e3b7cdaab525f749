"""``scout-arena ladder nodes``: the referee nodes of a running ladder, attached and lost.

The node list lives in the running ladder (it is no database fact), so the command asks the
ladder's web server (``ladder serve --web-port``) for /api/nodes: what the Nodes page shows.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from datetime import UTC, datetime
from typing import TypeVar

ParserT = TypeVar("ParserT", bound=argparse.ArgumentParser)
TIMEOUT_S = 10.0


def add_nodes_command(ladder_sub: argparse._SubParsersAction[ParserT]) -> None:
    nodes = ladder_sub.add_parser(
        "nodes", help="list a running ladder's referee nodes, attached and lately lost")
    nodes.add_argument("--web", required=True, metavar="URL",
                       help="the ladder's web address (ladder serve --web-port), e.g. "
                            "http://127.0.0.1:8080")
    nodes.add_argument("--json", action="store_true", help="print /api/nodes as it is")
    nodes.set_defaults(func=cmd_nodes)


def _when(value: object) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return "?"


def format_node(node: dict[str, object]) -> str:
    head = f"{node.get('name', '?')}  {node.get('address', '?')}  {node.get('state', '?')}"
    if node.get("state") == "lost":
        return f"{head} at {_when(node.get('lost_at'))}: {node.get('lost_reason') or '?'}"
    return (f"{head}  {node.get('matches', 0)}/{node.get('capacity', 0)} matches, "
            f"{node.get('connected_bots', 0)} bots, last heartbeat "
            f"{node.get('heartbeat_age_s', 0):.1f} s ago, since {_when(node.get('attached_at'))}")


def cmd_nodes(args: argparse.Namespace) -> int:
    url = args.web.rstrip("/") + "/api/nodes"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as reply:
            nodes = json.loads(reply.read())["nodes"]
    except urllib.error.HTTPError as exc:
        why = "this ladder plays on no referee node" if exc.code == 404 else f"HTTP {exc.code}"
        print(f"scout-arena ladder nodes: {url}: {why}", file=sys.stderr)
        return 1
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"scout-arena ladder nodes: cannot read {url}: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(nodes, indent=1))
    elif not nodes:
        print("no referee node is attached")
    for node in [] if args.json else nodes:
        print(format_node(node))
    return 0
